"""The abbreviation of the session's time zone at a moment (to_char's TZ: CET, CEST, JST,
-03), which DuckDB cannot tell: the translation writes it as a choice by the moment's
offset, learnt from Python's time zone database.

For an IANA zone, the zone's changes of offset or abbreviation from 1900 to 2040 are
found (a look at each day, then the second of each change), and cut into eras within
which each offset has one abbreviation (Paris since 1945: +01 is CET, +02 CEST); past
2040 the last era's rule goes on. A moment before 1900, or at an offset the database
does not know, is refused when the query runs rather than shown with a guess. A fixed
offset (SET TimeZone = 2, a POSIX rule) has the abbreviation of its rule: +02, UTC.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import zoneinfo

from sqlglot import exp

from proxy.catalog.datetimes import SessionZone
from proxy.catalog.raised import marked
from proxy.catalog.zoned_values import template

_FIRST = int(dt.datetime(1900, 1, 1, tzinfo=dt.UTC).timestamp())
_LAST = int(dt.datetime(2040, 1, 1, tzinfo=dt.UTC).timestamp())
_DAY = 86_400
_POSIX_NAME = re.compile(r"<(?P<quoted>[^<>]*)>|(?P<plain>[^\d,+\-<>]+)")
_UNKNOWN = marked(
    "0A000",
    "dpproxy cannot show the time zone abbreviation of this moment",
    "dpproxy knows the abbreviations of moments from 1900 on; OF shows the offset.",
)

Era = tuple[int, tuple[tuple[int, str], ...]]  # (first second, ((offset, abbreviation), ...))


def abbreviation(zone: SessionZone, moment: exp.Expression, east: exp.Expression) -> exp.Expression:
    """The abbreviation of ``zone`` at ``moment`` (a timestamptz), whose offset there is
    ``east`` seconds (an expression)."""
    fixed = _fixed_abbreviation(zone)
    if fixed is not None:
        return exp.Literal.string(fixed)
    case = exp.Case()
    seconds = template("epoch_us(:x) // 1000000", x=moment)
    for start, names in _eras(zone.name):
        for offset, name in names:
            condition = template(
                ":s >= :start AND :o = :offset",
                s=seconds.copy(),
                start=exp.Literal.number(start),
                o=east.copy(),
                offset=exp.Literal.number(offset),
            )
            case = case.when(condition, exp.Literal.string(name))
    return case.else_(exp.Anonymous(this="error", expressions=[exp.Literal.string(_UNKNOWN)]))


def _fixed_abbreviation(zone: SessionZone) -> str | None:
    """The abbreviation of a zone of one offset: UTC, or a POSIX rule's name."""
    if zone.name == "UTC":
        return "UTC"
    if isinstance(zone.zone, zoneinfo.ZoneInfo) or zone.zone is None:
        return None
    found = _POSIX_NAME.match(zone.name)
    if found is None:
        return None
    return found["quoted"] if found["quoted"] is not None else found["plain"]


@functools.lru_cache(maxsize=64)
def _eras(name: str) -> tuple[Era, ...]:
    """The eras of the IANA zone ``name``, latest first."""
    zone = zoneinfo.ZoneInfo(name)
    changes = _changes(zone)
    eras: list[Era] = []
    names: dict[int, str] = {}
    start = changes[-1][0]
    for first, offset, abbreviation in reversed(changes):
        if names.get(offset, abbreviation) != abbreviation:
            eras.append((start, tuple(sorted(names.items()))))
            names = {}
        names[offset] = abbreviation
        start = first
    eras.append((start, tuple(sorted(names.items()))))
    return tuple(eras)


def _state(zone: zoneinfo.ZoneInfo, second: int) -> tuple[int, str]:
    moment = dt.datetime.fromtimestamp(second, zone)
    offset = moment.utcoffset() or dt.timedelta(0)
    return offset // dt.timedelta(seconds=1), moment.tzname() or ""


def _changes(zone: zoneinfo.ZoneInfo) -> list[tuple[int, int, str]]:
    """(first second, offset, abbreviation) of each stretch from 1900 to 2040."""
    before = _state(zone, _FIRST)
    changes = [(_FIRST, *before)]
    for day in range(_FIRST + _DAY, _LAST, _DAY):
        now = _state(zone, day)
        if now == before:
            continue
        low, high = day - _DAY, day  # the change is after low, at or before high
        while high - low > 1:
            middle = (low + high) // 2
            if _state(zone, middle) == before:
                low = middle
            else:
                high = middle
        changes.append((high, *now))
        before = now
    return changes
