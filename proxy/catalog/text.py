"""Values of the catalog DuckDB in PostgreSQL's text format."""

from __future__ import annotations

import datetime
import decimal
import re

from proxy.float_text import DEFAULT_EXTRA_FLOAT_DIGITS, float4_text, float8_text

_NEEDS_QUOTES = re.compile(r'[{},"\\\s]')
# A fraction of a second with zeros at its end (PostgreSQL writes .5, Python .500000).
_TRAILING_ZEROS = re.compile(r"(\.\d*?)0+\b")


def pg_text(
    value: object, real: bool = False, extra_float_digits: int = DEFAULT_EXTRA_FLOAT_DIGITS
) -> str | None:
    """PostgreSQL's text output for a DuckDB value (None is NULL). ``real``: its floats
    are real (DuckDB's FLOAT), shown with the digits a real holds; floats are written as
    float8out and float4out write them under the session's ``extra_float_digits``
    (proxy.float_text)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, decimal.Decimal):
        return format(value, "f")  # never 0E-16 or 1E-8
    if isinstance(value, float):
        return (
            float4_text(value, extra_float_digits)
            if real
            else float8_text(value, extra_float_digits)
        )
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
        return "{" + ",".join(_element(v, real, extra_float_digits) for v in value) + "}"
    if isinstance(value, dict):
        items = value.values()
        return "(" + ",".join(_element(v, real, extra_float_digits) for v in items) + ")"
    return str(value)


def _trimmed(text: str) -> str:
    """A time's text without the zeros that end its fraction of a second."""
    return _TRAILING_ZEROS.sub(lambda match: match[1].rstrip("."), text, count=1)


def _element(value: object, real: bool, extra_float_digits: int) -> str:
    text = pg_text(value, real, extra_float_digits)
    if text is None:
        return "NULL"
    if text == "" or text.upper() == "NULL" or _NEEDS_QUOTES.search(text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text
