"""Values of the catalog DuckDB in PostgreSQL's text format."""

from __future__ import annotations

import datetime
import decimal
import math
import re

_NEEDS_QUOTES = re.compile(r'[{},"\\\s]')
# A fraction of a second with zeros at its end (PostgreSQL writes .5, Python .500000).
_TRAILING_ZEROS = re.compile(r"(\.\d*?)0+\b")


def pg_text(value: object) -> str | None:
    """PostgreSQL's text output for a DuckDB value (None is NULL)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, int | decimal.Decimal):
        return str(value)
    if isinstance(value, float):
        return _float(value)
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
        return "{" + ",".join(_element(v) for v in value) + "}"
    if isinstance(value, dict):
        return "(" + ",".join(_element(v) for v in value.values()) + ")"
    return str(value)


def _trimmed(text: str) -> str:
    """A time's text without the zeros that end its fraction of a second."""
    return _TRAILING_ZEROS.sub(lambda match: match[1].rstrip("."), text, count=1)


def _float(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def _element(value: object) -> str:
    text = pg_text(value)
    if text is None:
        return "NULL"
    if text == "" or text.upper() == "NULL" or _NEEDS_QUOTES.search(text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text
