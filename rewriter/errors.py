"""Errors of the rewriter. Every rejection carries a SQLSTATE and says what to do instead."""

from __future__ import annotations

SUPPORTED_FORMS = (
    "dpproxy answers SELECT <COUNT(*), COUNT(expr), COUNT(DISTINCT <privacy unit>), "
    "SUM(expr), AVG(expr), MEDIAN(expr), PERCENTILE_CONT(p) WITHIN GROUP (ORDER BY expr), "
    "arithmetic over them> FROM <protected table> [WHERE ...] "
    "[GROUP BY <keys with a public domain, or from the data with δ > 0>] [HAVING ...] "
    "[ORDER BY ...] [LIMIT n]; "
    "see docs/sql.md"
)


class RewriterError(Exception):
    """Root of the rewriter's exceptions."""


class Rejected(RewriterError):
    """The query cannot be answered with differential privacy as written.

    ``sqlstate`` is the PostgreSQL error code the client receives; ``message`` names the
    problem, ``hint`` says what the analyst can do instead. Rejections cost no budget.
    """

    def __init__(self, message: str, *, sqlstate: str = "0A000", hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate
        if hint is None and sqlstate == "0A000":
            hint = SUPPORTED_FORMS
        self.hint = hint


class PolicyError(RewriterError):
    """A table policy is inconsistent (bad bounds, unknown column, ...)."""
