"""Values of PostgreSQL's parameters read as its GUC code reads them.

Booleans as ``parse_bool`` (on/off, true/false, yes/no, 1/0 and unique prefixes), integers
as ``parse_int`` (decimal, hexadecimal 0x…, octal 0…, with a unit: memory in B/kB/MB/GB/TB,
time in us/ms/s/min/h/d, rounded to the parameter's own unit) and reals as ``parse_real``,
with PostgreSQL's range errors and hints; and written back as SHOW shows them.
"""

from __future__ import annotations

import math
import re
import sys
from decimal import Decimal
from fractions import Fraction

from proxy.seam import QueryError
from proxy.sqlstate import INVALID_PARAMETER_VALUE

# --- Booleans --------------------------------------------------------------------------

# PostgreSQL's spellings of a boolean (besides unique prefixes of true/false/yes/no/on/off).
_TRUE_WORDS = ("true", "yes", "on")
_FALSE_WORDS = ("false", "no", "off")


def parse_bool(value: str) -> bool | None:
    """A boolean as PostgreSQL reads one (on/off, true/false, yes/no, 1/0, or a unique
    prefix of these words, in any case, without surrounding spaces); None if it is not."""
    wanted = value.lower()
    if wanted in ("1", "0"):
        return wanted == "1"
    # "o" alone is ambiguous (on or off), as in PostgreSQL.
    if len(wanted) >= (2 if wanted.startswith("o") else 1):
        if any(word.startswith(wanted) for word in _TRUE_WORDS):
            return True
        if any(word.startswith(wanted) for word in _FALSE_WORDS):
            return False
    return None


def on_off(flag: bool) -> str:
    return "on" if flag else "off"


# --- Numbers, as PostgreSQL's parse_int and parse_real read them -----------------------

_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1
DBL_MAX = sys.float_info.max
_C_SPACE = " \t\n\v\f\r"
# strtol(..., 0): decimal, 0x hexadecimal or 0 octal, after white space.
_STRTOL = re.compile(
    r"[ \t\n\v\f\r]*(?P<sign>[+-]?)"
    r"(?:0[xX](?P<hex>[0-9a-fA-F]+)|(?P<oct>0[0-7]*)|(?P<dec>[1-9][0-9]*))"
)
# strtod: a decimal or hexadecimal number, inf, infinity or nan, after white space.
_STRTOD = re.compile(
    r"[ \t\n\v\f\r]*(?P<sign>[+-]?)(?:"
    r"(?P<hex>0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?)"
    r"|(?P<dec>(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)"
    r"|(?P<inf>(?i:inf(?:inity)?))|(?P<nan>(?i:nan)(?:\([0-9A-Za-z_]*\))?))"
)
# A value's unit -> its size in the base unit, largest first, as PostgreSQL 15's tables.
_BLOCK = 8192.0  # BLCKSZ
_MEMORY_UNITS = ("TB", "GB", "MB", "kB", "B")
_TIME_UNITS = ("d", "h", "min", "s", "ms", "us")
_SIZES: dict[str, tuple[float, ...]] = {
    "B": (1024.0**4, 1024.0**3, 1024.0**2, 1024.0, 1.0),
    "kB": (1024.0**3, 1024.0**2, 1024.0, 1.0, 1.0 / 1024.0),
    "8kB": (1024.0**3 / 8, 1024.0**2 / 8, 1024.0 / 8, 1.0 / 8, 1.0 / _BLOCK),
    "ms": (86_400_000.0, 3_600_000.0, 60_000.0, 1000.0, 1.0, 1.0 / 1000),
    "s": (86_400.0, 3600.0, 60.0, 1.0, 1.0 / 1000, 1.0 / 1_000_000),
}
_UNITS: dict[str, tuple[tuple[str, float], ...]] = {
    unit: tuple(zip(_TIME_UNITS if unit in ("ms", "s") else _MEMORY_UNITS, sizes, strict=True))
    for unit, sizes in _SIZES.items()
}
_MEMORY_HINT = 'Valid units for this parameter are "B", "kB", "MB", "GB", and "TB".'
_TIME_HINT = 'Valid units for this parameter are "us", "ms", "s", "min", "h", and "d".'


class NotANumber(Exception):
    """The value is no number PostgreSQL reads; ``hint`` is PostgreSQL's, if it gives one."""

    def __init__(self, hint: str | None = None) -> None:
        super().__init__(hint)
        self.hint = hint


def strtod(value: str) -> tuple[float, int]:
    """C's strtod(): the number ``value`` starts with and where it ends; NotANumber when
    there is none or it overflows or underflows (ERANGE)."""
    match = _STRTOD.match(value)
    if match is None:
        raise NotANumber
    sign = -1.0 if match["sign"] == "-" else 1.0
    if match["inf"]:
        return sign * math.inf, match.end()
    if match["nan"]:
        return math.nan, match.end()
    try:
        number = float.fromhex(match["hex"]) if match["hex"] else float(match["dec"])
    except OverflowError:
        raise NotANumber from None
    if math.isinf(number):
        raise NotANumber
    if abs(number) < sys.float_info.min:  # underflow: glibc's ERANGE if also inexact
        exact = _exact(match["hex"], match["dec"])
        if exact and Fraction(number) != exact:
            raise NotANumber
    return sign * number, match.end()


def _exact(hexadecimal: str | None, decimal: str | None) -> Fraction:
    """The exact value of the number strtod read (one of the two is given)."""
    if decimal is not None:
        return Fraction(Decimal(decimal))
    body, _, exponent = (hexadecimal or "0x0")[2:].lower().partition("p")
    whole, _, fraction = body.partition(".")
    mantissa = int(whole + fraction or "0", 16)
    return Fraction(mantissa) * Fraction(2) ** (int(exponent or "0") - 4 * len(fraction))


def _rint(number: float) -> float:
    """C's rint(): to the nearest integer, halves to even."""
    return number if not math.isfinite(number) else float(round(number))


def to_base_unit(number: float, rest: str, unit: str | None) -> float:
    """``number`` with the unit written in ``rest`` (white space around it allowed), in
    ``unit``, the parameter's own; as PostgreSQL, a fraction is rounded to the next
    smaller unit (1.5h is 90min). NotANumber if the unit is wrong or not allowed."""
    written = rest.strip(_C_SPACE)
    if not written:
        return number
    table = _UNITS.get(unit or "")
    if table is None:
        raise NotANumber  # this parameter takes no unit
    for position, (name, size) in enumerate(table):
        if name == written:
            value = number * size
            if position + 1 < len(table):
                smaller = table[position + 1][1]
                value = _rint(value / smaller) * smaller
            return value
    raise NotANumber(_TIME_HINT if unit in ("ms", "s") else _MEMORY_HINT)


def read_integer(value: str, unit: str | None) -> float:
    """PostgreSQL's parse_int: an integer as strtol reads it (0x.., 0.. octal), or a
    number as strtod does, with an optional unit, rounded (half to even)."""
    match = _STRTOL.match(value)
    end, integer = (0, 0) if match is None else (match.end(), _strtol_value(match))
    if value[end : end + 1] in (".", "e", "E") or abs(integer) > _LONG_MAX:
        number, end = strtod(value)  # as PostgreSQL: read again as a float
    elif match is None:
        raise NotANumber
    else:
        number = float(integer)
    number = _rint(to_base_unit(number, value[end:], unit))
    if not -_INT_MAX - 1 <= number <= _INT_MAX:
        raise NotANumber("Value exceeds integer range.")
    return number


def _strtol_value(match: re.Match[str]) -> int:
    if match["hex"]:
        magnitude = int(match["hex"], 16)
    elif match["oct"]:
        magnitude = int(match["oct"], 8)
    else:
        magnitude = int(match["dec"])
    return -magnitude if match["sign"] == "-" else magnitude


def invalid_value(
    name: str, value: str, hint: str | None = None, *, detail: str | None = None
) -> QueryError:
    """22023 for ``value`` of the parameter PostgreSQL spells ``name`` (DateStyle)."""
    return QueryError(
        INVALID_PARAMETER_VALUE,
        f'invalid value for parameter "{name}": "{value}"',
        detail=detail,
        hint=hint,
    )


def _unit_hint(unit: str | None) -> str:
    if unit is None:
        return "write a number"
    units = _TIME_UNITS if unit in ("ms", "s") else _MEMORY_UNITS
    return f"write a number, with an optional unit ({', '.join(reversed(units))})"


def integer_setting(
    name: str, value: str, lowest: int, highest: int, unit: str | None, *, plain: bool = False
) -> str:
    """An integer parameter as PostgreSQL 15 reads it (a number, rounded to an integer,
    with a unit for one that has one: 5s, 1500 ms, 64MB, 0x100) and shows it (in the
    largest unit that divides it; the bare number if ``plain``). QueryError 22023 else."""
    try:
        number = int(read_integer(value, unit))
    except NotANumber as error:
        raise invalid_value(name, value, error.hint or _unit_hint(unit)) from None
    if not lowest <= number <= highest:
        shown = f"{number} {unit}" if unit else str(number)
        raise QueryError(
            INVALID_PARAMETER_VALUE,
            f'{shown} is outside the valid range for parameter "{name}" ({lowest} .. {highest})',
        )
    if unit is None or number <= 0 or plain:
        return str(number)
    for shown_unit, size in _UNITS[unit]:
        if size <= 1.0 or number % int(size) == 0:
            return f"{int(number / size)}{shown_unit}"
    return str(number)  # not reached: every table ends with a unit of size <= 1


def time_seconds(shown: str, unit: str) -> float:
    """A time parameter's value as integer_setting shows it ('2s', '1500ms', '1min', '0'),
    in seconds; ``unit`` is the parameter's own (ms or s). ValueError if it is no such
    value."""
    if unit not in ("ms", "s"):
        raise ValueError(f"{unit!r} is not a unit of time")
    try:
        number = read_integer(shown, unit)
    except NotANumber:
        raise ValueError(f"{shown!r} is not a time") from None
    return number / 1000.0 if unit == "ms" else number


def shown_number(number: float) -> str:
    """C's %g, as PostgreSQL's snprintf writes infinities."""
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    return f"{number:g}"


def real_setting(name: str, value: str, lowest: float, highest: float, unit: str | None) -> str:
    """A floating-point parameter as PostgreSQL 15 reads it (strtod, with a unit for one
    that has one) and shows it (%g, in the largest unit giving a whole number)."""
    try:
        number, end = strtod(value)
        if math.isnan(number):
            raise NotANumber
        number = to_base_unit(number, value[end:], unit)
    except NotANumber as error:
        raise invalid_value(name, value, error.hint or _unit_hint(unit)) from None
    if not lowest <= number <= highest:
        shown = f"{shown_number(number)} {unit}" if unit else shown_number(number)
        raise QueryError(
            INVALID_PARAMETER_VALUE,
            f'{shown} is outside the valid range for parameter "{name}" '
            f"({shown_number(lowest)} .. {shown_number(highest)})",
        )
    if unit is None or number <= 0:
        return shown_number(number)
    table = _UNITS[unit]
    for shown_unit, size in table:
        scaled = number / size
        if abs(_rint(scaled) / scaled - 1.0) <= 1e-8:
            return f"{shown_number(scaled)}{shown_unit}"
    return f"{shown_number(number / table[-1][1])}{table[-1][0]}"
