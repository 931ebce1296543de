"""PostgreSQL's numeric arithmetic where DuckDB's DECIMAL differs: division (DuckDB's gives
a DOUBLE), div() and integer powers, computed exactly with Python's integers and shown
with the scale PostgreSQL gives them (numeric.c: select_div_scale, div_var, power_var).

Used by the translation, which computes constant expressions (``SELECT 7.0/2``), and by the
catalog engine, whose functions compute them when they run (proxy.catalog.numeric_udfs).
Imports nothing heavy: the engine's process starts fast.
"""

from __future__ import annotations

import decimal
import re
from decimal import Decimal

from proxy.catalog.raised import RaisedError

#: NUMERIC_MIN_SIG_DIGITS: a quotient has at least this many significant digits.
MIN_SIG_DIGITS = 16
#: NUMERIC_MAX_DISPLAY_SCALE
MAX_DISPLAY_SCALE = 1000
#: DuckDB's DECIMAL holds at most this many digits.
DUCK_DIGITS = 38
#: PostgreSQL's numeric input: digits with an optional point and exponent, spaces around.
_NUMERIC_TEXT = re.compile(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*")
_INTEGER_TEXT = re.compile(r"\s*[+-]?\d+\s*")
_INT4_MAX = 2**31 - 1
#: The most digits integer_power computes with (its result is refused past 38 anyway).
_MAX_POWER_DIGITS = 2000


def parse_numeric(text: str) -> Decimal:
    """The value of numeric input ``text`` (PostgreSQL's syntax, no NaN or Infinity);
    raises RaisedError 22P02 as PostgreSQL does for text it cannot read."""
    if _NUMERIC_TEXT.fullmatch(text) is None:
        raise RaisedError("22P02", f'invalid input syntax for type numeric: "{text}"')
    return Decimal(text.strip())


def is_integer_text(text: str) -> bool:
    """Whether ``text`` is integer input PostgreSQL reads (int2, int4, int8)."""
    return _INTEGER_TEXT.fullmatch(text) is not None


def scale_of(value: Decimal) -> int:
    """The value's display scale (digits after the point), as PostgreSQL keeps it: 7.0
    has 1, 1.5e-3 has 4, 1e5 has 0."""
    exponent = value.as_tuple().exponent
    return max(0, -exponent) if isinstance(exponent, int) else 0


def _weight_and_first_digit(value: Decimal) -> tuple[int, int]:
    """The weight of the value's first non-zero base-10000 digit, and that digit (numeric
    stores groups of four decimal digits, aligned on the point); (0, 0) for zero."""
    if value == 0:
        return 0, 0
    weight = value.adjusted() // 4
    numerator, denominator = _exact_ratio(value.copy_abs())
    if weight >= 0:
        return weight, numerator // (denominator * 10_000**weight)
    return weight, numerator * 10_000**-weight // denominator


def division_scale(dividend: Decimal, divisor: Decimal) -> int:
    """select_div_scale: a quotient's scale, from its estimated weight and the scales of
    its operands (at least 16 significant digits)."""
    weight1, first1 = _weight_and_first_digit(dividend)
    weight2, first2 = _weight_and_first_digit(divisor)
    quotient_weight = weight1 - weight2
    if first1 <= first2:
        quotient_weight -= 1
    scale = MIN_SIG_DIGITS - quotient_weight * 4
    scale = max(scale, scale_of(dividend), scale_of(divisor), 0)
    return min(scale, MAX_DISPLAY_SCALE)


def _exact_ratio(value: Decimal) -> tuple[int, int]:
    """``value`` as numerator and denominator, integers (the denominator a power of 10)."""
    sign, digits, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise RaisedError("0A000", "dpproxy's catalog has no numeric NaN or Infinity")
    number = int("".join(str(d) for d in digits) or "0") * (-1 if sign else 1)
    if exponent >= 0:
        return number * 10**exponent, 1
    return number, 10**-exponent


def rounded_quotient(dividend: Decimal, divisor: Decimal, scale: int) -> Decimal:
    """dividend / divisor rounded half away from zero to ``scale`` digits (div_var with
    round), exactly; raises RaisedError 22012 for a zero divisor."""
    if divisor == 0:
        raise RaisedError("22012", "division by zero")
    n1, d1 = _exact_ratio(dividend)
    n2, d2 = _exact_ratio(divisor)
    return _rounded_ratio(n1 * d2, d1 * n2, scale)


def rounded(value: Decimal, scale: int) -> Decimal:
    """``value`` rounded half away from zero to ``scale`` digits (scale >= 0), exactly."""
    numerator, denominator = _exact_ratio(value)
    return _rounded_ratio(numerator, denominator, scale)


def _rounded_ratio(numerator: int, denominator: int, scale: int) -> Decimal:
    """numerator / denominator (not 0) rounded half away from zero to ``scale`` digits."""
    scaled = numerator * 10**scale
    negative = (scaled < 0) != (denominator < 0)
    whole, rest = divmod(abs(scaled), abs(denominator))
    if 2 * rest >= abs(denominator):
        whole += 1
    return _scaled(-whole if negative else whole, scale)


def _scaled(number: int, scale: int) -> Decimal:
    """number * 10**-scale, exactly (Decimal's arithmetic would round to its context)."""
    return Decimal(f"{number}E-{scale}") if scale else Decimal(number)


def divide(dividend: Decimal, divisor: Decimal) -> Decimal:
    """numeric / numeric as PostgreSQL computes and shows it (3.5000000000000000)."""
    return rounded_quotient(dividend, divisor, division_scale(dividend, divisor))


def truncated_quotient(dividend: Decimal, divisor: Decimal) -> Decimal:
    """div(numeric, numeric): the quotient truncated toward zero, scale 0."""
    if divisor == 0:
        raise RaisedError("22012", "division by zero")
    n1, d1 = _exact_ratio(dividend)
    n2, d2 = _exact_ratio(divisor)
    numerator, denominator = n1 * d2, d1 * n2
    whole = abs(numerator) // abs(denominator)
    return Decimal(-whole if (numerator < 0) != (denominator < 0) else whole)


def integer_power(base: Decimal, exponent: int) -> Decimal:
    """numeric ^ integer (power_var_int, PostgreSQL 15): exact, rounded half away from zero
    to max(16, the base's scale) digits."""
    scale = min(max(MIN_SIG_DIGITS, scale_of(base)), MAX_DISPLAY_SCALE)
    if base == 0 and exponent < 0:
        raise RaisedError("2201F", "zero raised to a negative power is undefined")
    n, d = _exact_ratio(base)
    if abs(exponent) * max(len(str(abs(n))), len(str(d))) > _MAX_POWER_DIGITS:
        raise RaisedError(
            "0A000",
            f"dpproxy's catalog computes numeric values of at most {DUCK_DIGITS} digits",
        )
    if exponent >= 0:
        return _rounded_ratio(n**exponent, d**exponent, scale)
    return _rounded_ratio(d**-exponent, n**-exponent, scale)


def power(base: Decimal, exponent: Decimal) -> Decimal:
    """numeric ^ numeric as PostgreSQL 15 computes it (power_var): an integer exponent
    exactly (integer_power), any other through exp(ln(base) * exponent), rounded to the
    scale PostgreSQL picks from the result's estimated weight."""
    if base == 0 and exponent < 0:
        raise RaisedError("2201F", "zero raised to a negative power is undefined")
    if exponent == exponent.to_integral_value() and abs(exponent) <= _INT4_MAX:
        return integer_power(base, int(exponent))
    if base < 0:
        raise RaisedError(
            "2201F", "a negative number raised to a non-integer power yields a complex result"
        )
    if base == 0:
        return _scaled(0, MIN_SIG_DIGITS)
    with decimal.localcontext() as context:
        context.prec = 40
        logarithm = base.ln() * exponent
        weight = float(logarithm) * 0.434294481903252  # the result's decimal weight
        if abs(weight) > 2 * MAX_DISPLAY_SCALE:
            raise RaisedError("22003", "value overflows numeric format")
        scale = MIN_SIG_DIGITS - int(weight)
        scale = min(max(scale, scale_of(base), scale_of(exponent), 0), MAX_DISPLAY_SCALE)
        if weight + scale > 2 * DUCK_DIGITS:
            raise RaisedError(
                "0A000",
                f"dpproxy's catalog computes numeric values of at most {DUCK_DIGITS} digits",
            )
        context.prec = max(int(weight), 0) + scale + 20
        value = (base.ln() * exponent).exp()
        return value.quantize(Decimal(1).scaleb(-scale), rounding=decimal.ROUND_HALF_UP)


def square_root(value: Decimal) -> Decimal:
    """sqrt(numeric) (numeric_sqrt): at least 16 significant digits, and at least the
    value's scale, rounded half away from zero."""
    if value < 0:
        raise RaisedError("2201F", "cannot take square root of a negative number")
    weight, _ = _weight_and_first_digit(value)
    root_weight = (weight + 1) * 4 // 2 - 1
    scale = max(MIN_SIG_DIGITS - root_weight, scale_of(value), 0)
    scale = min(scale, MAX_DISPLAY_SCALE)
    if value == 0:
        return _scaled(0, scale)
    with decimal.localcontext() as context:
        context.prec = max(value.adjusted() // 2 + 1, 0) + scale + 20
        root = value.sqrt()
        return root.quantize(Decimal(1).scaleb(-scale), rounding=decimal.ROUND_HALF_UP)


def numeric_text(value: Decimal) -> str:
    """PostgreSQL's text of a numeric value: plain digits, never an exponent."""
    return format(value, "f")


def duck_decimal(value: Decimal) -> tuple[int, int]:
    """(precision, scale) of the DuckDB DECIMAL that holds ``value`` exactly with its scale;
    raises RaisedError 0A000 past DuckDB's 38 digits."""
    scale = scale_of(value)
    digits = len(format(value.copy_abs(), "f").replace(".", "").lstrip("0")) or 1
    whole = max(digits - scale, 0)
    precision = max(whole + scale, 1, scale)
    if precision > DUCK_DIGITS:
        raise RaisedError(
            "0A000",
            f"dpproxy's catalog computes numeric values of at most {DUCK_DIGITS} digits "
            f"(this one has {precision})",
        )
    return precision, scale
