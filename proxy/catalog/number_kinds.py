"""The PostgreSQL type of a number in a catalog query, where the translation can tell it:
what decides how its arithmetic is translated (7/2 is integer division, 7.0/2 numeric).

Read from the translated syntax tree: a constant, a cast (the types casts.py writes), or
an arithmetic node the translation marked with the type PostgreSQL gives it. Anything
else (a column, a function's value, a subquery) is UNKNOWN: DuckDB learns its type when
it binds the query, and the translation leaves the choice to it (proxy.catalog.
arithmetic_macros). PostgreSQL's rules for which type an operator returns are here too.
"""

from __future__ import annotations

import enum

from sqlglot import exp

_KIND = "pg_kind"


class Kind(enum.Enum):
    INT2 = "smallint"
    INT4 = "integer"
    INT8 = "bigint"
    NUMERIC = "numeric"
    FLOAT4 = "real"
    FLOAT8 = "double precision"
    #: A string or NULL constant: PostgreSQL's unknown, which takes the other operand's
    #: type.
    UNTYPED = "unknown"
    #: Not a number (text, dates, intervals, booleans).
    OTHER = "other"
    #: Known only to DuckDB, when it binds the query.
    UNKNOWN = "?"


INTEGERS = (Kind.INT2, Kind.INT4, Kind.INT8)
FLOATS = (Kind.FLOAT4, Kind.FLOAT8)
NUMBERS = (*INTEGERS, Kind.NUMERIC, *FLOATS)

#: The DuckDB type that holds each kind (a numeric's precision and scale aside).
DUCK_TYPES = {
    Kind.INT2: "SMALLINT",
    Kind.INT4: "INTEGER",
    Kind.INT8: "BIGINT",
    Kind.NUMERIC: "DECIMAL",
    Kind.FLOAT4: "FLOAT",
    Kind.FLOAT8: "DOUBLE",
}
_FROM_DUCK = {
    exp.DataType.Type.SMALLINT: Kind.INT2,
    exp.DataType.Type.TINYINT: Kind.INT2,
    exp.DataType.Type.INT: Kind.INT4,
    exp.DataType.Type.BIGINT: Kind.INT8,
    exp.DataType.Type.DECIMAL: Kind.NUMERIC,
    exp.DataType.Type.FLOAT: Kind.FLOAT4,
    exp.DataType.Type.DOUBLE: Kind.FLOAT8,
}
_INT4_MAX = 2**31 - 1
_INT8_MAX = 2**63 - 1


def marked(node: exp.Expression, kind: Kind) -> exp.Expression:
    """``node``, marked as being of PostgreSQL type ``kind``."""
    node.meta[_KIND] = kind
    return node


def kind_of(node: exp.Expression) -> Kind:
    """The PostgreSQL type of the translated ``node``'s value, as far as the tree tells."""
    found = node.meta.get(_KIND)
    if isinstance(found, Kind):
        return found
    if isinstance(node, exp.Paren):
        return kind_of(node.this)
    if isinstance(node, exp.Null):
        return Kind.UNTYPED
    if isinstance(node, exp.Literal):
        return literal_kind(node)
    if isinstance(node, exp.Boolean):
        return Kind.OTHER
    if isinstance(node, exp.Cast):
        return cast_kind(node.args["to"])
    if isinstance(node, exp.Count):
        return Kind.INT8  # count() is a bigint in both
    return Kind.UNKNOWN


def literal_kind(node: exp.Literal) -> Kind:
    """A constant's type: integers are int4, or int8 past it, or numeric past that;
    numbers with a point or an exponent are numeric; strings are unknown."""
    if node.is_string:
        return Kind.UNTYPED
    text = str(node.this)
    negated = text.startswith("-")
    digits = text[1:] if negated else text
    if not digits.isdigit():
        return Kind.NUMERIC
    value = int(digits)
    if value <= _INT4_MAX + negated:
        return Kind.INT4
    return Kind.INT8 if value <= _INT8_MAX + negated else Kind.NUMERIC


def cast_kind(to: exp.Expression) -> Kind:
    """The type of a translated cast's value (DuckDB's type names, as casts.py writes them)."""
    if not isinstance(to, exp.DataType):
        return Kind.OTHER
    if to.this == exp.DataType.Type.DOUBLE and to.expressions:
        # float(p): real up to 24 bits of precision, double precision past them.
        bits = to.expressions[0]
        text = bits.name if isinstance(bits, exp.Expression) else str(bits)
        return Kind.FLOAT4 if text.isdigit() and int(text) <= 24 else Kind.FLOAT8
    return _FROM_DUCK.get(to.this, Kind.OTHER)


def resolved(left: Kind, right: Kind) -> tuple[Kind, Kind]:
    """The operands' types once an unknown one (a string or NULL constant) takes the
    other's type, as PostgreSQL resolves it."""
    if left is Kind.UNTYPED and right in NUMBERS:
        return right, right
    if right is Kind.UNTYPED and left in NUMBERS:
        return left, left
    return left, right


def common(left: Kind, right: Kind) -> Kind | None:
    """The type PostgreSQL's + - * / % give two numbers of these types (both known), None
    if either is not: integers the wider of the two, a numeric with integers numeric,
    real with real real, and any other float double precision."""
    if left not in NUMBERS or right not in NUMBERS:
        return None
    if left in INTEGERS and right in INTEGERS:
        return max(left, right, key=INTEGERS.index)
    if left in FLOATS or right in FLOATS:
        return Kind.FLOAT4 if left is right is Kind.FLOAT4 else Kind.FLOAT8
    return Kind.NUMERIC


def power_kind(left: Kind, right: Kind) -> Kind | None:
    """The type of ``left ^ right``: numeric when both are exact (one a numeric), else
    double precision (integers' powers too); None if either is not a known number."""
    if left not in NUMBERS or right not in NUMBERS:
        return None
    exact = (*INTEGERS, Kind.NUMERIC)
    if left in exact and right in exact and Kind.NUMERIC in (left, right):
        return Kind.NUMERIC
    return Kind.FLOAT8
