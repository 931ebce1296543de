"""Values of the catalog DuckDB in PostgreSQL's text format."""

from __future__ import annotations

import datetime
import decimal
import math
import re
import struct

_NEEDS_QUOTES = re.compile(r'[{},"\\\s]')
# A fraction of a second with zeros at its end (PostgreSQL writes .5, Python .500000).
_TRAILING_ZEROS = re.compile(r"(\.\d*?)0+\b")


def pg_text(value: object, real: bool = False) -> str | None:
    """PostgreSQL's text output for a DuckDB value (None is NULL). ``real``: its floats
    are real (DuckDB's FLOAT), shown with the digits a real holds."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, decimal.Decimal):
        return format(value, "f")  # never 0E-16 or 1E-8
    if isinstance(value, float):
        return _float(value, real)
    if isinstance(value, str):
        return value
    if isinstance(value, datetime.datetime):
        text = _trimmed(value.isoformat(sep=" "))
        return text[:-3] if value.tzinfo is not None and text.endswith(":00") else text
    if isinstance(value, datetime.time):
        return _trimmed(value.isoformat())
    if isinstance(value, datetime.date):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return "\\x" + bytes(value).hex()
    if isinstance(value, list | tuple):
        return "{" + ",".join(_element(v, real) for v in value) + "}"
    if isinstance(value, dict):
        return "(" + ",".join(_element(v, real) for v in value.values()) + ")"
    return str(value)


def _trimmed(text: str) -> str:
    """A time's text without the zeros that end its fraction of a second."""
    return _TRAILING_ZEROS.sub(lambda match: match[1].rstrip("."), text, count=1)


def _float(value: float, real: bool = False) -> str:
    """float8out (float4out for a real): the shortest digits that read back as the value,
    written as printf's %g does (an exponent below 1e-4 and from 1e15, 1e6 for a real)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    digits = _shortest_real(value) if real else repr(value)
    sign, numbers, exponent = decimal.Decimal(digits).as_tuple()
    if not isinstance(exponent, int):
        return digits
    shown = "".join(str(d) for d in numbers).rstrip("0") or "0"
    first = len(numbers) - 1 + exponent  # the exponent of the first digit
    minus = "-" if sign else ""
    if -4 <= first < (6 if real else 15):
        if first < 0:
            return f"{minus}0.{'0' * (-first - 1)}{shown}"
        whole = shown[: first + 1].ljust(first + 1, "0")
        fraction = shown[first + 1 :]
        return f"{minus}{whole}.{fraction}" if fraction else f"{minus}{whole}"
    mantissa = shown[0] + ("." + shown[1:] if len(shown) > 1 else "")
    return f"{minus}{mantissa}e{'-' if first < 0 else '+'}{abs(first):02d}"


def _shortest_real(value: float) -> str:
    """The fewest significant digits that read back as the same real (4 bytes)."""
    target = struct.unpack("f", struct.pack("f", value))[0]
    for precision in range(1, 10):
        text = f"{target:.{precision}g}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == target:
            return text
    return repr(target)


def _element(value: object, real: bool = False) -> str:
    text = pg_text(value, real)
    if text is None:
        return "NULL"
    if text == "" or text.upper() == "NULL" or _NEEDS_QUOTES.search(text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text
