"""Values of types dpproxy does not read (kind OTHER) compared with, or chosen beside, one
another.

The catalog knows such a column only as "other": a time, an interval, a uuid, a blob, a
JSON, an ENUM, a list… Two of them may be of different types, which DuckDB converts one
to the other row by row (``interval_col = json_col`` casts each JSON value to an INTERVAL,
``enum_col = uuid_col`` each label to a UUID): that fails on the values that do not convert,
and the error would reveal them. PostgreSQL refuses most such pairs whatever the data
(``json = json`` has no operator). So they are refused, unless they are columns of one
type (the engine's name of it, ``ColumnInfo.other_type``: a uuid key joined with a
public table's uuid); a value of such a type may still be counted and tested for NULL.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.errors import Rejected
from rewriter.passes.value_types.kinds import NULL, OTHER
from rewriter.scope import Scope

#: Types PostgreSQL has no equality or order of (information_schema's names).
_UNCOMPARED = frozenset({"json", "xml", "point"})


def refuse_other_pairs(
    node: exp.Expr,
    operands: list[exp.Expr],
    each: list[str],
    scope: Scope,
    where: str,
    *,
    compared: bool,
) -> None:
    """Raise Rejected if two of the values ``node`` compares (``compared``) or chooses among
    (``operands``, of kinds ``each``) are of types dpproxy does not read, but columns of one
    type, or if it compares one with NULL (PostgreSQL has no ``json = unknown``; the
    comparison is never true: IS NULL is meant)."""
    if compared and OTHER in each and NULL in each:
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where} compares a value of a type dpproxy "
            "does not read with NULL, which PostgreSQL may refuse whatever the data (and "
            "which is never true)",
            hint="write x IS NULL",
        )
    others = [o for o, kind in zip(operands, each, strict=True) if kind == OTHER]
    names = {_type_name(o, scope) for o in others}
    if (compared or isinstance(node, (exp.Greatest, exp.Least))) and names & _UNCOMPARED:
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where} compares values of type "
            f"{', '.join(sorted(n for n in names if n in _UNCOMPARED))}, which PostgreSQL cannot "
            "compare: it would fail whatever the data, after the query was charged",
            hint="compare such a column with IS NULL or IS NOT NULL only, or count it",
        )
    if len(others) < 2 or (None not in names and len(names) == 1):
        return  # uuid_col = other_uuid_col: one type, nothing converted
    raise Rejected(
        f"{node.sql(dialect='postgres')} in {where} compares, or chooses between, values of "
        "types dpproxy does not read (a time, interval, uuid, bytea, json, enum, array…): "
        "the database could convert one to the other's type row by row, which fails on "
        "some values, and the error would reveal them",
        hint="compare such a column with IS NULL or IS NOT NULL only, or count it",
    )


def _type_name(node: exp.Expr, scope: Scope) -> str | None:
    """The engine's name of the type of ``node``, a column of type OTHER; None if not a
    column, or unknown."""
    node = node.unnest()
    return scope.info(node).other_type if isinstance(node, exp.Column) else None
