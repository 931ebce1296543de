"""Time zones, intervals and timestamps with time zone in catalog answers, as PostgreSQL
shows them.

DuckDB's Python client turns an INTERVAL into a timedelta (a month becomes 30 days) and
needs pytz (not a dependency of dpproxy) for TIMESTAMP WITH TIME ZONE. So the catalog
reads the types of an answer's columns (its description) before fetching a row, and when
one holds such values (or a list or struct of them) it runs the query again with those
columns projected into what PostgreSQL's text is made from: an interval's months, days
and microseconds, a timestamptz's microseconds since 1970 (shown in the session's
TimeZone here), a timetz's text (DuckDB writes it as PostgreSQL does).

The session's TimeZone (proxy.time_zones: an IANA name, or a POSIX rule) is also what
current_date, localtimestamp, current_time and timestamptz literals without an offset
are computed in: :func:`session_zone` gives its Python zone and the name DuckDB's ICU
knows it by.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import zoneinfo
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from duckdb.sqltypes import DuckDBPyType

SECOND = 1_000_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR
#: What a timestamptz column's projection gives for ±infinity (DuckDB's epoch_us gives
#: NULL): PostgreSQL's and DuckDB's own sentinels, beyond every finite value.
INFINITY = 2**63 - 1
MINUS_INFINITY = -(2**63 - 1)
_UNIX_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# The instants whose offset Python can compute in any zone (a day inside years 1 to 9999);
# an instant beyond takes the offset of the one a number of 400-year cycles away (the
# calendar and the days of the week repeat, and with them the zone's first or last rule).
_FIRST = (dt.datetime(1, 1, 2, tzinfo=dt.UTC) - _UNIX_EPOCH) // dt.timedelta(microseconds=1)
_LAST = (dt.datetime(9999, 12, 30, tzinfo=dt.UTC) - _UNIX_EPOCH) // dt.timedelta(microseconds=1)
_CYCLE = 146_097 * DAY
# A POSIX rule without daylight saving time: a name ("UTC", "<+02>") and hours west of UTC.
_FIXED_RULE = re.compile(
    r"(?:<[^<>]*>|[^\d,+\-<>]+)(?P<sign>[+-]?)(?P<hours>\d{1,3})"
    r"(?::(?P<minutes>\d{2}))?(?::(?P<seconds>\d{2}))?",
    re.ASCII,
)
_INTERVAL_TYPE = "interval"
_TIMESTAMPTZ_TYPE = "timestamp with time zone"
_TIMETZ_TYPE = "time with time zone"
_SHOWN_TYPES = frozenset({_INTERVAL_TYPE, _TIMESTAMPTZ_TYPE, _TIMETZ_TYPE})


class UnshownValues(Exception):
    """An answer holds values dpproxy cannot show as PostgreSQL does (the message says
    which, and is safe to show)."""


@dataclass(frozen=True)
class SessionZone:
    """A session's TimeZone: ``name`` as SHOW TimeZone shows it, ``zone`` the Python time
    zone timestamptz values are shown in and ``duckdb`` the name DuckDB's ICU computes
    local times in; either is None when the rule has no equivalent there (a POSIX rule
    with daylight saving time, an offset of seconds)."""

    name: str
    zone: dt.tzinfo | None
    duckdb: str | None

    def refusal(self, what: str) -> str:
        """Why dpproxy cannot compute ``what`` in this zone, and what to do instead."""
        return (
            f'dpproxy cannot compute {what} in the time zone "{self.name}"; SET TimeZone '
            "to a name such as 'Europe/Paris', or to a number of hours east of UTC such as 2"
        )


@functools.lru_cache(maxsize=256)
def session_zone(name: str) -> SessionZone:
    """The SessionZone of a TimeZone value (as proxy.time_zones.time_zone writes it)."""
    if name == "UTC":
        return SessionZone(name, dt.UTC, name)  # even without a time zone database
    if name in _zone_names():
        try:
            return SessionZone(name, zoneinfo.ZoneInfo(name), name)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            return SessionZone(name, None, None)
    rule = _FIXED_RULE.fullmatch(name)
    if rule is None:
        return SessionZone(name, None, None)  # daylight saving time: a rule Python has not
    seconds = int(rule["hours"]) * 3600 + int(rule["minutes"] or 0) * 60
    seconds += int(rule["seconds"] or 0)
    east = seconds if rule["sign"] == "-" else -seconds  # POSIX counts west of UTC
    if abs(east) >= 24 * 3600:
        return SessionZone(name, None, None)
    zone = dt.timezone(dt.timedelta(seconds=east))
    if east % 60:
        return SessionZone(name, zone, None)  # ICU's custom zones have no seconds
    hours, minutes = divmod(abs(east) // 60, 60)
    return SessionZone(name, zone, f"GMT{'-' if east < 0 else '+'}{hours:02d}:{minutes:02d}")


@functools.cache
def _zone_names() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


UTC_ZONE = session_zone("UTC")


# ---------------------------------------------------------------------------------------
# PostgreSQL's text


def _truncated(value: int, unit: int) -> int:
    """value / unit rounded toward zero, as C divides."""
    quotient = abs(value) // unit
    return quotient if value >= 0 else -quotient


def interval_text(months: int, days: int, micros: int) -> str:
    """An interval as PostgreSQL writes it (IntervalStyle postgres, EncodeInterval): each
    nonzero part with its own sign, a + before a positive part that follows a negative
    one: 1 year 2 mons, -1 days +02:00:00, 1 day -00:00:01, 00:00:00."""
    years = _truncated(months, 12)
    hours = _truncated(micros, HOUR)
    rest = micros - hours * HOUR
    minutes = _truncated(rest, MINUTE)
    rest -= minutes * MINUTE
    seconds = _truncated(rest, SECOND)
    fraction = rest - seconds * SECOND
    parts: list[str] = []
    before = False  # the previous part was negative
    for amount, unit in ((years, "year"), (months - 12 * years, "mon"), (days, "day")):
        if amount:
            plus = "+" if before and amount > 0 else ""
            parts.append(f"{plus}{amount} {unit}{'' if amount == 1 else 's'}")
            before = amount < 0
    if not parts or micros:
        sign = "-" if micros < 0 else "+" if before else ""
        clock = f"{sign}{abs(hours):02d}:{abs(minutes):02d}:{abs(seconds):02d}"
        if fraction:
            clock += f".{abs(fraction):06d}".rstrip("0")
        parts.append(clock)
    return " ".join(parts)


def timestamptz_text(micros: int, zone: dt.tzinfo) -> str:
    """The instant ``micros`` after 1970-01-01 00:00 UTC as PostgreSQL writes a timestamp
    with time zone in ``zone`` (DateStyle ISO): 2019-12-31 23:00:00+01, with the offset's
    minutes and seconds when it has them (+05:30, LMT's +00:09:21), years after 9999 in
    full and years BC as "0044-03-15 12:00:00+00 BC"."""
    if micros == INFINITY:
        return "infinity"
    if micros == MINUS_INFINITY:
        return "-infinity"
    probe = micros  # an instant of the same offset that Python can compute
    if probe > _LAST:
        probe -= ((probe - _LAST) // _CYCLE + 1) * _CYCLE
    elif probe < _FIRST:
        probe += ((_FIRST - probe) // _CYCLE + 1) * _CYCLE
    moment = _UNIX_EPOCH + dt.timedelta(microseconds=probe)
    offset = moment.astimezone(zone).utcoffset() or dt.timedelta(0)
    local = micros + offset // dt.timedelta(microseconds=1)
    days, clock = divmod(local, DAY)
    year, month, day = _civil_day(days)
    seconds, fraction = divmod(clock, SECOND)
    minutes, second = divmod(seconds, 60)
    hour, minute = divmod(minutes, 60)
    shown_year = year if year > 0 else 1 - year  # 1 BC is year 0
    text = f"{shown_year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}"
    if fraction:
        text += f".{fraction:06d}".rstrip("0")
    text += _offset_text(offset // dt.timedelta(seconds=1))
    return text if year > 0 else text + " BC"


def _offset_text(east: int) -> str:
    """PostgreSQL's EncodeTimezone: +01, -03:30, +00:09:21."""
    minutes, seconds = divmod(abs(east), 60)
    hours, minutes = divmod(minutes, 60)
    text = f"{'+' if east >= 0 else '-'}{hours:02d}"
    if seconds:
        return f"{text}:{minutes:02d}:{seconds:02d}"
    return f"{text}:{minutes:02d}" if minutes else text


def _civil_day(days: int) -> tuple[int, int, int]:
    """(year, month, day) of the proleptic Gregorian calendar ``days`` after 1970-01-01,
    for any year (1 BC is year 0)."""
    shifted = days + 719_468  # from 0000-03-01: the leap day ends each year
    era = shifted // 146_097
    day_of_era = shifted - era * 146_097
    year_of_era = (
        day_of_era - day_of_era // 1460 + day_of_era // 36_524 - day_of_era // 146_096
    ) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    shifted_month = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * shifted_month + 2) // 5 + 1
    month = shifted_month + 3 if shifted_month < 10 else shifted_month - 9
    year = year_of_era + era * 400 + (1 if month <= 2 else 0)
    return year, month, day


# ---------------------------------------------------------------------------------------
# Answers: which columns are projected, and how their values are shown


@dataclass(frozen=True)
class _Shown:
    """How the values of a type are projected (``project``: the SQL of the projection of
    the SQL value it is given) and then turned into what pg_text shows (``convert``)."""

    project: Callable[[str], str]
    convert: Callable[[object], object]


@dataclass(frozen=True)
class OutputPlan:
    """The projection of an answer whose columns hold intervals or timestamptz values:
    ``query(sql)`` is the query to run instead of ``sql``, ``convert(row)`` shows one of
    its rows (a tuple whose values pg_text writes as PostgreSQL's text)."""

    names: tuple[str, ...]
    shown: tuple[_Shown | None, ...]

    def query(self, sql: str) -> str:
        columns = [f"c{index}" for index in range(len(self.names))]
        projected = ", ".join(
            f"{column if shown is None else shown.project(column)} AS {_quoted(name)}"
            for column, name, shown in zip(columns, self.names, self.shown, strict=True)
        )
        return f"SELECT {projected} FROM ({sql}) AS dp_output({', '.join(columns)})"

    def convert(self, row: tuple[object, ...]) -> tuple[object, ...]:
        return tuple(
            value if shown is None else shown.convert(value)
            for value, shown in zip(row, self.shown, strict=True)
        )


def output_plan(
    names: Sequence[str], types: Sequence[DuckDBPyType], zone: SessionZone
) -> OutputPlan | None:
    """The plan to show an answer with columns ``names`` of ``types`` (DuckDB's
    description), or None when DuckDB's values need nothing (no interval, timestamptz
    or timetz in it). Raises UnshownValues for values dpproxy cannot show."""
    shown = tuple(_shown(duck, zone, 0) for duck in types)
    if all(item is None for item in shown):
        return None
    return OutputPlan(tuple(names), shown)


def _duck_type(value: object) -> DuckDBPyType:
    """A nested type's child type (its children also hold an ARRAY's size, an ENUM's
    values)."""
    if not isinstance(value, DuckDBPyType):
        raise UnshownValues(f"dpproxy cannot read the type {value!r} of a catalog answer")
    return value


def _shown(duck: DuckDBPyType, zone: SessionZone, depth: int) -> _Shown | None:
    kind = duck.id.lower()
    if kind == _INTERVAL_TYPE:
        return _Shown(_interval_parts, _interval)
    if kind == _TIMESTAMPTZ_TYPE:
        shown_in = zone.zone
        if shown_in is None:
            raise UnshownValues(zone.refusal("timestamp with time zone values"))
        return _Shown(_epoch_micros, lambda value: _timestamptz(value, shown_in))
    if kind == _TIMETZ_TYPE:
        return _Shown(lambda value: f"CAST({value} AS VARCHAR)", _unchanged)
    if kind == "list":
        (_, child), *_ = duck.children
        return _list(_shown(_duck_type(child), zone, depth + 1), depth)
    if kind == "struct":
        fields = [
            (name, _shown(_duck_type(child), zone, depth + 1)) for name, child in duck.children
        ]
        return _struct(fields)
    if kind in ("map", "array", "union") and _holds_times(duck):
        raise UnshownValues(
            f"dpproxy cannot show intervals or times with time zone inside a {kind}"
        )
    return None


def _holds_times(duck: DuckDBPyType) -> bool:
    kind = duck.id.lower()
    if kind in _SHOWN_TYPES:
        return True
    if kind not in ("list", "struct", "map", "array", "union"):
        return False
    return any(
        isinstance(child, DuckDBPyType) and _holds_times(child) for _, child in duck.children
    )


def _interval_parts(value: str) -> str:
    """An interval's months, days and microseconds (DuckDB's date parts split them up:
    the months into years and months, the microseconds into hours, minutes and the
    microseconds of the minute, all of the interval's sign)."""
    months = f"datepart('year', {value}) * 12 + datepart('month', {value})"
    days = f"datepart('day', {value})"
    micros = (
        f"datepart('hour', {value}) * {HOUR} + datepart('minute', {value}) * {MINUTE} "
        f"+ datepart('microseconds', {value})"
    )
    return f"CASE WHEN {value} IS NULL THEN NULL ELSE [{months}, {days}, {micros}] END"


def _epoch_micros(value: str) -> str:
    return (
        f"CASE WHEN {value} = 'infinity'::TIMESTAMPTZ THEN {INFINITY} "
        f"WHEN {value} = '-infinity'::TIMESTAMPTZ THEN {MINUS_INFINITY} "
        f"ELSE epoch_us({value}) END"
    )


def _interval(value: object) -> object:
    if value is None:
        return None
    if not (isinstance(value, list) and len(value) == 3 and all(isinstance(v, int) for v in value)):
        raise UnshownValues(f"dpproxy cannot read the interval {value!r}")
    months, days, micros = value
    return interval_text(months, days, micros)


def _timestamptz(value: object, zone: dt.tzinfo) -> object:
    if value is None:
        return None
    if not isinstance(value, int):
        raise UnshownValues(f"dpproxy cannot read the timestamp {value!r}")
    return timestamptz_text(value, zone)


def _unchanged(value: object) -> object:
    return value


def _list(element: _Shown | None, depth: int) -> _Shown | None:
    if element is None:
        return None
    name = f"dp_element{depth}"

    def project(value: str) -> str:
        return f"list_transform({value}, lambda {name}: {element.project(name)})"

    def convert(value: object) -> object:
        if value is None:
            return None
        if not isinstance(value, list):
            raise UnshownValues(f"dpproxy cannot read the list {value!r}")
        return [element.convert(item) for item in value]

    return _Shown(project, convert)


def _struct(fields: list[tuple[str, _Shown | None]]) -> _Shown | None:
    if all(shown is None for _, shown in fields):
        return None

    def project(value: str) -> str:
        packed = ", ".join(
            f"{_quoted(name)} := " + (field if shown is None else shown.project(field))
            for name, shown in fields
            for field in (f"{value}.{_quoted(name)}",)
        )
        return f"CASE WHEN {value} IS NULL THEN NULL ELSE struct_pack({packed}) END"

    def convert(value: object) -> object:
        if value is None:
            return None
        if not isinstance(value, dict):
            raise UnshownValues(f"dpproxy cannot read the struct {value!r}")
        return {
            name: item if shown is None else shown.convert(item)
            for (name, shown), item in zip(fields, value.values(), strict=True)
        }

    return _Shown(project, convert)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
