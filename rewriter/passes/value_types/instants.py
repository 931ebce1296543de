"""A date or timestamp compared with a constant timestamp with time zone, as PostgreSQL
compares them: as instants, the date or timestamp read in the session's TimeZone.

``visit_date >= to_timestamp('2023-01-01 10:00', 'YYYY-MM-DD HH24:MI')`` (Superset's time
filter on a date column) compares each date's midnight, read as an instant in the session's
zone, with the instant; ``ts < TIMESTAMPTZ '2023-02-01 00:00:00Z'`` of a timestamp ``ts``
each local time so read. PostgreSQL reads a local time the clocks skip with the offset
before the change, one they repeat with the later (``datetime_input.zone_offset``), and
never fails (a value beyond the range compares as beyond any instant). The values that
compare true form ranges of dates or local times, computed here in the session's zone
from the zone's changes around the instant (``rewriter.passes.time_constants`` wrote the
instant):

- where they are one range that the comparison's own operator names (nearly always: a
  date's midnights come in order; local times do except around a change), the instant
  is replaced, in place, by the date or local time that starts or ends it
  (``visit_date >= DATE '2023-01-02'``; ``>`` and ``<=`` by the one before, keeping the
  operator; ``=`` and ``<>`` by the date or local time read as the instant);
- otherwise (``=`` of a date and an instant that is no midnight, never true; a local time
  within the hour after the clocks skip, whose range of local times read at or after it
  starts within the skipped hour and again at it; the earlier of a repeated hour, which
  no local time is read as) the comparison is written as the condition on the ranges,
  kept under the comparison's operator with a boolean on each side (``(ts >= t1 OR (ts >=
  t2 AND ts < t3)) >= TRUE``, ``(d <> d) = TRUE``): true, false and NULL as PostgreSQL's.

``BETWEEN`` takes its bounds as ``>=`` and ``<=`` do, ``IN`` its elements as ``=``. An
instant compared with anything else (a text, a number, a date and a timestamp at once) is
refused.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo

from sqlglot import exp

from rewriter.datetime_input import date_text, local_instant, timestamp_text, within_years
from rewriter.errors import Rejected
from rewriter.passes.time_constants import INSTANT_ZONE
from rewriter.passes.value_types.dated import MIRRORED
from rewriter.passes.value_types.kinds import DATE, NULL, TIME, ZONED

_MICRO = dt.timedelta(microseconds=1)
_WINDOW = dt.timedelta(days=3)
_STEP = dt.timedelta(minutes=30)
#: The operator seen from the other side (``I < d`` is ``d > I``: ``dated``'s), and for
#: IS [NOT] DISTINCT FROM the values equal to the instant, under the node's operator (NULL
#: is distinct from it, as from the date or time that replaces it).
_MIRRORED: dict[type[exp.Expr], type[exp.Expr]] = {
    **MIRRORED,
    exp.NullSafeEQ: exp.EQ,
    exp.NullSafeNEQ: exp.EQ,
}
_HINT = (
    "compare with >= and < (visit_date >= to_timestamp('2024-01-31', 'YYYY-MM-DD')), or with "
    "a date or local time written as text: visit_date >= '2024-01-31'"
)


def compare_instants(node: exp.Expr, operands: list[exp.Expr], each: list[str], where: str) -> None:
    """Replace, in place, each instant of the comparison ``node`` of a date or timestamp
    with the date or local time that compares alike, or the comparison's operands with a
    condition of the same truth (see the module); Rejected where it is no such
    comparison."""
    written = f"{node.sql(dialect='postgres')} in {where}"
    others = {k for k in each if k not in (ZONED, NULL)}
    if not others:
        return  # constants alone: the engines compare instants alike
    if len(others) > 1 or not others <= {DATE, TIME}:
        raise Rejected(
            f"{written} compares a timestamp with time zone constant with a "
            f"{' and a '.join(sorted(others))}: dpproxy compares one with a date, a timestamp "
            "or a timestamp with time zone",
            hint=_HINT,
        )
    (kind,) = others
    instants = [i for i, k in enumerate(each) if k == ZONED]
    if isinstance(node, (exp.Between, exp.In)) and 0 not in instants:
        if isinstance(node, exp.Between) and node.args.get("symmetric"):
            raise Rejected(f"{written}: BETWEEN SYMMETRIC is not supported here", hint=_HINT)
        _compare_list(node, operands, each, kind)
        return
    if type(node) in _MIRRORED and len(each) == 2:
        (index,) = instants
        mirrored = _MIRRORED[type(node)]  # the instant on the left: ``I < d`` is ``d > I``
        operator = _MIRRORED[mirrored] if index == 1 else mirrored
        value = operands[1 - index]
        ranges = _ranges(_instant(operands[index]), operator, kind)
        bound = _bound(ranges, operator, kind)
        if bound is not None:
            operands[index].replace(_literal(bound, kind))
            return
        truth = _condition(value, ranges, kind)
        left, right = _spelled(type(node), truth)
        operands[0].replace(left)
        operands[1].replace(right)
        return
    raise Rejected(
        f"{written}: dpproxy compares a timestamp with time zone constant with a date or "
        "timestamp by =, <>, <, <=, >, >=, BETWEEN or IN (a value IN instants)",
        hint=_HINT,
    )


def _compare_list(node: exp.Expr, operands: list[exp.Expr], each: list[str], kind: str) -> None:
    """``v BETWEEN low AND high`` (as ``v >= low AND v <= high``) or ``v IN (…)`` (as ``v =
    e`` for some ``e``) whose bounds or elements include instants."""
    between = isinstance(node, exp.Between)
    value = operands[0]
    parts: list[tuple[int, type[exp.Expr], Ranges | None]] = []
    for index in range(1, len(operands)):
        operator: type[exp.Expr] = (exp.GTE if index == 1 else exp.LTE) if between else exp.EQ
        found = _ranges(_instant(operands[index]), operator, kind) if each[index] == ZONED else None
        parts.append((index, operator, found))
    bounds = [_bound(r, o, kind) if r is not None else None for _, o, r in parts]
    if all(b is not None for (_, _, r), b in zip(parts, bounds, strict=True) if r is not None):
        for (index, _, found), bound in zip(parts, bounds, strict=True):
            if found is not None and bound is not None:
                operands[index].replace(_literal(bound, kind))
        return
    conditions: list[exp.Expr] = []
    for index, operator, found in parts:
        if found is not None:
            conditions.append(_condition(value, found, kind))
        else:  # a bound or element of the value's own type: compared as written
            compared = operator(this=value.copy(), expression=operands[index].copy())
            conditions.append(compared)
    truth = exp.and_(*conditions) if between else exp.or_(*conditions)
    # ``truth BETWEEN TRUE AND TRUE`` and ``truth IN (TRUE, …)`` are ``truth``.
    operands[0].replace(exp.Paren(this=truth))
    for operand in operands[1:]:
        operand.replace(exp.Boolean(this=True))


Point = dt.date  # a date, or a local time (a datetime)
#: Disjoint ranges [low, high) in order (None: unbounded).
Ranges = list[tuple[Point | None, Point | None]]


def _instant(operand: exp.Expr) -> tuple[dt.datetime, zoneinfo.ZoneInfo]:
    """An instant written by rewriter.passes.time_constants (naive, in UTC), and the
    session's zone it was read in."""
    node = operand.unnest()
    name = node.meta.get(INSTANT_ZONE) if node._meta is not None else None
    if name is None:  # an instant rewriter.zones wrote for a timestamptz column
        raise Rejected(
            f"{node.sql(dialect='postgres')}: dpproxy compares this timestamp with time zone "
            "with a timestamp with time zone column only",
            hint=_HINT,
        )
    zone = zoneinfo.ZoneInfo(str(name))
    return dt.datetime.fromisoformat(str(node.this.this).removesuffix("+00")), zone


def _ranges(
    found: tuple[dt.datetime, zoneinfo.ZoneInfo], operator: type[exp.Expr], kind: str
) -> Ranges:
    """The dates (``kind`` DATE) or local times ``v`` for which ``v operator instant``."""
    instant, zone = found
    try:
        if kind == DATE:
            at_or_after, after = _dates_from(instant, zone)
        else:
            at_or_after = _times_from(instant, zone, strict=False)
            after = _times_from(instant, zone, strict=True)
    except OverflowError:
        raise Rejected(
            f"dpproxy does not compare a date or timestamp with the instant {instant}: it "
            "is within days of the ends of the calendar",
            hint=_HINT,
        ) from None
    if operator is exp.GTE:
        return at_or_after
    if operator is exp.GT:
        return after
    if operator is exp.LT:
        return _complement(at_or_after)
    if operator is exp.LTE:
        return _complement(after)
    equal = _intersection(at_or_after, _complement(after))
    return equal if operator is exp.EQ else _complement(equal)


def _bound(ranges: Ranges, operator: type[exp.Expr], kind: str) -> Point | None:
    """The date or local time t such that ``v operator t`` is ``v`` within ``ranges``, if
    there is one."""
    step = _step(kind)
    try:
        if operator in (exp.GTE, exp.GT) and len(ranges) == 1 and ranges[0][1] is None:
            low = ranges[0][0]
            if low is not None:
                return low if operator is exp.GTE else low - step
        if operator in (exp.LT, exp.LTE) and len(ranges) == 1 and ranges[0][0] is None:
            high = ranges[0][1]
            if high is not None:
                return high if operator is exp.LT else high - step
        if operator is exp.EQ and len(ranges) == 1:
            low, high = ranges[0]
            if low is not None and high is not None and high == low + step:
                return low
        if operator is exp.NEQ and len(ranges) == 2:
            (first, high), (low, last) = ranges
            if first is None and last is None and high is not None and low == high + step:
                return high
    except OverflowError:
        return None
    return None


def _condition(value: exp.Expr, ranges: Ranges, kind: str) -> exp.Expr:
    """``value`` (a copy for each use) within ``ranges``: true, false, or NULL for NULL."""
    if not ranges:
        return exp.Paren(this=exp.NEQ(this=value.copy(), expression=value.copy()))
    pieces: list[exp.Expr] = []
    step = _step(kind)
    for low, high in ranges:
        if low is not None and high is not None and high == low + step:
            pieces.append(exp.EQ(this=value.copy(), expression=_literal(low, kind)))
            continue
        sides: list[exp.Expr] = []
        if low is not None:
            sides.append(exp.GTE(this=value.copy(), expression=_literal(low, kind)))
        if high is not None:
            sides.append(exp.LT(this=value.copy(), expression=_literal(high, kind)))
        if not sides:
            sides.append(exp.EQ(this=value.copy(), expression=value.copy()))
        pieces.append(exp.and_(*sides) if len(sides) > 1 else sides[0])
    return exp.Paren(this=exp.or_(*pieces) if len(pieces) > 1 else pieces[0])


def _spelled(operator: type[exp.Expr], truth: exp.Expr) -> tuple[exp.Expr, exp.Expr]:
    """Two operands whose comparison by ``operator`` is ``truth`` (NULL for NULL)."""
    negated = exp.Paren(this=exp.Not(this=truth))
    true, false = exp.Boolean(this=True), exp.Boolean(this=False)
    if operator in (exp.EQ, exp.GTE, exp.NullSafeEQ, exp.NullSafeNEQ):
        return truth, true  # x = TRUE, x >= TRUE, x IS [NOT] DISTINCT FROM TRUE
    if operator is exp.GT:
        return truth, false
    if operator in (exp.NEQ, exp.LT):
        return negated, true
    return negated, false  # <=


def _step(kind: str) -> dt.timedelta:
    return dt.timedelta(days=1) if kind == DATE else _MICRO


def _complement(ranges: Ranges) -> Ranges:
    made: Ranges = []
    previous: Point | None = None
    unbounded = True  # the next range of the complement starts unbounded below
    for low, high in ranges:
        if low is not None:
            made.append((None if unbounded else previous, low))
        unbounded = False
        previous = high
        if high is None:
            return made
    made.append((None if unbounded else previous, None))
    return made


def _intersection(first: Ranges, second: Ranges) -> Ranges:
    made: Ranges = []
    for low_a, high_a in first:
        for low_b, high_b in second:
            low = _later(low_a, low_b)
            high = _earlier(high_a, high_b)
            if low is None or high is None or low < high:
                made.append((low, high))
    return sorted(made, key=_start)


def _start(piece: tuple[Point | None, Point | None]) -> tuple[int, int]:
    """Orders ranges by their start (unbounded first); the ranges of one list are of one
    kind, dates or local times."""
    low = piece[0]
    if low is None:
        return (0, 0)
    if isinstance(low, dt.datetime):
        return (1, (low - dt.datetime.min) // _MICRO)
    return (1, low.toordinal())


def _later(a: Point | None, b: Point | None) -> Point | None:
    if a is None:
        return b
    return a if b is None or a >= b else b


def _earlier(a: Point | None, b: Point | None) -> Point | None:
    if a is None:
        return b
    return a if b is None or a <= b else b


def _dates_from(instant: dt.datetime, zone: zoneinfo.ZoneInfo) -> tuple[Ranges, Ranges]:
    """The dates whose midnight is at or after, and after, ``instant`` in ``zone``: from
    the first such date (midnights come in order, each day being more than a change
    long)."""
    local = instant.replace(tzinfo=dt.UTC).astimezone(zone).replace(tzinfo=None).date()
    try:
        days = [local + dt.timedelta(days=k) for k in range(-2, 3)]
    except OverflowError:
        days = []
    midnights = [local_instant(dt.datetime.combine(day, dt.time()), 0, zone) for day in days]
    if (
        not days
        or any(m is None for m in midnights)
        or any(
            a is not None and b is not None and a >= b
            for a, b in zip(midnights, midnights[1:], strict=False)
        )
    ):
        raise Rejected(
            f"dpproxy does not compare a date with the instant {instant} in {zone.key}: "
            "the midnights around it are not in order, or beyond the calendar",
            hint=_HINT,
        )
    at_or_after = next(d for d, m in zip(days, midnights, strict=True) if m and m >= instant)
    after = next(d for d, m in zip(days, midnights, strict=True) if m and m > instant)
    return [(at_or_after, None)], [(after, None)]


def _times_from(instant: dt.datetime, zone: zoneinfo.ZoneInfo, *, strict: bool) -> Ranges:
    """The local times read as an instant at or after (``strict``: after) ``instant``."""
    pieces: list[tuple[dt.datetime, dt.datetime | None]] = []
    for start, end, offset in _segments(instant, zone):
        low = instant + offset + (_MICRO if strict else dt.timedelta(0))
        if start is not None and start > low:
            low = start
        if end is None or low < end:
            pieces.append((low, end))
    pieces.sort(key=lambda piece: piece[0])
    merged: list[tuple[dt.datetime, dt.datetime | None]] = []
    for low, high in pieces:
        reach = merged[-1][1] if merged else low
        if merged and (reach is None or low <= reach):
            joined = None if reach is None or high is None else max(reach, high)
            merged[-1] = (merged[-1][0], joined)
        else:
            merged.append((low, high))
    return list(merged)


def _segments(
    instant: dt.datetime, zone: zoneinfo.ZoneInfo
) -> list[tuple[dt.datetime | None, dt.datetime | None, dt.timedelta]]:
    """The local times around ``instant`` as PostgreSQL reads them in ``zone``: ranges
    [start, end) (None: unbounded) each read at one offset, from the zone's changes within
    three days of it. Where the clocks go back, the repeated times belong to the later
    range (the later instant); where they skip, the skipped times to the earlier (the
    offset before the change)."""
    changes = _changes(instant, zone)
    if not changes:
        return [(None, None, _offset(instant, zone))]
    starts = [change + _offset(change, zone) for change in changes]
    if any(a >= b for a, b in zip(starts, starts[1:], strict=False)):
        raise Rejected(
            f"the clocks of {zone.key} change too often around the instant compared for "
            "dpproxy to compare a timestamp with it",
            hint=_HINT,
        )
    offsets = [_offset(changes[0] - _MICRO, zone)] + [_offset(c, zone) for c in changes]
    bounds: list[dt.datetime | None] = [None, *starts, None]
    return [(bounds[i], bounds[i + 1], offsets[i]) for i in range(len(offsets))]


def _changes(instant: dt.datetime, zone: zoneinfo.ZoneInfo) -> list[dt.datetime]:
    """The instants (naive, in UTC) within three days of ``instant`` at which ``zone``'s
    offset changes (found every half hour, then to the microsecond)."""
    found = []
    at = instant - _WINDOW
    previous = _offset(at, zone)
    while at < instant + _WINDOW:
        following = at + _STEP
        offset = _offset(following, zone)
        if offset != previous:
            low, high = at, following  # offset(low) == previous, offset(high) != previous
            while high - low > _MICRO:
                middle = low + (high - low) // 2
                if _offset(middle, zone) == previous:
                    low = middle
                else:
                    high = middle
            found.append(high)
            previous = offset
        at = following
    return found


def _offset(instant: dt.datetime, zone: zoneinfo.ZoneInfo) -> dt.timedelta:
    offset = instant.replace(tzinfo=dt.UTC).astimezone(zone).utcoffset()
    if offset is None:
        raise ValueError(f"{zone.key} gives no offset")
    return offset


def _literal(value: Point, kind: str) -> exp.Expr:
    if kind == DATE:
        return exp.cast(exp.Literal.string(date_text(value)), exp.DataType.Type.DATE)
    if not isinstance(value, dt.datetime) or not within_years(value):
        raise Rejected(f"{value} is outside the years 1 to 9999, which dpproxy compares")
    return exp.cast(exp.Literal.string(timestamp_text(value)), exp.DataType.Type.TIMESTAMP)
