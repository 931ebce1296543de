"""The text PostgreSQL 15 writes for a ``double precision`` (float8out) or a ``real``
(float4out), as ``extra_float_digits`` asks.

PostgreSQL (12 and later) writes a float's shortest decimal digits that read back to the
same value (its Ryu code, ``common/d2s.c``, ``common/f2s.c``). Ryu takes a digit string
only inside the open interval of the values that round to the float, never one lying
exactly halfway between two floats (Python's ``repr`` does: ``2.585272296940709e+16``, where
PostgreSQL writes ``2.5852722969407088e+16``); of the shortest strings inside, the one
nearest the value. The digits are then laid out without a trailing ``.0``, in exponent
form (``1e+15``, ``1e-05``: a sign and at least two digits of exponent) when the decimal
exponent is below -4 or from 15 up (a real: from 6 up, ``1.234567e+06``), and ``NaN``,
``Infinity``, ``-Infinity``, ``-0`` as such. The same rules as
``rewriter.passes.post_text``, which writes them in DuckDB SQL for a value turned to text
inside a query; this module writes the values a client receives.

With ``extra_float_digits`` at 0 or below (a client's ``SET extra_float_digits = 0``, as
before PostgreSQL 12), PostgreSQL writes instead printf's ``%.*g`` of ``DBL_DIG`` (15; a
real: ``FLT_DIG``, 6) plus ``extra_float_digits`` significant digits, at least 1:
``1.23456789012346e+17``, ``0.3``; C's printf and Python's ``%g`` both round the exact
binary value, so they agree.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass


@dataclass(frozen=True)
class _Format:
    #: The decimal exponent from which PostgreSQL writes exponent form (DBL_DIG, FLT_DIG).
    exponent_from: int
    #: The most significant digits a shortest text needs.
    most_digits: int


_DOUBLE = _Format(15, 17)
_REAL = _Format(6, 9)
_FLOAT4 = struct.Struct("<f")
_BITS4 = struct.Struct("<I")


#: PostgreSQL's default extra_float_digits (and its range: -15 to 3).
DEFAULT_EXTRA_FLOAT_DIGITS = 1
#: The significant digits of %g at extra_float_digits 0 (C's DBL_DIG, FLT_DIG).
_DBL_DIG = 15
_FLT_DIG = 6


def float8_text(value: float, extra_float_digits: int = DEFAULT_EXTRA_FLOAT_DIGITS) -> str:
    """PostgreSQL's text of a ``double precision``."""
    if extra_float_digits <= 0:
        return _printed(value, _DBL_DIG + extra_float_digits)
    return _text(value, _DOUBLE)


def float4_text(value: float, extra_float_digits: int = DEFAULT_EXTRA_FLOAT_DIGITS) -> str:
    """PostgreSQL's text of a ``real`` (``value``: a float32's value, as DuckDB returns a
    FLOAT; any other double is first rounded to the nearest real, as a cast does)."""
    if extra_float_digits <= 0:
        return _printed(_as_real(value), _FLT_DIG + extra_float_digits)
    return _text(_as_real(value), _REAL)


def _printed(value: float, precision: int) -> str:
    """PostgreSQL's pg_strfromd: ``%.*g`` of ``precision`` (at least 1) digits."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return f"{value:.{max(precision, 1)}g}"


def _text(value: float, form: _Format) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0"
    found = _from_repr(abs(value)) if form is _DOUBLE else None
    digits, exponent = found if found is not None else _shortest(abs(value), form)
    return sign + _laid_out(digits, exponent, form.exponent_from)


def _from_repr(value: float) -> tuple[str, int] | None:
    """Python's shortest digits of a double (positive, finite) where they are
    PostgreSQL's: unless they may lie halfway between two doubles, which only a decimal
    that is a fraction over a power of two (or a whole number other than the value) can."""
    mantissa, _, exponent = repr(value).partition("e")
    whole, _, fraction = mantissa.partition(".")
    fraction = fraction.rstrip("0")  # 2562.0: a whole number
    number = int(whole + fraction)
    scale = (int(exponent) if exponent else 0) - len(fraction)
    if scale < 0 and number % 5**-scale == 0:
        return None
    if scale >= 0 and not (value.is_integer() and int(value) == number * 10**scale):
        return None
    text = str(number)
    return text.rstrip("0"), scale + len(text) - 1


def _shortest(value: float, form: _Format) -> tuple[str, int]:
    """The shortest significant digits (no trailing zeros) strictly inside the interval
    of values that round to ``value`` (positive, finite), the nearest of them; and the
    decimal exponent of the first digit."""
    bounds = _Bounds(value, form)
    # No string shorter than repr's (the shortest in the closed interval) is inside, and
    # for a double that one most often is; a string of n digits inside gives one of
    # n + 1 (a 0 appended), so the fewest are found by halving [fewest, most].
    fewest = _significant_count(repr(value)) if form is _DOUBLE else 1
    most = form.most_digits
    found = bounds.inside(value, fewest)
    if found is not None:
        most = fewest
    else:
        found = bounds.inside(value, most)
        if found is None:  # the nearest string of most_digits digits is always inside
            raise ArithmeticError(f"no decimal digits found for {value!r}")
        fewest += 1
    while fewest < most:
        middle = (fewest + most) // 2
        candidate = bounds.inside(value, middle)
        if candidate is None:
            fewest = middle + 1
        else:
            most, found = middle, candidate
    whole, scale = found
    text = str(whole)
    return text.rstrip("0") or "0", scale + len(text) - 1


class _Bounds:
    """The interval (bounds excluded) of the values that round to a positive finite
    float: halfway to its neighbours (the largest float's upper neighbour taken one gap
    up), as integers over a common power of two."""

    def __init__(self, value: float, form: _Format) -> None:
        if form is _DOUBLE:
            below, above = math.nextafter(value, 0.0), math.nextafter(value, math.inf)
        else:
            bits = _BITS4.unpack(_FLOAT4.pack(value))[0]
            below = _FLOAT4.unpack(_BITS4.pack(bits - 1))[0]
            above = _FLOAT4.unpack(_BITS4.pack(bits + 1))[0]
        finite = [x for x in (below, value, above) if math.isfinite(x)]
        ratios = [x.as_integer_ratio() for x in finite]
        self._shift = max(d.bit_length() for _, d in ratios)  # 2**shift: each denominator
        scaled = [n << (self._shift - d.bit_length() + 1) for n, d in ratios]
        if len(scaled) == 2:  # the largest float: its upper neighbour one gap up
            scaled.append(2 * scaled[1] - scaled[0])
        low, middle, high = scaled
        # Twice the bounds, times 2**shift.
        self._low, self._high = low + middle, middle + high

    def inside(self, value: float, count: int) -> tuple[int, int] | None:
        """The nearest string of ``count`` significant digits inside, as (digits, power
        of ten), or None. If the nearest is below the interval (whose lower half is the
        narrower at a power of two), the next one up may be inside."""
        mantissa, exponent = f"{value:.{count - 1}e}".split("e")
        whole = int(mantissa.replace(".", ""))
        scale = int(exponent) - count + 1
        for candidate in (whole, whole + 1):
            if scale >= 0:
                low, twice, high = self._low, (2 * candidate * 10**scale) << self._shift, self._high
            else:
                power = 10**-scale
                low, twice, high = (
                    self._low * power,
                    (2 * candidate) << self._shift,
                    self._high * power,
                )
            if low < twice < high:
                return candidate, scale
        return None


def _significant_count(text: str) -> int:
    """The significant digits of Python's text of a float."""
    return len(text.split("e", maxsplit=1)[0].replace(".", "").strip("0")) or 1


def _laid_out(digits: str, exponent: int, exponent_from: int) -> str:
    if exponent < -4 or exponent >= exponent_from:
        fraction = "." + digits[1:] if len(digits) > 1 else ""
        return f"{digits[0]}{fraction}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if exponent < 0:
        return "0." + "0" * (-exponent - 1) + digits
    if len(digits) <= exponent + 1:
        return digits + "0" * (exponent + 1 - len(digits))
    return digits[: exponent + 1] + "." + digits[exponent + 1 :]


def _as_real(value: float) -> float:
    """``value`` rounded to the nearest real (beyond the largest: an infinity)."""
    if math.isnan(value) or math.isinf(value):
        return value
    try:
        return float(_FLOAT4.unpack(_FLOAT4.pack(value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)
