"""Errors of the rewriter. Every rejection carries a SQLSTATE and says what to do instead."""

from __future__ import annotations

SUPPORTED_FORMS = (
    "dpproxy answers aggregate queries of the form "
    "SELECT COUNT(*) | COUNT(col) | SUM(col) | AVG(col) [, ...] FROM <protected table> "
    "[WHERE <condition on that table's columns>]"
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
        self.hint = hint if hint is not None else SUPPORTED_FORMS


class PolicyError(RewriterError):
    """A table policy is inconsistent (bad bounds, unknown column, ...)."""
