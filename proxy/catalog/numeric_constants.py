"""Number constants as PostgreSQL types them, in DuckDB.

PostgreSQL reads 7 as an integer, 3000000000 as a bigint, and 1.5, 1e5 and
9223372036854775808 as numeric values that keep their scale (1e5 is 100000, 1.5e-3 is
0.0015); DuckDB reads 1e5 as a DOUBLE and integers past bigint as HUGEINT. A constant with
a minus sign is one constant for PostgreSQL (-2147483648 is an integer), two tokens for
sqlglot. Numeric constants become exact DECIMALs marked with their value, which the
translation computes with (7.0/2 is computed before the query runs, with PostgreSQL's
scale).
"""

from __future__ import annotations

from decimal import Decimal

from sqlglot import exp

from proxy.catalog.number_kinds import Kind, cast_kind, kind_of, literal_kind, marked
from proxy.catalog.pg_numeric import DUCK_DIGITS, duck_decimal, numeric_text
from proxy.catalog.raised import RaisedError
from proxy.catalog.refusal import CatalogRefused

_VALUE = "pg_value"
_UNFIT = "pg_unfit"
_INT_RANGES = {
    Kind.INT2: (-(2**15), 2**15 - 1),
    Kind.INT4: (-(2**31), 2**31 - 1),
    Kind.INT8: (-(2**63), 2**63 - 1),
}


def negated_constants(tree: exp.Expression) -> exp.Expression:
    """``tree`` (changed in place) with each minus sign before a number constant made
    part of it, as PostgreSQL's grammar does: -(7) and - 7 are the constant -7."""
    for node in list(tree.find_all(exp.Neg)):
        inner = node.this
        while isinstance(inner, exp.Paren):
            inner = inner.this
        if isinstance(inner, exp.Literal) and not inner.is_string:
            text = str(inner.this)
            negative = text[1:] if text.startswith("-") else f"-{text}"
            node.replace(exp.Literal(this=negative, is_string=False))
    return tree


def rewrite_number(node: exp.Literal) -> exp.Expression:
    """A number constant as DuckDB reads it the way PostgreSQL does."""
    kind = literal_kind(node)
    if kind in (Kind.INT4, Kind.INT8) or node.is_string:
        return node
    parent = node.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    if isinstance(parent, exp.Cast) and cast_kind(parent.args["to"]) in (Kind.FLOAT4, Kind.FLOAT8):
        return node  # read as a float (number_casts checks its range)
    text = str(node.this)
    plain = "e" not in text.lower() and len(text.lstrip("-").replace(".", "")) <= DUCK_DIGITS
    if plain and "." in text:
        return node  # DuckDB reads 7.0 as the DECIMAL(2, 1) it is
    try:
        return numeric_constant(Decimal(text))
    except CatalogRefused:
        # Too many digits for a DECIMAL: fine as an operand of a float (1e-308 of
        # x::float8 * 1e-308, which DuckDB reads as a DOUBLE); unfit_constants refuses it
        # anywhere else.
        node.meta[_UNFIT] = True
        return node


def unfit_constants(tree: exp.Expression) -> exp.Expression:
    """``tree`` (translated), unless a numeric constant DuckDB cannot hold is left in it
    other than cast to a float type: refused then (CatalogRefused, 0A000)."""
    for literal in tree.find_all(exp.Literal):
        if not literal.meta.get(_UNFIT):
            continue
        parent = literal.parent
        while isinstance(parent, exp.Paren):
            parent = parent.parent
        if not (isinstance(parent, exp.Cast) and kind_of(parent) in (Kind.FLOAT4, Kind.FLOAT8)):
            numeric_constant(Decimal(str(literal.this)))  # raises its refusal
    return tree


def numeric_constant(value: Decimal) -> exp.Expression:
    """An exact DECIMAL of ``value`` with its scale, marked as a numeric constant."""
    try:
        precision, scale = duck_decimal(value)
    except RaisedError as error:
        raise CatalogRefused(error.message, sqlstate=error.sqlstate) from None
    cast = exp.cast(
        exp.Literal.string(numeric_text(value)),
        exp.DataType.build(f"DECIMAL({precision}, {scale})"),
    )
    cast.meta[_VALUE] = value
    return marked(cast, Kind.NUMERIC)


def constant_value(node: exp.Expression) -> Decimal | None:
    """The value of a translated number constant: a number literal, a numeric constant
    made here, or either in parentheses or cast to an integer type it fits."""
    found = node.meta.get(_VALUE)
    if isinstance(found, Decimal):
        return found
    if isinstance(node, exp.Paren):
        return constant_value(node.this)
    if isinstance(node, exp.Literal) and not node.is_string:
        return Decimal(str(node.this))
    if isinstance(node, exp.Cast) and kind_of(node) in _INT_RANGES:
        inner = constant_value(node.this)
        low, high = _INT_RANGES[kind_of(node)]
        if inner is not None and inner == inner.to_integral_value() and low <= inner <= high:
            return inner
    return None
