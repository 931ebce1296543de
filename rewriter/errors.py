"""Errors of the rewriter. Every rejection carries a SQLSTATE and says what to do instead."""

from __future__ import annotations

import re

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


#: A column as the rewritten SQL names it: qualified with an internal alias (t0, t1, t0_u1).
_INTERNAL_COLUMN = re.compile(r'"t\d+(?:_u\d+)?"\."((?:[^"]|"")+)"')
_PLAIN_NAME = re.compile(r"[a-z_][a-z0-9_$]*")


def readable(rejection: Rejected) -> Rejected:
    """``rejection`` with columns named as an analyst writes them (``cost``), not as the
    rewritten SQL does (``"t0"."cost"``: aliases the analyst never wrote)."""

    def column(match: re.Match[str]) -> str:
        name = match.group(1).replace('""', '"')
        return name if _PLAIN_NAME.fullmatch(name) else match.group(0).split(".", 1)[1]

    message = _INTERNAL_COLUMN.sub(column, rejection.message)
    hint = None if rejection.hint is None else _INTERNAL_COLUMN.sub(column, rejection.hint)
    if message == rejection.message and hint == rejection.hint:
        return rejection
    return Rejected(message, sqlstate=rejection.sqlstate, hint=hint)


class PolicyError(RewriterError):
    """A table policy is inconsistent (bad bounds, unknown column, ...)."""
