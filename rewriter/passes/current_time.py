"""Pass 0: the current date and time as constants (``CURRENT_DATE``, ``now()`` …).

``WHERE visit_date >= CURRENT_DATE - 30`` reads the clock. The proxy gives the planner the
time the statement arrived (``PlanRequest.now``), and this pass writes it into the query
before any other pass reads it, with the constant arithmetic around it computed as
PostgreSQL computes it, in the session's TimeZone:

- ``CURRENT_DATE``: the date; ``LOCALTIMESTAMP``: the local time; ``now()``,
  ``CURRENT_TIMESTAMP``, ``transaction_timestamp()``, ``statement_timestamp()``: the instant;
- ``± n`` days to a date, ``± INTERVAL '…'`` (years, months, weeks, days, hours, minutes,
  seconds: months first, the last day of a shorter month kept, then days, then the time),
  casts to ``date``, ``timestamp`` and ``timestamp with time zone``, and
  ``date_trunc(unit, …)``;
- a date becomes ``CAST('2026-11-23' AS DATE)``, a timestamp ``CAST('2026-11-23
  10:00:00' AS TIMESTAMP)``: literals, which the other passes check as any other.

An instant (``now()``, ``date_trunc('month', CURRENT_DATE)``, a timestamp with time zone on
PostgreSQL) must end in a cast to date or timestamp: compared with a date column it would be
compared as an instant, which the passes after this one do not do for literals. Anything
else that reads the clock is refused, saying what to write. The answer then depends on the
time, which is part of the plan (``Plan.now``): the plan and answer caches key it by its
literals, so the same query on another day is another query, charged again.

PostgreSQL's ``now()`` is the time its transaction began; here it is the time the statement
arrived (the same within one statement).
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
import zoneinfo
from dataclasses import dataclass
from typing import TypeVar

from sqlglot import exp

from rewriter.datetime_input import instant_text, read_moment, within_years
from rewriter.errors import Rejected
from rewriter.passes.time_constants import FOLDED, INSTANT_ZONE, WRITTEN
from rewriter.written_text import marked
from rewriter.zones import ZONE_HINT, sql_zone

_INSTANT_FUNCTIONS = frozenset({"transaction_timestamp", "statement_timestamp"})
#: The words of an interval literal, and the unit each names.
_UNITS = {
    "year": "year",
    "month": "month",
    "mon": "month",
    "week": "week",
    "day": "day",
    "hour": "hour",
    "minute": "minute",
    "min": "minute",
    "second": "second",
    "sec": "second",
}
#: Each unit in (months, days, microseconds).
_SCALES = {
    "year": (12, 0, 0),
    "month": (1, 0, 0),
    "week": (0, 7, 0),
    "day": (0, 1, 0),
    "hour": (0, 0, 3_600_000_000),
    "minute": (0, 0, 60_000_000),
    "second": (0, 0, 1_000_000),
}
_PART = re.compile(r"\s*([+-]?\d{1,6})\s*([a-z]+)\s*", re.IGNORECASE)
_TRUNCATED = ("year", "quarter", "month", "week", "day", "hour", "minute", "second")
_FIRST = dt.date(1, 1, 1)
_LAST = dt.date(9999, 12, 31)


@dataclass(frozen=True)
class _Interval:
    months: int
    days: int
    micros: int

    def negated(self) -> _Interval:
        return _Interval(-self.months, -self.days, -self.micros)


@dataclass(frozen=True)
class _Instant:
    """A timestamp with time zone: an aware datetime."""

    value: dt.datetime


_Value = dt.date | dt.datetime | _Instant | _Interval | int
_Day = TypeVar("_Day", bound=dt.date)


class _NotFolded(Exception):
    """A part of the expression this pass does not compute."""


def current_time(tree: exp.Expr, now: dt.datetime | None, zone: str) -> bool:
    """Replace, in place, each expression of ``tree`` that reads the clock by its value at
    ``now`` (aware) in ``zone``; True if one was found. Rejected if one cannot be computed
    here, or without ``now``."""
    clocks = [node for node in tree.walk() if _reads_clock(node)]
    if not clocks:
        return False
    if now is None or now.tzinfo is None:
        raise Rejected(
            "this query reads the current date or time, which this request does not give",
            sqlstate="0A000",
            hint="write the date as a literal, e.g. DATE '2024-03-01'",
        )
    clock = _Clock(now, _zone(zone))
    for node in clocks:
        if node.root() is tree:  # not inside one replaced already
            _fold_around(node, clock)
    return True


@dataclass(frozen=True)
class _Clock:
    now: dt.datetime
    zone: zoneinfo.ZoneInfo

    def local(self, instant: dt.datetime) -> dt.datetime:
        return instant.astimezone(self.zone).replace(tzinfo=None)

    def instant(self, local: dt.datetime) -> dt.datetime:
        """A local time as an instant: a time skipped when the clocks go forward takes the
        offset before the change, one that occurs twice the later (PostgreSQL's reading)."""
        earlier = local.replace(tzinfo=self.zone, fold=0)
        later = local.replace(tzinfo=self.zone, fold=1)
        if earlier.utcoffset() == later.utcoffset():
            return earlier.astimezone(dt.UTC)
        skipped = earlier.astimezone(dt.UTC).astimezone(self.zone).replace(tzinfo=None) != local
        return (earlier if skipped else later).astimezone(dt.UTC)


def _zone(name: str) -> zoneinfo.ZoneInfo:
    try:
        return zoneinfo.ZoneInfo(sql_zone(name))
    except (Rejected, zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise Rejected(
            f'the session\'s TimeZone is "{name}": dpproxy computes CURRENT_DATE and now() '
            "only in time zones named as the IANA database names them (Area/Location, or "
            "UTC)",
            sqlstate="22023",
            hint=ZONE_HINT,
        ) from None


def _reads_clock(node: exp.Expr) -> bool:
    if isinstance(node, exp.CurrentDate | exp.CurrentTimestamp | exp.Localtimestamp):
        return True
    if isinstance(node, exp.CurrentTime | exp.Localtime):
        return True
    return isinstance(node, exp.Anonymous) and str(node.this).lower() in _INSTANT_FUNCTIONS


def _largest_value(node: exp.Expr, clock: _Clock) -> tuple[exp.Expr, dt.date | _Instant] | None:
    """The largest expression around ``node`` (within its query) that this pass computes
    to a date, timestamp or instant, and its value; None if none."""
    best: tuple[exp.Expr, dt.date | _Instant] | None = None
    current: exp.Expr | None = node
    while current is not None and not isinstance(current, exp.Select | exp.Subquery):
        try:
            found = _value(current, clock)
        except _NotFolded:
            break
        if isinstance(found, dt.date | _Instant):  # dates, timestamps and instants
            best = (current, found)
        current = current.parent
    return best


def _fold_around(node: exp.Expr, clock: _Clock) -> None:
    """Replace the largest expression around ``node`` that this pass computes."""
    largest = _largest_value(node, clock)
    if largest is None:
        raise Rejected(
            f"{node.sql(dialect='postgres')} is supported as CURRENT_DATE, LOCALTIMESTAMP or "
            "now() with days or an INTERVAL added or subtracted, cast to date or timestamp, or "
            "in date_trunc",
            sqlstate="0A000",
            hint="e.g. visit_date >= CURRENT_DATE - 30, or CAST(now() AS date)",
        )
    best, value = largest
    if isinstance(value, _Instant):
        raise Rejected(
            f"{best.sql(dialect='postgres')} is a timestamp with time zone: dpproxy compares "
            "columns with the current date or local time only",
            sqlstate="0A000",
            hint="cast it: CAST(now() AS date), CAST(now() AS timestamp), or "
            "date_trunc('month', CURRENT_DATE)::date",
        )
    best.replace(marked(_literal(value), best))  # a refusal quotes best (written_text)


def _literal(value: dt.date) -> exp.Expr:
    if isinstance(value, dt.datetime):
        return exp.cast(exp.Literal.string(value.isoformat(sep=" ")), exp.DataType.Type.TIMESTAMP)
    return exp.cast(exp.Literal.string(value.isoformat()), exp.DataType.Type.DATE)


def _value(node: exp.Expr, clock: _Clock) -> _Value:
    if isinstance(node, exp.CurrentDate | exp.Localtimestamp | exp.CurrentTimestamp):
        if any(v not in (None, []) for v in node.args.values()):
            raise _NotFolded  # a precision or a zone: CURRENT_TIMESTAMP(0)
        if isinstance(node, exp.CurrentDate):
            return clock.local(clock.now).date()
        if isinstance(node, exp.Localtimestamp):
            return clock.local(clock.now)
        return _Instant(clock.now)
    if isinstance(node, exp.Anonymous) and str(node.this).lower() in _INSTANT_FUNCTIONS:
        if node.expressions:
            raise _NotFolded
        return _Instant(clock.now)
    if isinstance(node, exp.Paren):
        return _value(node.this, clock)
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
        return int(node.this)
    if isinstance(node, exp.Neg):
        inner = _value(node.this, clock)
        if isinstance(inner, int):
            return -inner
        raise _NotFolded
    if isinstance(node, exp.Interval):
        return _interval(node)
    moment = _moment_literal(node)
    if moment is not None:
        return moment
    if isinstance(node, exp.Cast) and not node.to.expressions:
        return _cast(_value(node.this, clock), node.to, clock)
    if isinstance(node, exp.Add | exp.Sub):
        left, right = _value(node.this, clock), _value(node.expression, clock)
        return (
            _added(left, right, clock)
            if isinstance(node, exp.Add)
            else _subtracted(left, right, clock)
        )
    if isinstance(node, exp.TimestampTrunc | exp.DateTrunc):
        if node.args.get("zone") is not None:
            raise _NotFolded  # date_trunc(unit, ts, zone): not computed here
        unit = node.args.get("unit")
        name = unit.name.lower() if isinstance(unit, exp.Var | exp.Literal) else ""
        return _truncated(_value(node.this, clock), name, clock)
    raise _NotFolded


def _moment_literal(node: exp.Expr) -> dt.date | None:
    """``DATE '2024-01-31'`` or ``TIMESTAMP '2024-01-31 08:00'`` (a cast of a quoted text),
    as PostgreSQL's input reads it (``datetime_input``: a date reads the date's fields, a
    timestamp ignores an offset), within the years 1 to 9999; None for anything else."""
    if not (
        isinstance(node, exp.Cast)
        and not node.to.expressions
        and node.to.this in (exp.DataType.Type.DATE, exp.DataType.Type.TIMESTAMP)
        and type(node.this) is exp.Literal
        and node.this.is_string
    ):
        return None
    moment = read_moment(node.this.name)
    if moment is None:
        return None
    if node.to.this == exp.DataType.Type.DATE:
        return moment.date
    return moment.local


def constant_dates(tree: exp.Expr) -> None:
    """Pass 0, after ``current_time``: date and timestamp literals with days or an interval
    added or subtracted (``DATE '2024-01-31' + INTERVAL '1 month'``, a BI tool's filter),
    computed here as ``current_time`` computes CURRENT_DATE's, in place: a literal, which
    the passes after this one compare with a date or timestamp column as any other.
    Anything not computed here (a time zone, date_trunc of a date, years beyond 9999) is
    left as written."""
    roots = [n for n in tree.walk() if _moment_literal(n) is not None and _in_arithmetic(n)]
    clock = _Clock(dt.datetime.now(dt.UTC), zoneinfo.ZoneInfo("UTC"))  # no instant is made
    for node in roots:
        if node.root() is not tree:
            continue  # inside one replaced already
        best: exp.Expr | None = None
        value: dt.date | None = None
        current: exp.Expr | None = node.parent
        while current is not None and not isinstance(current, exp.Select | exp.Subquery):
            try:
                found = _value(current, clock)
            except _NotFolded:
                break
            if not isinstance(found, dt.date):  # an instant, or days: not written here
                break
            best, value = current, found
            current = current.parent
        if best is not None and value is not None:
            best.replace(marked(_literal(value), best))


def constant_truncations(tree: exp.Expr, zone: str) -> None:
    """Pass 0, after ``constant_dates``: ``date_trunc(unit, DATE '…')`` and ``date_trunc(unit,
    TIMESTAMP '…')`` (Tableau's and Looker's filters), with the casts and interval arithmetic
    around them, computed here as ``current_time`` computes ``date_trunc('month',
    CURRENT_DATE)``, in place. PostgreSQL truncates a date as a timestamp with time zone
    (local midnight in the session's ``zone``): an instant, written as
    ``rewriter.passes.time_constants`` writes one, where it is compared (``visit_date >=
    date_trunc('year', DATE '2023-01-01')``), or the date or timestamp a cast makes of it.
    A constant cannot fail on a row: as a function of the data the engines could fail on
    extreme values (``value_types.moments``), of a constant it is the same value for every
    row. Anything else is left as written (and checked as before)."""
    roots = [
        n
        for n in tree.walk()
        if isinstance(n, exp.TimestampTrunc | exp.DateTrunc)
        and _moment_literal(n.this.unnest()) is not None
    ]
    if not roots:
        return
    try:
        clock = _Clock(dt.datetime.now(dt.UTC), _zone(zone))
    except Rejected:
        return  # a zone computed nowhere here: left as written
    for node in roots:
        if node.root() is not tree:
            continue  # inside one replaced already
        largest = _largest_value(node, clock)
        if largest is None:
            continue
        best, value = largest
        if not isinstance(value, _Instant):
            best.replace(marked(_literal(value), best))
        elif _compared(best) and within_years(value.value.astimezone(dt.UTC)):
            made = exp.cast(
                exp.Literal.string(instant_text(value.value)), exp.DataType.Type.TIMESTAMPTZ
            )
            made.meta[FOLDED] = "instant"
            made.meta[INSTANT_ZONE] = zone
            made.meta[WRITTEN] = best.sql(dialect="postgres")
            best.replace(made)


def _compared(node: exp.Expr) -> bool:
    """Whether ``node`` is an operand of a comparison (=, <>, <, <=, >, >=, BETWEEN, IN of
    a list): where ``rewriter.passes.time_constants`` keeps an instant."""
    child, parent = node, node.parent
    while isinstance(parent, exp.Paren):
        child, parent = parent, parent.parent
    compared = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between, exp.In)
    if not isinstance(parent, compared) or parent.args.get("query") is not None:
        return False
    return child.arg_key in ("this", "expression", "low", "high", "expressions")


def _in_arithmetic(node: exp.Expr) -> bool:
    parent = node.parent
    while isinstance(parent, exp.Paren):
        parent = parent.parent
    return isinstance(parent, exp.Add | exp.Sub)


def _interval(node: exp.Interval) -> _Interval:
    """An interval literal of whole years, months, weeks, days, hours, minutes and seconds,
    each unit once (``'1 year 2 months'``, ``'-30 day'``, ``INTERVAL '3' DAY``); anything
    else (``YEAR TO MONTH``, fractions, ``'1:00'``, ISO 8601) is left to the engine."""
    text = node.this.name if isinstance(node.this, exp.Literal) else ""
    unit = node.args.get("unit")
    if unit is not None:
        # sqlglot reads INTERVAL '30 days' as INTERVAL '30' DAYS: one word, read as in the
        # text. A span (YEAR TO MONTH) reads the number in its last field: not computed here.
        if not isinstance(unit, exp.Var):
            raise _NotFolded
        text = f"{text} {unit.name}"
    months = days = micros = 0
    position = 0
    seen: set[str] = set()
    for part in _PART.finditer(text):
        if part.start() != position:
            raise _NotFolded
        position = part.end()
        word = part.group(2).lower()
        word = word[:-1] if word.endswith("s") and word[:-1] in _UNITS else word
        if word not in _UNITS or _UNITS[word] in seen:
            raise _NotFolded  # PostgreSQL refuses a unit given twice ('1 day 1 day')
        seen.add(_UNITS[word])
        count = int(part.group(1))
        scale = _SCALES[_UNITS[word]]
        months, days, micros = (
            months + count * scale[0],
            days + count * scale[1],
            micros + count * scale[2],
        )
    if position != len(text) or position == 0:
        raise _NotFolded
    return _Interval(months, days, micros)


def _cast(value: _Value, to: exp.DataType, clock: _Clock) -> _Value:
    if to.is_type(exp.DataType.Type.DATE):
        if isinstance(value, _Instant):
            return clock.local(value.value).date()
        if isinstance(value, dt.datetime):
            return value.date()
        if isinstance(value, dt.date):
            return value
    elif to.is_type(exp.DataType.Type.TIMESTAMP):
        if isinstance(value, _Instant):
            return clock.local(value.value)
        if isinstance(value, dt.datetime):
            return value
        if isinstance(value, dt.date):
            return dt.datetime.combine(value, dt.time())
    elif to.is_type(exp.DataType.Type.TIMESTAMPTZ):
        if isinstance(value, _Instant):
            return value
        if isinstance(value, dt.datetime):
            return _Instant(clock.instant(value))
        if isinstance(value, dt.date):
            return _Instant(clock.instant(dt.datetime.combine(value, dt.time())))
    raise _NotFolded


def _added(left: _Value, right: _Value, clock: _Clock) -> _Value:
    if isinstance(left, int | _Interval) and not isinstance(right, int | _Interval):
        left, right = right, left
    if isinstance(right, int) and type(left) is dt.date:
        try:
            return _checked(left + dt.timedelta(days=right))
        except OverflowError:  # beyond the year 9999: left to the engine
            raise _NotFolded from None
    if isinstance(right, _Interval):
        if isinstance(left, _Instant):
            # PostgreSQL: the months on the local clock, back to an instant; then the days
            # so; then the time, as a duration.
            moved = left.value
            for part in (_Interval(right.months, 0, 0), _Interval(0, right.days, 0)):
                if part.months or part.days:
                    moved = clock.instant(_shifted(clock.local(moved), part, time=False))
            return _Instant(moved + dt.timedelta(microseconds=right.micros))
        if isinstance(left, dt.datetime):
            return _shifted(left, right, time=True)
        if isinstance(left, dt.date):
            return _shifted(dt.datetime.combine(left, dt.time()), right, time=True)
    raise _NotFolded


def _subtracted(left: _Value, right: _Value, clock: _Clock) -> _Value:
    if isinstance(right, int) and not isinstance(left, int | _Interval):
        return _added(left, -right, clock)
    if isinstance(right, _Interval) and not isinstance(left, int | _Interval):
        return _added(left, right.negated(), clock)
    raise _NotFolded


def _shifted(local: dt.datetime, interval: _Interval, *, time: bool) -> dt.datetime:
    """``local`` plus the interval's months (the day kept within the month), then its days,
    then (``time``) its microseconds: PostgreSQL's order."""
    month = local.year * 12 + local.month - 1 + interval.months
    year, month = divmod(month, 12)
    if not 1 <= year <= 9999:
        raise _NotFolded
    day = min(local.day, calendar.monthrange(year, month + 1)[1])
    moved = local.replace(year=year, month=month + 1, day=day)
    try:
        moved += dt.timedelta(days=interval.days)
        if time:
            moved += dt.timedelta(microseconds=interval.micros)
    except OverflowError:
        raise _NotFolded from None
    return _checked(moved)


def _truncated(value: _Value, unit: str, clock: _Clock) -> _Value:
    """date_trunc: of a date, as PostgreSQL reads it, an instant (local midnight); of a
    timestamp, a timestamp; of an instant, its local time truncated, as an instant."""
    if unit not in _TRUNCATED:
        raise _NotFolded
    if isinstance(value, _Instant):
        if unit in ("hour", "minute", "second"):
            # PostgreSQL keeps the instant's own offset below a day (in an hour that
            # repeats, the hour it is in).
            offset = value.value.astimezone(clock.zone).utcoffset() or dt.timedelta()
            local = (value.value + offset).replace(tzinfo=None)
            return _Instant((_truncate(local, unit) - offset).replace(tzinfo=dt.UTC))
        return _Instant(clock.instant(_truncate(clock.local(value.value), unit)))
    if isinstance(value, dt.datetime):
        return _truncate(value, unit)
    if isinstance(value, dt.date):
        midnight = dt.datetime.combine(value, dt.time())
        return _Instant(clock.instant(_truncate(midnight, unit)))
    raise _NotFolded


def _truncate(local: dt.datetime, unit: str) -> dt.datetime:
    if unit == "year":
        return local.replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)
    if unit == "quarter":
        first = (local.month - 1) // 3 * 3 + 1
        return local.replace(month=first, day=1, hour=0, minute=0, second=0, microsecond=0)
    if unit == "month":
        return local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    if unit == "week":  # ISO weeks begin on Monday
        day = local.replace(hour=0, minute=0, second=0, microsecond=0)
        return _checked(day - dt.timedelta(days=local.weekday()))
    if unit == "day":
        return local.replace(hour=0, minute=0, second=0, microsecond=0)
    if unit == "hour":
        return local.replace(minute=0, second=0, microsecond=0)
    if unit == "minute":
        return local.replace(second=0, microsecond=0)
    return local.replace(microsecond=0)


def _checked(value: _Day) -> _Day:
    day = value.date() if isinstance(value, dt.datetime) else value
    if not _FIRST <= day <= _LAST:
        raise _NotFolded
    return value


def interval_constant(node: exp.Expr) -> tuple[int, int, int] | None:
    """An interval literal as (months, days, microseconds), as this pass reads it
    (``_interval``), else None."""
    if not isinstance(node, exp.Interval):
        return None
    try:
        found = _interval(node)
    except _NotFolded:
        return None
    return found.months, found.days, found.micros
