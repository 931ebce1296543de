"""A regproc column compared with 0, as PostgreSQL compares it: as its function's OID,
0 where there is none (shown ``-``).

The emulated catalog keeps a regproc as the function's name (a VARCHAR: what PostgreSQL
shows), which DuckDB would read as a number to compare it with one (``invalid input
syntax for type integer: "-"``). ADBC's PostgreSQL driver asks for the types it can read
so: ``WHERE (typreceive != 0 OR typsend != 0)``. Compared with 0, the name stands for 0
when it is ``-`` and for a positive OID otherwise (a column of numbers that a subquery
names so stands for itself).

Compared with another number or an OID column (Npgsql 4's ``JOIN pg_proc ON pg_proc.oid
= a.typreceive``), or cast to oid, the name stands for its function's OID in the
emulated pg_proc (builtin_procs: every function the catalog's rows name). Compared with
text (``typreceive = 'array_recv'``) or another regproc column, names compare as they are.
"""

from __future__ import annotations

from sqlglot import exp

from proxy.catalog.functions import macro_call
from proxy.catalog.relations import RELATIONS

#: The catalog's regproc columns (no other relation has a column of these names).
REGPROC_COLUMNS = frozenset(
    name for relation in RELATIONS.values() for name, pg_type in relation.columns
    if pg_type == "regproc"
)  # fmt: skip
#: The catalog's OID columns (of type oid in every relation that has one of the name).
OID_COLUMNS = frozenset(
    name for relation in RELATIONS.values() for name, pg_type in relation.columns
    if pg_type == "oid"
) - frozenset(
    name for relation in RELATIONS.values() for name, pg_type in relation.columns
    if pg_type != "oid"
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
    elif _is_regproc(node.this) and _is_oid(node.expression):
        node.set("this", regproc_oid(node.this))
    elif _is_regproc(node.expression) and _is_oid(node.this):
        node.set("expression", regproc_oid(node.expression))
    return node


def regproc_oid(value: exp.Expression) -> exp.Expression:
    """A regproc value (a function's name, ``-``, or a number) as its OID."""
    return macro_call("regproc_oid", value)


def is_regproc_column(node: exp.Expression) -> bool:
    """Whether ``node`` is one of the catalog's regproc columns (as its name tells)."""
    return _is_regproc(node)


def _is_oid(node: exp.Expression) -> bool:
    """A number, or one of the catalog's OID columns."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Literal):
        return not node.is_string
    return isinstance(node, exp.Column) and node.name in OID_COLUMNS


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
