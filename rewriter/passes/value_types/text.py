"""Functions and operators of a text, applied to a value that is not one.

``lower(stay > 1)`` or ``(cost > 1) LIKE 'a%'`` fail on every row, after the query was
charged; LIKE on a value dpproxy does not read as text (bytea, citext, an array) can fail
too, under the default collation the PostgreSQL SQL reads it with
(``rewriter.passes.collations``).
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.errors import Rejected
from rewriter.output_names import function_name
from rewriter.passes.value_types.kinds import BOOLEAN, DATE, NUMBER, OTHER, TIME, ZONED

#: Functions and operators of a text (their first argument): any other value fails.
_ON_TEXT = (exp.Lower, exp.Upper, exp.Trim, exp.Substring, exp.Length, exp.Like, exp.ILike)
_NOT_TEXT = frozenset({NUMBER, DATE, TIME, ZONED, BOOLEAN})


def check_text_argument(node: exp.Expr, found: dict[int, str], where: str) -> None:
    """Raise Rejected if ``node`` is a function or operator of a text applied to a value
    of another kind (the kinds of its arguments in ``found``, by ``id``)."""
    if isinstance(node, (exp.Like, exp.ILike)) and found.get(id(node.this)) == OTHER:
        # bytea, citext, arrays: the PostgreSQL SQL reads the text LIKE matches under the
        # default collation (passes.collations), which bytea refuses on every row.
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where}: LIKE needs a text value, not a "
            "value of a type dpproxy does not read as text (bytea, citext, an array); the "
            "database could fail on it after the query was charged",
            hint="apply LIKE to a text or varchar column",
        )
    if isinstance(node, (*_ON_TEXT, exp.DPipe)) and OTHER in _text_kinds(node, found):
        # lower(uuid_col), length(time_col), list_col || 'a': DuckDB has no such function
        # of a TIME, UUID, BLOB, LIST… and fails on every row, after the charge.
        shown = f"{function_name(node)}()" if isinstance(node, exp.Func) else "||"
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where}: {shown} needs a "
            "text value, not a value of a type dpproxy does not read as text (a time, uuid, "
            "bytea, interval, array, struct…); the database could fail on every row, after "
            "the query was charged",
            hint="apply it to a text or varchar column",
        )
    if isinstance(node, _ON_TEXT) and found.get(id(node.this)) in _NOT_TEXT:
        # lower(stay > 1), (cost > 1) LIKE 'a%' fail on every row, after the charge.
        name = "LIKE" if isinstance(node, (exp.Like, exp.ILike)) else f"{function_name(node)}()"
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where}: {name} needs a text value, not a "
            f"{found[id(node.this)]}; the database would fail on every row, after the query "
            "was charged",
            hint="apply it to a text column, or cast the value to text first, e.g. "
            "CAST(stay AS TEXT) LIKE '1%'",
        )


def _text_kinds(node: exp.Expr, found: dict[int, str]) -> set[str | None]:
    """The kinds of the texts ``node`` reads: both sides of ||, else its first argument."""
    if isinstance(node, exp.DPipe):
        return {found.get(id(node.this)), found.get(id(node.expression))}
    return {found.get(id(node.this))}
