"""Casts to number types (smallint, integer, bigint, numeric, real, double precision) as
PostgreSQL computes them, in DuckDB.

DuckDB's DECIMAL without a precision is DECIMAL(18,3) (7::numeric showed 7.000 and
1.23456::numeric 1.235): an unconstrained numeric keeps the value's own scale here, a
constant's exactly. String constants are read as PostgreSQL reads them (typed_text), and
a number constant too large for a float type fails as in PostgreSQL. What overflows when
the query runs fails in DuckDB, whose error reads as PostgreSQL's (engine_errors).
"""

from __future__ import annotations

from decimal import Decimal

from sqlglot import exp

from proxy.catalog.arithmetic_macros import NUMERIC_OF, arithmetic_call
from proxy.catalog.number_kinds import (
    DUCK_TYPES,
    FLOATS,
    INTEGERS,
    Kind,
    cast_kind,
    kind_of,
    marked,
)
from proxy.catalog.numeric_constants import constant_value, numeric_constant
from proxy.catalog.pg_numeric import DUCK_DIGITS, numeric_text, rounded
from proxy.catalog.refusal import CatalogRefused
from proxy.catalog.typed_text import typed_text

_FLOAT4_MAX = 3.4028234663852886e38
#: The digits of each integer type: its numeric's precision.
_INTEGER_DIGITS = {Kind.INT2: 5, Kind.INT4: 10, Kind.INT8: 19}
#: float4 and float8 become numeric with 6 and 15 significant digits (float8_numeric).
FLOAT_DIGITS = {Kind.FLOAT4: 6, Kind.FLOAT8: 15}


def rewrite_number_cast(node: exp.Cast) -> exp.Expression | None:
    """``node`` (its value translated) if it casts to a number type, else None."""
    to = node.args["to"]
    kind = cast_kind(to)
    if kind not in (*INTEGERS, Kind.NUMERIC, *FLOATS):
        return None
    value: exp.Expression = node.this
    if isinstance(value, exp.Literal) and value.is_string:
        typed = typed_text(value, kind)
        if kind is Kind.NUMERIC and isinstance(to, exp.DataType) and to.expressions:
            return _constrained(typed, to)
        return typed
    if kind is Kind.NUMERIC:
        if isinstance(to, exp.DataType) and to.expressions:
            return _constrained(value, to)
        return _numeric(value)
    if kind in FLOATS:
        _check_float_constant(value, kind)
    return marked(exp.cast(value, exp.DataType.build(DUCK_TYPES[kind])), kind)


def _constrained(value: exp.Expression, to: exp.DataType) -> exp.Expression:
    """numeric(p, s): DuckDB's DECIMAL(p, s) rounds half away from zero and fails past
    its precision, as PostgreSQL does."""
    numbers = [p.this.name if isinstance(p.this, exp.Expression) else "" for p in to.expressions]
    if not all(n.isdigit() for n in numbers):
        raise CatalogRefused(f"dpproxy's catalog does not support the type {to.sql('postgres')}")
    precision = int(numbers[0])
    scale = int(numbers[1]) if len(numbers) > 1 else 0
    if not 1 <= precision <= DUCK_DIGITS or scale > precision:
        raise CatalogRefused(
            f"dpproxy's catalog holds numeric(p, s) with 1 <= p <= {DUCK_DIGITS} and s <= p"
        )
    constant = constant_value(value) if kind_of(value) in (*INTEGERS, Kind.NUMERIC) else None
    if constant is not None:
        fitted = rounded(constant, scale)
        if fitted.copy_abs() < Decimal(10) ** (precision - scale):
            return numeric_constant(fitted)  # a constant, which 7::numeric(5,2) / 2 computes
    cast = exp.cast(value, exp.DataType.build(f"DECIMAL({precision}, {scale})"))
    return marked(cast, Kind.NUMERIC)


def _numeric(value: exp.Expression) -> exp.Expression:
    """An unconstrained numeric: the value with its own scale."""
    kind = kind_of(value)
    constant = constant_value(value)
    if constant is not None and kind in (*INTEGERS, Kind.NUMERIC):
        return numeric_constant(constant)
    if kind is Kind.NUMERIC:
        return value
    if kind in INTEGERS:
        precision = _INTEGER_DIGITS[kind]
        cast = exp.cast(value, exp.DataType.build(f"DECIMAL({precision}, 0)"))
        return marked(cast, Kind.NUMERIC)
    float_constant = _float_constant(value)
    if kind in FLOATS and float_constant is not None:
        if not float_constant.is_finite():
            raise CatalogRefused("dpproxy's catalog has no numeric NaN or Infinity")
        shown = f"{float(float_constant):.{FLOAT_DIGITS[kind]}g}"
        return numeric_constant(Decimal(shown))
    # Known only when the query runs: the pg_numeric macro converts by the type DuckDB
    # binds (arithmetic_macros).
    return marked(arithmetic_call(NUMERIC_OF, value), Kind.NUMERIC)


def _float_constant(value: exp.Expression) -> Decimal | None:
    """The value of a float constant: a number literal cast to real or double precision."""
    if isinstance(value, exp.Cast) and kind_of(value) in FLOATS:
        inner = value.this
        if isinstance(inner, exp.Literal) and not inner.is_string:
            return Decimal(str(inner.this))
    return None


def _check_float_constant(value: exp.Expression, kind: Kind) -> None:
    """A number constant cast to a float type: out of its range, PostgreSQL's error."""
    if not isinstance(value, exp.Literal) or value.is_string:
        return
    exact = Decimal(str(value.this))
    approximate = float(exact)
    limit = _FLOAT4_MAX if kind is Kind.FLOAT4 else 1.7976931348623157e308
    underflow = approximate == 0 and exact != 0
    if abs(approximate) > limit or underflow or (kind is Kind.FLOAT4 and _float4_zero(exact)):
        raise CatalogRefused(
            f'"{numeric_text(exact)}" is out of range for type {kind.value}', sqlstate="22003"
        )


def _float4_zero(exact: Decimal) -> bool:
    """Whether a non-zero value rounds to zero as a real (below its smallest subnormal)."""
    return exact != 0 and exact.copy_abs() < Decimal("1.401298464324817e-45") / 2
