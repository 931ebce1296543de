"""A parameter where a number would name a select-list column, bound as a constant.

``GROUP BY 1``, ``ORDER BY 2`` and ``DISTINCT ON (1)`` name the select list's first or
second column; ``GROUP BY $1``, ``ORDER BY $1`` and ``DISTINCT ON ($1)`` do not, whatever
the value: PostgreSQL reads a parameter there as a constant expression of its type
(``ORDER BY $1`` sorts by a constant, which changes no order; ``GROUP BY $1`` groups by a
constant, one group). Also within parentheses (``ORDER BY ($1)``), which PostgreSQL's
grammar drops: ``ORDER BY (2)`` still names a column. Bound as a bare literal
(``proxy.parameters``), the value would be read as a position (psycopg's
``cur.execute("… ORDER BY %s", (2,))`` sorted by the second column), so there it is bound
as a cast to the parameter's type, ``CAST(2 AS INT)``: a constant, as PostgreSQL reads
it, which the audit log shows as such. No I/O.
"""

from __future__ import annotations

from sqlglot import exp

from proxy.protocol import values as v

Type = exp.DataType.Type

#: A parameter's type OID -> the type it is cast to (text for any other).
_CAST_TYPES = {
    v.INT2: Type.SMALLINT,
    v.INT4: Type.INT,
    v.INT8: Type.BIGINT,
    v.OID: Type.BIGINT,
    v.FLOAT4: Type.FLOAT,
    v.FLOAT8: Type.DOUBLE,
    v.NUMERIC: Type.DECIMAL,
    v.BOOL: Type.BOOLEAN,
    v.VARCHAR: Type.VARCHAR,
    v.DATE: Type.DATE,
    v.TIMESTAMP: Type.TIMESTAMP,
    v.TIMESTAMPTZ: Type.TIMESTAMPTZ,
    v.UUID: Type.UUID,
}


def stands_for_position(node: exp.Parameter) -> bool:
    """Whether a literal in ``node``'s place would name a select-list column: an item of
    GROUP BY, ORDER BY (of a query or a window) or DISTINCT ON, parentheses aside."""
    place: exp.Expr = node
    while isinstance(place.parent, exp.Paren):
        place = place.parent
    parent = place.parent
    if isinstance(parent, exp.Group):
        return place.arg_key == "expressions"
    if isinstance(parent, exp.Ordered):
        return place.arg_key == "this" and isinstance(parent.parent, exp.Order)
    if isinstance(parent, exp.Tuple):
        parent = parent.parent
    return isinstance(parent, exp.Distinct) and parent.args.get("on") is not None


def as_constant(literal: exp.Expr, oid: int) -> exp.Expr:
    """``literal`` (a parameter's value of type ``oid``) as a constant that names no
    column: cast to the parameter's type, unless it is a cast already (a date)."""
    if isinstance(literal, exp.Cast):
        return literal
    return exp.Cast(this=literal, to=exp.DataType.build(_CAST_TYPES.get(oid, Type.TEXT)))
