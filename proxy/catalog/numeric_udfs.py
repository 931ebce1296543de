"""The catalog engine's Python functions: PostgreSQL's numeric division, div() and powers of
values known only when the query runs (``SELECT x / 3 FROM (SELECT 7.0 AS x) t``), which
DuckDB computes as a DOUBLE. Constants are computed by the translation instead, with the
same code (proxy.catalog.pg_numeric).

Their values are DECIMAL(38, 20) (div(): DECIMAL(38, 0)): DuckDB's types have a fixed
scale where PostgreSQL's numeric has one per value, so 3.5 shows as 3.50000000000000000000
where PostgreSQL shows 3.5000000000000000. A value PostgreSQL would give with more
decimals, or more digits before the point than the type holds, is refused, never rounded.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal

import duckdb

from proxy.catalog.pg_numeric import (
    divide,
    parse_numeric,
    power,
    scale_of,
    square_root,
    truncated_quotient,
)
from proxy.catalog.raised import RaisedError

PRECISION = 38
#: The scale of the quotients' and powers' values.
SCALE = 20
DIVIDE = "dp_numeric_div"
TRUNCATED_DIVIDE = "dp_numeric_div_trunc"
POWER = "dp_numeric_pow"
FLOAT_NUMERIC = "dp_float_numeric"
TEXT_NUMERIC = "dp_text_numeric"
SQUARE_ROOT = "dp_numeric_sqrt"


def _operand(text: str) -> Decimal:
    """The value of an operand's text, without the zeros that end its decimals: DuckDB
    shows a DECIMAL with its type's scale (the DECIMAL(38, 20) of a quotient shows 20
    decimals) where PostgreSQL keeps the value's own (3.5000000000000000 has 16), and
    PostgreSQL's quotient has more decimals when its operands have more than 16."""
    value = parse_numeric(text)
    sign, digits, exponent = value.as_tuple()
    kept = list(digits)
    if not isinstance(exponent, int):
        return value
    while exponent < 0 and len(kept) > 1 and kept[-1] == 0:
        kept.pop()
        exponent += 1
    return Decimal((sign, tuple(kept), exponent))


def _fitting(value: Decimal, scale: int) -> Decimal:
    """``value`` if DECIMAL(38, ``scale``) holds it exactly, else a refusal."""
    if scale_of(value) > scale or value.copy_abs() >= Decimal(10) ** (PRECISION - scale):
        raise RaisedError(
            "0A000",
            f"dpproxy's catalog computes numeric values that are not constants with at "
            f"most {scale} decimals and {PRECISION - scale} digits before the point; "
            f"PostgreSQL's value is {value:f}",
        )
    return value


def numeric_divide(dividend: str, divisor: str) -> Decimal:
    return _fitting(divide(_operand(dividend), _operand(divisor)), SCALE)


def numeric_truncated_divide(dividend: str, divisor: str) -> Decimal:
    quotient = truncated_quotient(parse_numeric(dividend), parse_numeric(divisor))
    return _fitting(quotient, 0)


def numeric_power(base: str, exponent: str) -> Decimal:
    return _fitting(power(_operand(base), _operand(exponent)), SCALE)


def numeric_square_root(value: str) -> Decimal:
    return _fitting(square_root(_operand(value)), SCALE)


def float_numeric(value: float, digits: int) -> Decimal:
    """float8_numeric (float4_numeric): the value with 15 (6) significant digits."""
    if not math.isfinite(value):
        raise RaisedError("0A000", "dpproxy's catalog has no numeric NaN or Infinity")
    return _fitting(Decimal(f"{value:.{digits}g}"), SCALE)


def text_numeric(text: str) -> Decimal:
    """numeric_in: the value of numeric input text (22P02 for text that is not one)."""
    return _fitting(parse_numeric(text), SCALE)


#: name -> (function, parameter types, scale of the DECIMAL(38, scale) it gives). A NULL
#: argument gives NULL without calling the function (DuckDB's default).
_FUNCTIONS: dict[str, tuple[Callable[..., Decimal], tuple[str, ...], int]] = {
    DIVIDE: (numeric_divide, ("VARCHAR", "VARCHAR"), SCALE),
    TRUNCATED_DIVIDE: (numeric_truncated_divide, ("VARCHAR", "VARCHAR"), 0),
    POWER: (numeric_power, ("VARCHAR", "VARCHAR"), SCALE),
    SQUARE_ROOT: (numeric_square_root, ("VARCHAR",), SCALE),
    FLOAT_NUMERIC: (float_numeric, ("DOUBLE", "INTEGER"), SCALE),
    TEXT_NUMERIC: (text_numeric, ("VARCHAR",), SCALE),
}
UDF_NAMES = frozenset(_FUNCTIONS)


def register(connection: duckdb.DuckDBPyConnection) -> None:
    """Create the functions on ``connection`` (before its configuration is locked)."""
    for name, (function, parameters, scale) in _FUNCTIONS.items():
        connection.create_function(
            name,
            function,
            [duckdb.sqltype(p) for p in parameters],
            duckdb.decimal_type(PRECISION, scale),
        )
