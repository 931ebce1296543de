"""The values of client parameters that dpproxy reads itself, as PostgreSQL reads them.

application_name (cleaned as PostgreSQL 15 cleans it), client_encoding (UTF8 only) and
DateStyle (ISO only, in any day order), each the reading its entry of
proxy.parameter_table names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from proxy.pg_values import invalid_value
from proxy.seam import QueryError
from proxy.sql_tokens import lower_identifier
from proxy.sqlstate import FEATURE_NOT_SUPPORTED

_ENCODINGS = {"utf8": "UTF8", "unicode": "UTF8", "sqlascii": "SQL_ASCII"}
_DATE_STYLES = ("ISO", "SQL", "Postgres", "German")
_APPLICATION_NAME_LENGTH = 63  # NAMEDATALEN - 1


def clean_application_name(value: str) -> str:
    """As PostgreSQL 15: each byte outside printable ASCII becomes ?, and the name is cut
    to 63 characters."""
    cleaned = "".join(c if " " <= c <= "~" else "?" * len(c.encode("utf-8")) for c in value)
    return cleaned[:_APPLICATION_NAME_LENGTH]


def client_encoding(value: str) -> str:
    """client_encoding as PostgreSQL shows it (UTF8, or SQL_ASCII, which PostgreSQL passes
    through unconverted): dpproxy writes text in UTF8 only, so others are refused (0A000)."""
    encoding = _ENCODINGS.get(re.sub(r"[^0-9a-z]", "", value.lower()))
    if encoding is None:
        raise QueryError(
            FEATURE_NOT_SUPPORTED,
            f'dpproxy writes text in UTF8 only: client_encoding "{value}" is not supported',
            hint="connect with client_encoding=UTF8 (libpq: PGCLIENTENCODING=UTF8) or "
            "SET client_encoding = 'UTF8'",
        )
    return encoding


def _invalid(value: str, *, detail: str) -> QueryError:
    return invalid_value("DateStyle", value, detail=detail)


def date_style(value: str, current: Mapping[str, str], reset: Mapping[str, str]) -> str:
    """DateStyle as PostgreSQL reads it: a list of an output style (ISO, SQL, Postgres,
    German) and a day order (MDY/US/NonEuro, DMY/Euro, YMD), either one keeping the
    current other, DEFAULT the session's starting value (``current`` and ``reset``: the
    session's parameters now and at its start). dpproxy writes dates as ISO only, so ISO
    is the only style it accepts (any order: it only reads ISO dates)."""
    new_style, new_order = _split_date_style(current["datestyle"])
    have_style = have_order = False
    items = _split_identifiers(value)
    if items is None:
        raise _invalid(value, detail="List syntax is invalid.")
    conflict = False
    for item in items:
        word = item.lower()
        if word in ("iso", "sql", "german") or word.startswith("postgres"):
            style = next(s for s in _DATE_STYLES if word.startswith(s.lower()))
            conflict |= have_style and new_style != style
            new_style, have_style = style, True
            if style == "German" and not have_order:
                new_order = "DMY"
        elif word in ("ymd", "dmy", "mdy", "us") or word.startswith(("euro", "noneuro")):
            named = {"ymd": "YMD", "dmy": "DMY", "mdy": "MDY", "us": "MDY"}.get(word)
            order = named or ("DMY" if word.startswith("euro") else "MDY")
            conflict |= have_order and new_order != order
            new_order, have_order = order, True
        elif word == "default":
            default_style, default_order = _split_date_style(reset["datestyle"])
            new_style = new_style if have_style else default_style
            new_order = new_order if have_order else default_order
        else:
            raise _invalid(value, detail=f'Unrecognized key word: "{item}".')
    if conflict:
        raise _invalid(value, detail='Conflicting "datestyle" specifications.')
    if new_style != "ISO":
        raise QueryError(
            FEATURE_NOT_SUPPORTED,
            f'dpproxy writes dates in ISO style only (2024-01-31), not "{new_style}" '
            f'(DateStyle "{value}")',
            hint="SET DateStyle = 'ISO' (with MDY, DMY or YMD for the order of ambiguous "
            "input dates, e.g. 'ISO, DMY'), or leave DateStyle out of the connection settings",
        )
    return f"{new_style}, {new_order}"


def _split_date_style(shown: str) -> tuple[str, str]:
    style, _, order = shown.partition(", ")
    return style, order


def _split_identifiers(text: str) -> list[str] | None:
    """A comma-separated list of names as PostgreSQL splits one (SplitIdentifierString):
    "quoted" names keep their case, others are lower-cased; None if malformed."""
    items: list[str] = []
    position = len(text) - len(text.lstrip())
    if position == len(text):
        return items
    while True:
        if text.startswith('"', position):
            end = position + 1
            while True:
                end = text.find('"', end)
                if end < 0:
                    return None
                if not text.startswith('""', end):
                    break
                end += 2
            items.append(text[position + 1 : end].replace('""', '"'))
            position = end + 1
        else:
            match = re.compile(r"[^,\s]*").match(text, position)
            if match is None or not match.group():
                return None
            items.append(lower_identifier(match.group()))
            position = match.end()
        while position < len(text) and text[position].isspace():
            position += 1
        if position == len(text):
            return items
        if text[position] != ",":
            return None
        position += 1
        while position < len(text) and text[position].isspace():
            position += 1
