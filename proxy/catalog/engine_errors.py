"""DuckDB's errors in a catalog query read as the errors PostgreSQL raises for the same
fault: "Division by zero in expression (1 // 0)" is 22012 division by zero, "Overflow in
addition of INT32" 22003 integer out of range, and so on. Errors dpproxy's own macros and
functions raise carry their SQLSTATE (proxy.catalog.raised). Any other DuckDB error is
not PostgreSQL's, and stays dpproxy's "cannot answer this catalog query".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from proxy.catalog.pg_numeric import DUCK_DIGITS, is_integer_text
from proxy.catalog.raised import unmarked

DIVISION_BY_ZERO = "22012"
OUT_OF_RANGE = "22003"
INVALID_TEXT = "22P02"

_INTEGER_NAMES = {"INT16": "smallint", "INT32": "integer", "INT64": "bigint"}
_FLOAT_NAMES = {"FLOAT": "real", "DOUBLE": "double precision"}
#: The smallest value of each integer type: what overflows when divided by -1 or
#: abs()'d, which DuckDB's message shows without naming the type.
_SMALLEST = {-(2**15): "smallint", -(2**31): "integer", -(2**63): "bigint"}


@dataclass(frozen=True)
class PostgresError:
    sqlstate: str
    message: str
    detail: str | None = None
    hint: str | None = None  # what to write instead (dpproxy's refusals)


def _out_of_range(type_name: str) -> PostgresError:
    return PostgresError(OUT_OF_RANGE, f"{type_name} out of range")


def _by_smallest(value: str) -> PostgresError:
    return _out_of_range(_SMALLEST.get(int(value), "integer"))


def _text_to_integer(text: str, duck_type: str) -> PostgresError:
    name = _INTEGER_NAMES[duck_type]
    if is_integer_text(text):
        return PostgresError(OUT_OF_RANGE, f'value "{text}" is out of range for type {name}')
    return PostgresError(INVALID_TEXT, f'invalid input syntax for type {name}: "{text}"')


def _numeric_field(precision: str, scale: str) -> PostgresError:
    whole = int(precision) - int(scale)
    limit = f"10^{whole}" if whole else "1"
    return PostgresError(
        OUT_OF_RANGE,
        "numeric field overflow",
        f"A field with precision {precision}, scale {scale} must round to an absolute "
        f"value less than {limit}.",
    )


def _unsupported_type(name: str) -> PostgresError:
    """A type the catalog does not have (inet, money): said so, as the catalog's casts
    refuse the others (proxy.catalog.casts), not with DuckDB's words about extensions."""
    return PostgresError(
        "0A000",
        f"dpproxy's catalog does not support the type {name}",
        hint="catalog queries compute with PostgreSQL's basic types (numbers, text, "
        "booleans, dates and times, json, uuid): leave the value out, or keep it as text",
    )


def postgres_error(text: str) -> PostgresError | None:
    """PostgreSQL's error for DuckDB's message ``text`` (its first line), if it has one."""
    marked = unmarked(text)
    if marked is not None:
        sqlstate, message, hint = marked
        return PostgresError(sqlstate, message, hint=hint)
    if "Division by zero in expression" in text:
        return PostgresError(DIVISION_BY_ZERO, "division by zero")
    found = re.search(r"Overflow in \w+ of (INT16|INT32|INT64)\b", text)
    if found:
        return _out_of_range(_INTEGER_NAMES[found[1]])
    found = re.search(r"Overflow in division of (-?\d+) / -1", text)
    if found:
        return _by_smallest(found[1])
    found = re.search(r"Overflow on abs\((-?\d+)\)", text)
    if found:
        return _by_smallest(found[1])
    if "Overflow in negation of numeric value" in text:
        return _out_of_range("integer")
    found = re.search(
        r"can't be cast because the value is out of range for the destination type "
        r"(INT16|INT32|INT64|FLOAT)\b",
        text,
    )
    if found:
        if found[1] == "FLOAT":
            return PostgresError(OUT_OF_RANGE, "value out of range: overflow")
        return _out_of_range(_INTEGER_NAMES[found[1]])
    found = re.search(r"Failed to cast decimal value \S+ to type (INT16|INT32|INT64)\b", text)
    if found:
        return _out_of_range(_INTEGER_NAMES[found[1]])
    found = re.search(r"to type DECIMAL\((\d+),(\d+)\) failed: value is out of range", text)
    if found:
        return _numeric_field(found[1], found[2])
    found = re.search(r"Could not convert string '(.*)' to (INT16|INT32|INT64)\b", text)
    if found:
        return _text_to_integer(found[1], found[2])
    found = re.search(r"Could not convert string '(.*)' to (DOUBLE|FLOAT)\b", text)
    if found:
        name = _FLOAT_NAMES[found[2]]
        return PostgresError(INVALID_TEXT, f'invalid input syntax for type {name}: "{found[1]}"')
    found = re.search(r'Could not convert string "(.*)" to DECIMAL', text)
    if found:
        message = f'invalid input syntax for type numeric: "{found[1]}"'
        return PostgresError(INVALID_TEXT, message)
    found = re.search(r"install the required extension '(\w+)", text) or re.search(
        r"Type with name (\w+) does not exist", text
    )
    if found:  # DuckDB would load (and, were it allowed, download) an extension for it
        return _unsupported_type(found[1].lower())
    if re.search(r"Overflow in \w+ of DECIMAL\(", text):
        return PostgresError(
            "0A000", f"dpproxy's catalog computes numeric values of at most {DUCK_DIGITS} digits"
        )
    return None
