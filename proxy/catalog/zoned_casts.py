"""Casts from and to timestamp with time zone, computed in the session's TimeZone as
PostgreSQL computes them.

To a timestamptz: text without an offset, a timestamp and a date are local times in the
session's zone. From one: ::text (and the other text types) is its text in the zone
(2024-03-31 14:57:04.39+09), ::date, ::time and ::timestamp its local date and time
there, ::timetz its local time with the offset. A precision (::timestamptz(3)), which
PostgreSQL rounds to, is refused.
"""

from __future__ import annotations

from sqlglot import exp

from proxy.catalog.casts import is_text_type, type_name
from proxy.catalog.refusal import CatalogRefused
from proxy.catalog.time_kinds import TimeKind, ZoneContext, marked_time, time_kind
from proxy.catalog.zoned_values import (
    by_type,
    local_time,
    offset_text,
    text_of,
    to_timestamptz,
    zone_name,
    zone_offset,
)

_LOCAL_TYPES = {
    exp.DataType.Type.DATE: "DATE",
    exp.DataType.Type.TIME: "TIME",
    exp.DataType.Type.TIMESTAMP: "TIMESTAMP",
    exp.DataType.Type.DATETIME: "TIMESTAMP",
}
_ZONED_TYPES = (exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.TIMESTAMPLTZ)


def rewrite_zoned_cast(node: exp.Expression, context: ZoneContext) -> exp.Expression | None:
    """A cast (or date(x)) PostgreSQL computes in the session's TimeZone, as DuckDB computes
    it there; None for any other cast (casts.py's)."""
    if isinstance(node, exp.Date) and not node.expressions and node.args.get("zone") is None:
        to: exp.Expression = exp.DataType.build("DATE")  # date(x) is x::date
        value = node.this
    elif isinstance(node, exp.Cast):
        to, value = node.args["to"], node.this
    else:
        return None
    if not isinstance(to, exp.DataType):
        return None
    kind = time_kind(value, context)
    if to.this in _ZONED_TYPES:
        _no_precision(to, "timestamp with time zone")
        if kind is TimeKind.TIMESTAMPTZ:
            return marked_time(exp.cast(value, "TIMESTAMPTZ"), TimeKind.TIMESTAMPTZ)
        if kind in (TimeKind.TIME, TimeKind.TIMETZ, TimeKind.INTERVAL):
            return None  # no such cast in PostgreSQL: DuckDB's error
        return to_timestamptz(value, kind, context)
    if is_text_type(type_name(to)) and holds_a_moment(value, context):
        raise CatalogRefused(
            "dpproxy does not write an array or a row of timestamps with time zone as text",
            hint="cast each value: array[x::text]",
        )
    if kind not in (TimeKind.TIMESTAMPTZ, TimeKind.UNKNOWN):
        return None
    if is_text_type(type_name(to)):
        return exp.cast(text_of(value, kind, context), "VARCHAR")
    if to.this in _LOCAL_TYPES:
        duck_type = _LOCAL_TYPES[to.this]
        _no_precision(to, type_name(to))
        zone = zone_name(context, "local times")
        local = by_type(
            value,
            kind,
            {TimeKind.TIMESTAMPTZ: lambda v: exp.cast(local_time(v, zone), duck_type)},
            lambda v: exp.cast(v, duck_type),
        )
        return exp.cast(local, duck_type)
    if to.this == exp.DataType.Type.TIMETZ:
        zone = zone_name(context, "local times")

        def with_offset(moment: exp.Expression) -> exp.Expression:
            clock = exp.cast(exp.cast(local_time(moment, zone), "TIME"), "VARCHAR")
            text = exp.DPipe(this=clock, expression=offset_text(zone_offset(moment, zone)))
            return exp.cast(text, "TIMETZ")

        timetz = by_type(
            value, kind, {TimeKind.TIMESTAMPTZ: with_offset}, lambda v: exp.cast(v, "TIMETZ")
        )
        return exp.cast(timetz, "TIMETZ")
    return None


def holds_a_moment(value: exp.Expression, context: ZoneContext) -> bool:
    """Whether ``value`` is an ARRAY[...] or ROW(...) with a timestamptz in it (DuckDB would
    write it in UTC, and as a list)."""
    while isinstance(value, exp.Paren):
        value = value.this
    if isinstance(value, exp.Array | exp.Tuple) or (
        isinstance(value, exp.Anonymous) and str(value.this).lower() == "row"
    ):
        return any(
            time_kind(item, context) is TimeKind.TIMESTAMPTZ or holds_a_moment(item, context)
            for item in value.expressions
        )
    return False


def _no_precision(to: exp.DataType, name: str) -> None:
    if to.expressions:
        raise CatalogRefused(
            f"dpproxy does not round to a precision of {name}",
            hint="cast without one, or round with date_trunc('second', x)",
        )
