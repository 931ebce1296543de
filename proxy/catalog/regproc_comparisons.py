"""A regproc column compared with 0, as PostgreSQL compares it: as its function's OID,
0 where there is none (shown ``-``).

The emulated catalog keeps a regproc as the function's name (a VARCHAR: what PostgreSQL
shows), which DuckDB would read as a number to compare it with one (``invalid input
syntax for type integer: "-"``). ADBC's PostgreSQL driver asks for the types it can read
so: ``WHERE (typreceive != 0 OR typsend != 0)``. Compared with 0, the name stands for 0
when it is ``-`` and for a positive OID otherwise (a column of numbers that a subquery
names so stands for itself). Comparisons with other numbers are left as they were.
"""

from __future__ import annotations

from sqlglot import exp

from proxy.catalog.relations import RELATIONS

#: The catalog's regproc columns (no other relation has a column of these names).
REGPROC_COLUMNS = frozenset(
    name for relation in RELATIONS.values() for name, pg_type in relation.columns
    if pg_type == "regproc"
)  # fmt: skip
_COMPARISONS = (exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE)


def regproc_compared_with_zero(node: exp.Expression) -> exp.Expression:
    """``node`` (translated children), its regproc column made a number when it is
    compared with 0."""
    if not isinstance(node, _COMPARISONS):
        return node
    if _is_zero(node.expression) and _is_regproc(node.this):
        node.set("this", _oid_sign(node.this))
    elif _is_zero(node.this) and _is_regproc(node.expression):
        node.set("expression", _oid_sign(node.expression))
    return node


def _is_zero(node: exp.Expression) -> bool:
    while isinstance(node, exp.Paren):
        node = node.this
    return isinstance(node, exp.Literal) and not node.is_string and node.name == "0"


def _is_regproc(node: exp.Expression) -> bool:
    return isinstance(node, exp.Column) and node.name in REGPROC_COLUMNS


def _oid_sign(column: exp.Expression) -> exp.Expression:
    """0 for ``-``, 1 for a function's name (any OID compares with 0 as 1 does), NULL for
    NULL, and a number for itself."""
    text = exp.cast(column.copy(), exp.DataType.build("VARCHAR"))
    return exp.Case(
        ifs=[
            exp.If(this=exp.Is(this=column, expression=exp.Null()), true=exp.Null()),
            exp.If(
                this=exp.EQ(this=text, expression=exp.Literal.string("-")),
                true=exp.Literal.number(0),
            ),
        ],
        default=exp.func(
            "coalesce",
            exp.TryCast(this=text.copy(), to=exp.DataType.build("BIGINT")),
            exp.Literal.number(1),
        ),
    )
