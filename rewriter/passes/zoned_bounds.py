"""A timestamp with time zone with declared bounds: clamped as an instant.

Its bounds are instants in UTC (``rewriter.zones.instant_bound``: a date covers the whole
day in UTC), whatever the session's TimeZone. The cleaned value (``bound_per_unit.clean``)
is the column clamped to them as an instant, then read as its local time where the query
reads it so (``rewriter.zones.local_time``), or kept an instant where it is compared
(``value_types.zoned``). The local year of a value within the bounds lies within a day of
the bounds' (offsets are less than a day): EXTRACT(year) inside an aggregate is bounded
by :func:`local_years`, whatever the zone and its rules.
"""

from __future__ import annotations

import datetime as dt

from sqlglot import exp

from rewriter.catalog import ColumnInfo
from rewriter.sql_values import between_keeping_null
from rewriter.zones import ZONE, instant_bound, instant_copy, is_local, local_time

_DAY = dt.timedelta(days=1)
#: Instants whose local time every zone's offset keeps within the years 1 to 9999, the
#: range ``local_time`` converts (beyond it, it reads a value in UTC).
_SAFE = (dt.datetime(1, 1, 2), dt.datetime(9999, 12, 30))


def cleaned(column: exp.Column, info: ColumnInfo) -> exp.Expr:
    """The cleaned value of a reference to a timestamp with time zone: clamped to its
    bounds as an instant, as its local time or an instant as the reference stands for."""
    instant: exp.Expr = instant_copy(column)
    found = info.date_bounds
    if found is not None:
        low, high = (_moment(b) for b in found)
        instant = between_keeping_null(
            instant, instant_bound(low, upper=False), instant_bound(high, upper=True)
        )
    if not is_local(column):
        return instant
    zone = str(column.meta[ZONE])
    if found is not None and _SAFE[0] <= low and high <= _SAFE[1]:
        return exp.Paren(this=exp.AtTimeZone(this=instant, zone=exp.Literal.string(zone)))
    return local_time(instant, zone)


def outside(column: exp.Column, info: ColumnInfo) -> exp.Expr | None:
    """Whether the value lies outside the bounds, compared as an instant (NULL for NULL);
    None without bounds."""
    found = info.date_bounds
    if found is None:
        return None
    low, high = (_moment(b) for b in found)
    return exp.or_(
        exp.LT(this=instant_copy(column), expression=instant_bound(low, upper=False)),
        exp.GT(this=instant_copy(column), expression=instant_bound(high, upper=True)),
    )


def local_years(info: ColumnInfo) -> tuple[int, int] | None:
    """The years the local time of a value within the bounds can fall in, in any zone."""
    found = info.date_bounds
    if found is None:
        return None
    low, high = (_moment(b) for b in found)
    first = low - _DAY if low > dt.datetime.min + _DAY else dt.datetime.min
    last = high + _DAY if high < dt.datetime.max - _DAY else dt.datetime.max
    return first.year, last.year


def _moment(value: dt.date) -> dt.datetime:
    if not isinstance(value, dt.datetime):
        raise ValueError("a timestamp column's bounds are datetimes (ColumnInfo.date_bounds)")
    return value
