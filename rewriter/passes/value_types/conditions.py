"""Conditions are booleans.

PostgreSQL refuses a condition of another type (``WHERE cost``: "argument of WHERE must be
type boolean"), whatever the data, after the query was charged. DuckDB casts it to BOOLEAN
row by row: a number is true unless 0, but a text, JSON or ENUM value converts only when
it reads as one ('true', 'f', '1'…), so ``WHERE label`` (or ``CASE WHEN label …``) fails
on the rows holding another text, and the error would reveal them. So the conditions of
WHERE, FILTER, JOIN … ON, CASE WHEN, the operands of AND, OR and NOT, and the value of
``IS [NOT] TRUE | FALSE`` must be booleans (or NULL).
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.errors import Rejected
from rewriter.passes.value_types.kinds import BOOLEAN, LITERAL_TEXT, NULL

_CONDITION_KINDS = frozenset({BOOLEAN, NULL})
_LOGIC = (exp.And, exp.Or, exp.Not, exp.Xor)


def check_conditions(node: exp.Expr, found: dict[int, str], where: str) -> None:
    """Raise Rejected if ``node`` is AND, OR, NOT or IS [NOT] TRUE | FALSE of a value that
    is not a boolean (the kinds of its arguments in ``found``, by ``id``)."""
    if isinstance(node, _LOGIC):
        for child in node.iter_expressions():
            condition(child, found[id(child)], where)
    elif isinstance(node, exp.Is) and isinstance(node.expression, exp.Boolean):
        condition(node.this, found[id(node.this)], where)


def condition(node: exp.Expr, kind: str, where: str) -> None:
    """Raise Rejected if ``node``, used as a condition, is of ``kind`` other than boolean."""
    if kind in _CONDITION_KINDS:
        return
    shown = "text" if kind == LITERAL_TEXT else kind
    raise Rejected(
        f"{node.sql(dialect='postgres')} in {where} is used as a condition, but it is a "
        f"{shown}, not a boolean: PostgreSQL refuses it, and DuckDB would convert each "
        "value to a boolean, which fails on the values that do not read as one",
        sqlstate="42804",
        hint="write a comparison, e.g. WHERE label = 'yes' or WHERE cost > 0",
    )
