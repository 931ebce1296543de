"""A text read with a format, as PostgreSQL 15's to_date(text, format) and
to_timestamp(text, format) read it (formatting.c: ``parse_format``, ``DCH_from_char``,
``do_to_timestamp``), for a set of the format's keywords.

Superset writes its time-range filters as ``TO_DATE('2023-01-01', 'YYYY-MM-DD')`` and
``TO_TIMESTAMP('2023-02-01 00:00:00.000000', 'YYYY-MM-DD HH24:MI:SS.US')``. dpproxy reads
such a call's text as PostgreSQL does, outside FX mode:

- keywords ``YYYY``, ``MM``, ``DD``, ``HH24``, ``HH12`` and ``HH`` (with ``AM``, ``PM``,
  ``A.M.`` or ``P.M.``, any case), ``MI``, ``SS``, ``MS`` and ``US``, each optionally after
  ``FM``; other characters of the format as PostgreSQL reads them (a space or a separator
  matches one space or separator of the text, or none; a letter or a quoted character
  skips one character of the text);
- a number fills the characters of its keyword (4 for ``YYYY``, 3 for ``MS``, 6 for
  ``US``, 2 for the others) when the next keyword reads digits, else as many digits as
  follow (``2023-1-5`` with ``YYYY-MM-DD``); ``MS`` and ``US`` are fractions of a second
  (``SS.MS`` of ``12.3`` is 12.300 seconds);
- text after the format's end is ignored, and keywords after the text's end are not read
  (a month and a day default to 1);
- PostgreSQL's errors, with its SQLSTATE: 22007 where the text does not fit the format
  (``invalid value "x" for "MM"``, an hour of 0 or 13 on the 12-hour clock), 22008 where a
  field is out of range (a month of 13, February 30, an hour of 24, a 60th second); a
  month or a day of 0 is PostgreSQL's "not given" (1).

Other keywords (``Mon``, ``DDD``, ``TZH``, ``FX``, ``TM``, ``TH`` …) are refused, as are a
format without ``YYYY`` and a result outside the years 1 to 9999 (PostgreSQL's years BC
and beyond 9999), which dpproxy does not compare.
"""

from __future__ import annotations

import calendar
import datetime as dt
import zoneinfo
from dataclasses import dataclass
from typing import Literal

from rewriter.datetime_input import local_instant
from rewriter.errors import Rejected
from rewriter.to_char_format import KEYWORDS

INVALID_DATETIME_FORMAT = "22007"
DATETIME_FIELD_OVERFLOW = "22008"
_SPACES = " \t\n\r\v\f"
_BY_LENGTH = sorted(KEYWORDS, key=len, reverse=True)
#: The keywords read here, and the characters of their number.
_WIDTHS = {"YYYY": 4, "MM": 2, "DD": 2, "HH24": 2, "HH12": 2, "HH": 2, "MI": 2, "SS": 2}
_FRACTIONS = {"MS": 3, "US": 6}
_MERIDIEM = {"AM": False, "PM": False, "A.M.": True, "P.M.": True}
SUPPORTED = (
    "YYYY, MM, DD, HH24, HH12 or HH with AM or PM, MI, SS, MS and US (each optionally "
    "after FM), with separators and spaces between them"
)
_HINT = (
    "write the format with these keywords, e.g. to_timestamp('2024-01-31 08:00:00', "
    "'YYYY-MM-DD HH24:MI:SS'), or compare with a literal: ts >= '2024-01-31 08:00:00'"
)


@dataclass(frozen=True)
class _Node:
    kind: Literal["action", "space", "separator", "char"]
    text: str  # the keyword as written (its name in errors), or the character
    fill: bool = False  # FM


@dataclass
class _Fields:
    """formatting.c's TmFromChar: 0 is "not given"."""

    year: int = 0
    mm: int = 0
    dd: int = 0
    hh: int = 0
    mi: int = 0
    ss: int = 0
    ms: int = 0
    us: int = 0
    pm: int = 0
    twelve: bool = False


def read_date(text: str, fmt: str) -> dt.date:
    """``to_date(text, fmt)``, or Rejected."""
    return _read(text, fmt, "to_date").date()


def read_timestamp(text: str, fmt: str, zone: zoneinfo.ZoneInfo) -> dt.datetime:
    """``to_timestamp(text, fmt)`` in the session's ``zone``: the instant (naive, in UTC),
    or Rejected."""
    local = _read(text, fmt, "to_timestamp")
    seconds = local.replace(microsecond=0)
    instant = local_instant(seconds, local.microsecond, zone)
    if instant is None or not 1 <= instant.year <= 9999:
        raise _outside("to_timestamp", text)
    return instant


def _read(text: str, fmt: str, function: str) -> dt.datetime:
    nodes = _nodes(fmt, function)
    if not text.isascii():
        raise Rejected(
            f"dpproxy reads the text of {function}() in ASCII characters only",
            hint=_HINT,
        )
    fields = _from_char(nodes, text)
    return _moment(fields, text, function)


def _nodes(fmt: str, function: str) -> list[_Node]:
    """PostgreSQL's parse_format for a date format; Rejected for keywords not read here."""
    nodes: list[_Node] = []
    position = 0
    while position < len(fmt):
        fill = False
        if fmt.startswith(("FM", "fm"), position):
            fill, position = True, position + 2
        elif fmt.startswith(("TM", "tm"), position):
            raise _unsupported(function, fmt[position : position + 2])
        keyword = next((k for k in _BY_LENGTH if fmt.startswith(k, position)), None)
        if keyword is not None:
            position += len(keyword)
            if keyword.upper() not in {**_WIDTHS, **_FRACTIONS, **_MERIDIEM}:
                raise _unsupported(function, keyword)
            if fmt.startswith(("TH", "th", "SP"), position):
                raise _unsupported(function, keyword + fmt[position : position + 2])
            nodes.append(_Node("action", keyword, fill))
            continue
        if position >= len(fmt):
            break
        if fmt[position] == '"':
            position += 1
            while position < len(fmt):
                if fmt[position] == '"':
                    position += 1
                    break
                if fmt[position] == "\\" and position + 1 < len(fmt):
                    position += 1
                nodes.append(_Node("char", fmt[position]))
                position += 1
            continue
        if fmt.startswith('\\"', position):
            position += 1
        character = fmt[position]
        position += 1
        if _separator(character):
            nodes.append(_Node("separator", character))
        elif character in _SPACES:
            nodes.append(_Node("space", character))
        else:
            nodes.append(_Node("char", character))
    if not any(n.kind == "action" and n.text.upper() == "YYYY" for n in nodes):
        raise Rejected(
            f"dpproxy reads {function}() with a format that gives the year (YYYY): "
            "PostgreSQL's year is otherwise 1 BC",
            hint=_HINT,
        )
    return nodes


def _from_char(nodes: list[_Node], text: str) -> _Fields:
    """PostgreSQL's DCH_from_char outside FX mode."""
    fields = _Fields()
    position = 0
    extra = 0  # the spaces skipped beyond those the format names
    for index, node in enumerate(nodes):
        if position >= len(text):
            break
        if node.kind == "action" or index == 0:
            while position < len(text) and text[position] in _SPACES:
                position += 1
                extra += 1
        if node.kind in ("space", "separator"):
            extra -= 1
            if position < len(text) and (text[position] in _SPACES or _separator(text[position])):
                position += 1
                extra += 1
            continue
        if node.kind == "char":
            if extra > 0:
                extra -= 1
            else:
                position += 1
            continue
        position = _action(nodes, index, text, position, fields)
        extra = 0
        while position < len(text) and text[position] in _SPACES:
            position += 1
            extra += 1
    return fields


def _action(nodes: list[_Node], index: int, text: str, position: int, fields: _Fields) -> int:
    node = nodes[index]
    name = node.text.upper()
    if name in _MERIDIEM:
        long = _MERIDIEM[name]
        words = ("a.m.", "p.m.") if long else ("am", "pm")
        rest = text[position:].lower()
        for value, word in enumerate(words):
            if rest.startswith(word):
                _set(fields, "pm", value, node)
                fields.twelve = True
                return position + len(word)
        shown = text[position:].split(maxsplit=1)[0] if text[position:].strip() else ""
        raise Rejected(
            f'invalid value "{shown}" for "{node.text}"',
            sqlstate=INVALID_DATETIME_FORMAT,
            hint="The given value did not match any of the allowed values for this field.",
        )
    width = _WIDTHS.get(name) or _FRACTIONS[name]
    value, end = _number(nodes, index, text, position, width)
    if name in _FRACTIONS:
        _set(fields, name.lower(), value, node)
        used = end - position  # PostgreSQL scales by the characters read (30 is .30)
        scale = 10 ** (width - used) if 0 < used < width else 1
        setattr(fields, name.lower(), value * scale)
        return end
    target = {"YYYY": "year", "HH24": "hh", "HH12": "hh", "HH": "hh"}.get(name, name.lower())
    _set(fields, target, value, node)
    if name in ("HH12", "HH"):
        fields.twelve = True
    return end


def _number(
    nodes: list[_Node], index: int, text: str, position: int, width: int
) -> tuple[int, int]:
    """PostgreSQL's from_char_parse_int_len: the number and the position after it."""
    node = nodes[index]
    start = position
    while position < len(text) and text[position] in _SPACES:
        position += 1
    copy = text[position : position + width]
    if node.fill or _next_is_separator(nodes, index):
        value, end = _strtol(text, start)
        position = end
    else:
        if len(text) - position < width:
            raise Rejected(
                f'source string too short for "{node.text}" formatting field',
                sqlstate=INVALID_DATETIME_FORMAT,
                hint='If your source string is not fixed-width, try using the "FM" modifier.',
            )
        value, used = _strtol(copy, 0)
        if 0 < used < width:
            raise Rejected(
                f'invalid value "{copy}" for "{node.text}"',
                sqlstate=INVALID_DATETIME_FORMAT,
                hint='If your source string is not fixed-width, try using the "FM" modifier.',
            )
        position += used
    if position == start:
        raise Rejected(
            f'invalid value "{copy}" for "{node.text}"',
            sqlstate=INVALID_DATETIME_FORMAT,
            hint="Value must be an integer.",
        )
    if not -(2**31) <= value < 2**31:
        raise Rejected(
            f'value for "{node.text}" in source string is out of range',
            sqlstate=DATETIME_FIELD_OVERFLOW,
            hint="Value must be in the range -2147483648 to 2147483647.",
        )
    return value, position


def _strtol(text: str, start: int) -> tuple[int, int]:
    """C's strtol in base 10: the value and the position after it (``start`` where no
    digits follow)."""
    position = start
    while position < len(text) and text[position] in _SPACES:
        position += 1
    sign = 1
    if position < len(text) and text[position] in "+-":
        sign = -1 if text[position] == "-" else 1
        position += 1
    digits = position
    while position < len(text) and text[position].isdigit():
        position += 1
    if position == digits:
        return 0, start
    return sign * int(text[digits:position]), position


def _next_is_separator(nodes: list[_Node], index: int) -> bool:
    """PostgreSQL's is_next_separator: whether the node after ``index`` reads no digits."""
    if index + 1 >= len(nodes):
        return True
    following = nodes[index + 1]
    if following.kind == "action":
        return following.text.upper() in _MERIDIEM
    return not ("0" <= following.text <= "9")


def _set(fields: _Fields, name: str, value: int, node: _Node) -> None:
    """PostgreSQL's from_char_set_int: a field given twice must agree."""
    previous = getattr(fields, name)
    if previous not in (0, value):
        raise Rejected(
            f'conflicting values for "{node.text}" field in formatting string',
            sqlstate=INVALID_DATETIME_FORMAT,
            hint="This value contradicts a previous setting for the same field type.",
        )
    setattr(fields, name, value)


def _moment(fields: _Fields, text: str, function: str) -> dt.datetime:
    """PostgreSQL's do_to_timestamp: the fields as a local date and time, checked."""
    hour = fields.hh
    if fields.twelve:
        if not 1 <= hour <= 12:
            raise Rejected(
                f'hour "{hour}" is invalid for the 12-hour clock',
                sqlstate=INVALID_DATETIME_FORMAT,
                hint="Use the 24-hour clock, or give an hour between 1 and 12.",
            )
        if fields.pm and hour < 12:
            hour += 12
        elif not fields.pm and hour == 12:
            hour = 0
    year = fields.year + 1 if fields.year < 0 else fields.year  # 1 BC is year 0
    month = fields.mm or 1
    day = fields.dd or 1
    micros = fields.ms * 1000 + fields.us
    overflow = Rejected(
        f'date/time field value out of range: "{text}"', sqlstate=DATETIME_FIELD_OVERFLOW
    )
    checked = fields.year != 0  # the year given: ValidateDate checks the month and day
    if (checked or fields.mm) and not 1 <= month <= 12:
        raise overflow
    if (checked or fields.dd) and not 1 <= day <= 31:
        raise overflow
    if checked and day > _month_days(year, month):
        raise overflow
    if not (0 <= hour < 24 and 0 <= fields.mi < 60 and 0 <= fields.ss < 60):
        raise overflow
    if not 0 <= micros < 1_000_000:
        raise overflow
    if not 1 <= year <= 9999:
        raise _outside(function, text)
    return dt.datetime(year, month, day, hour, fields.mi, fields.ss, micros)


def _month_days(year: int, month: int) -> int:
    """The days of ``month`` (1 to 12) in PostgreSQL's proleptic Gregorian ``year`` (0 is
    1 BC, a leap year)."""
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    return 29 if month == 2 and leap else calendar.monthrange(2001, month)[1]


def _separator(character: str) -> bool:
    """PostgreSQL's is_separator_char: printable ASCII, neither a letter nor a digit."""
    return " " < character < "\x7f" and not character.isalnum()


def _unsupported(function: str, keyword: str) -> Rejected:
    return Rejected(
        f'dpproxy does not read {function}() with the format keyword "{keyword}": it reads '
        f"{SUPPORTED}",
        hint=_HINT,
    )


def _outside(function: str, text: str) -> Rejected:
    return Rejected(
        f"{function}('{text}', …) is outside the years 1 to 9999, which dpproxy compares",
        hint=_HINT,
    )
