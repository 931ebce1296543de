"""Columns of type timestamp with time zone, read in the session's TimeZone.

A ``timestamptz`` column holds instants. PostgreSQL computes their dates, hours,
date_trunc and casts to date or timestamp in the session's TimeZone, and reads a literal
compared with one (``ts >= '2024-03-31'``) as a local time of that zone; the engines
dpproxy runs on would compute them in the zone of their own connection. So the rewriter
writes the zone into the SQL (the catalog's columns are read in it: ``Catalog.in_zone``):

- a reference to such a column is its local time, ``ts AT TIME ZONE 'Europe/Paris'`` (a
  timestamp on both engines), from then on a timestamp as any other
  (``rewriter.passes.local_times`` writes it once the query is built: :data:`ZONE`,
  :data:`LOCAL` mark the references);
- compared with a literal or another such column, it stays an instant, and the literal
  becomes one as PostgreSQL reads it, in the engine:
  ``CAST('2024-03-31 00:00:00' AS TIMESTAMP) AT TIME ZONE 'Europe/Paris'`` (a local time
  that does not exist takes the offset before the change, one that occurs twice the
  later, on both engines), or the instant of a literal with an offset;
- declared bounds are instants (UTC), and the column is clamped as one before its local
  time is taken.

Only zones both engines read alike are written into SQL: IANA names (Area/Location, and
UTC). Other TimeZone values are refused with a hint: POSIX rules (PostgreSQL counts
'UTC+3' west of Greenwich, DuckDB east), numbers of hours (<+02>-02, unknown to DuckDB),
and names without a slash, which PostgreSQL's AT TIME ZONE reads as abbreviations ('CET'
as +01 all year).
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import zoneinfo

from sqlglot import exp

from rewriter.datetime_input import read_moment
from rewriter.errors import Rejected

#: ``exp.Column.meta`` of a resolved reference to a timestamptz column: the zone it is read
#: in (``rewriter.scope.Scope.resolve``).
ZONE = "dpproxy_zone"
#: ``exp.Column.meta``: True while the reference stands for the local time (the default);
#: False where it is compared as an instant (``value_types.zoned``).
LOCAL = "dpproxy_local"

_IANA_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_+\-]*(?:/[A-Za-z0-9_+\-]+)+", re.ASCII)
#: Zones of one fixed offset, whose local times each name one instant (no time repeats
#: when clocks go back, none is skipped).
_FIXED = re.compile(
    r"UTC|Etc/(?:UTC|UCT|GMT0?|Universal|Zulu|Greenwich|GMT[+-](?:[0-9]|1[0-4]))", re.ASCII
)
#: The local times within the years 1 to 9999 (UTC) convert on both engines; beyond them
#: (up to the engines' ends, or ±infinity) the value is read in UTC, which cannot overflow.
_FIRST_INSTANT = "0001-01-02 00:00:00+00"
_LAST_INSTANT = "9999-12-30 00:00:00+00"

ZONE_HINT = (
    "SET TimeZone to an IANA name such as 'Europe/Paris' or 'America/New_York' (or 'UTC'); "
    "for a fixed offset use 'Etc/GMT-3' (3 hours east of UTC: these names count the sign "
    "backwards, as POSIX does)"
)


@functools.cache
def _iana_names() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones())


@functools.lru_cache(maxsize=64)
def sql_zone(name: str) -> str:
    """``name`` (the session's TimeZone, as proxy.time_zones writes it) if both engines
    read it alike, else Rejected."""
    if name == "UTC" or (_IANA_NAME.fullmatch(name) and name in _iana_names()):
        return name
    raise Rejected(
        f'the session\'s TimeZone is "{name}": dpproxy computes the dates and times of a '
        "timestamp with time zone column only in time zones named as the IANA database "
        "names them (Area/Location, or UTC), which DuckDB and PostgreSQL read alike; "
        "POSIX rules such as 'UTC+3' and numbers of hours are read differently (PostgreSQL "
        "counts 'UTC+3' west of Greenwich) and names such as 'CET' as abbreviations",
        sqlstate="22023",
        hint=ZONE_HINT,
    )


def fixed_offset(zone: str) -> bool:
    """Whether ``zone`` (checked by :func:`sql_zone`) has one offset, ever."""
    return bool(_FIXED.fullmatch(zone))


def zone_literal(zone: str) -> exp.Expr:
    return exp.Literal.string(sql_zone(zone))


def at_zone(value: exp.Expr, zone: str) -> exp.Expr:
    """``(value AT TIME ZONE 'zone')``: a timestamptz's local time, or the instant of a
    timestamp's local time, on both engines."""
    return exp.Paren(this=exp.AtTimeZone(this=value, zone=zone_literal(zone)))


def local_time(instant: exp.Expr, zone: str) -> exp.Expr:
    """The local time in ``zone`` of the timestamptz ``instant`` (an expression without
    side effects, written up to three times): a TIMESTAMP. Within the years 1 to 9999
    (UTC) in the zone; beyond them, where converting could overflow the engines' range,
    in UTC (±infinity stay ±infinity)."""
    if zone == "UTC":
        return at_zone(instant, zone)
    within = exp.Between(
        this=instant.copy(), low=_instant(_FIRST_INSTANT), high=_instant(_LAST_INSTANT)
    )
    return exp.Case(
        ifs=[exp.If(this=within, true=at_zone(instant.copy(), zone))],
        default=at_zone(instant, "UTC"),
    )


def resolved_local(local: exp.Expr, zone: str) -> exp.Expr:
    """The local time ``local`` (a TIMESTAMP within the years 1 to 9999) as PostgreSQL
    shows the instant it reads it as: a time the clocks skip (date_trunc('day', …) where
    DST starts at midnight, America/Santiago) becomes the time after the change
    (01:00), as on both engines ``timestamp AT TIME ZONE`` resolves it."""
    if fixed_offset(zone):
        return local
    return at_zone(at_zone(local, zone), zone)


def is_zoned(column: exp.Expr) -> bool:
    return isinstance(column, exp.Column) and column._meta is not None and ZONE in column.meta


def is_local(column: exp.Expr) -> bool:
    """A reference to a timestamptz column that stands for its local time."""
    return is_zoned(column) and bool(column.meta.get(LOCAL))


def as_instant(column: exp.Column) -> exp.Column:
    """``column`` (a reference to a timestamptz column), marked to stay an instant."""
    column.meta[LOCAL] = False
    return column


def instant_copy(column: exp.Column) -> exp.Column:
    return as_instant(column.copy())


def is_instant_literal(node: exp.Expr) -> bool:
    """An instant this module wrote for a literal (``instant_of_text``): a check of an
    expression already checked meets it again."""
    node = node.unnest()
    if isinstance(node, exp.Cast):
        literal = isinstance(node.this, exp.Literal) and node.this.is_string
        return literal and node.to.is_type(exp.DataType.Type.TIMESTAMPTZ)
    if not isinstance(node, exp.AtTimeZone):
        return False
    local = node.this
    return (
        isinstance(local, exp.Cast)
        and local.to.is_type(exp.DataType.Type.TIMESTAMP)
        and isinstance(local.this, exp.Literal)
        and local.this.is_string
        and isinstance(node.args.get("zone"), exp.Literal)
    )


def _instant(text: str) -> exp.Expr:
    return exp.cast(exp.Literal.string(text), exp.DataType.Type.TIMESTAMPTZ)


def instant_bound(value: dt.date, *, upper: bool) -> exp.Expr:
    """A declared bound of a timestamptz column as an instant: a date-time is UTC; a date
    covers the whole day in UTC (from 00:00:00, until 23:59:59.999999)."""
    if not isinstance(value, dt.datetime):
        value = dt.datetime.combine(value, dt.time.max if upper else dt.time.min)
    return _instant(value.isoformat(sep=" ", timespec="microseconds") + "+00")


# ---------------------------------------------------------------------------------------
# Literals compared with an instant


def instant_of_text(text: str, zone: str) -> exp.Expr | None:
    """The instant PostgreSQL reads the text ``text`` as, in the session's ``zone``, as SQL
    both engines compute alike; None if it is not a date or date-time within the years 1
    to 9999 of the forms ``rewriter.datetime_input`` reads (2024-03-31, 2024-03-31
    08:00[:00[.000000]], with a T or a space, with or without an offset: Z, +02, +05:30,
    -0800). Rejected as PostgreSQL refuses a text of those forms (22008, 22009)."""
    moment = read_moment(text)
    if moment is None or moment.local is None:
        return None
    if moment.offset is None:
        local = exp.cast(
            exp.Literal.string(moment.local.isoformat(sep=" ", timespec="microseconds")),
            exp.DataType.Type.TIMESTAMP,
        )
        return at_zone(local, zone)
    try:
        utc = moment.local - moment.offset
    except OverflowError:
        return None
    if not 1 <= utc.year <= 9999:
        return None
    return _instant(utc.isoformat(sep=" ", timespec="microseconds") + "+00")
