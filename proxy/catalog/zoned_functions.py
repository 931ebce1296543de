"""Functions of timestamps with time zone that PostgreSQL computes in the session's
TimeZone: age(), make_timestamptz(), to_timestamp(text, format), and generate_series()
of timestamptz values stepped by days or months (refused outside UTC).
"""

from __future__ import annotations

from sqlglot import exp

from proxy.catalog.refusal import CatalogRefused
from proxy.catalog.time_kinds import TimeKind, ZoneContext, marked_time, time_kind
from proxy.catalog.zone_arguments import zone_argument
from proxy.catalog.zoned_values import (
    by_type,
    local_time,
    string_constant,
    zone_name,
    zoned,
)
from proxy.intervals import read_interval

_SERIES = (exp.ExplodingGenerateSeries, exp.GenerateSeries)


def rewrite_zoned_function(node: exp.Expression, context: ZoneContext) -> exp.Expression | None:
    """``node`` computed in the session's zone if it is one of these functions, else None."""
    if isinstance(node, exp.StrToTime):
        return _to_timestamp(node, context)
    if isinstance(node, _SERIES):
        _check_series(node, context)
        return None
    if not isinstance(node, exp.Anonymous):
        return None
    name = str(node.this).lower()
    if name == "age" and len(node.expressions) in (1, 2):
        return _age(node.expressions, context)
    if name == "make_timestamptz" and len(node.expressions) in (6, 7):
        return _make_timestamptz(node.expressions, context)
    if name in ("generate_series", "range") and len(node.expressions) == 3:
        _check_steps(node.expressions[0], node.expressions[2], context)
    return None


def _age(arguments: list[exp.Expression], context: ZoneContext) -> exp.Expression | None:
    """age() of timestamptz values: PostgreSQL subtracts their local dates and times in the
    session's zone field by field (and ignores a difference of offsets); age(x) is from
    today's midnight there."""
    kinds = [time_kind(argument, context) for argument in arguments]
    if not {TimeKind.TIMESTAMPTZ, TimeKind.UNKNOWN} & set(kinds):
        return None
    if any(k not in (TimeKind.TIMESTAMPTZ, TimeKind.UNKNOWN, *_LOCAL) for k in kinds):
        return None
    zone = zone_name(context, "age() of timestamps with time zone")
    locals_ = [
        by_type(
            argument,
            kind,
            {
                TimeKind.TIMESTAMPTZ: lambda v: local_time(v, zone),
                TimeKind.TIMESTAMP: lambda v: v,
                TimeKind.DATE: lambda v: exp.cast(v, "TIMESTAMP"),
            },
            lambda v: exp.cast(v, "TIMESTAMP"),
        )
        for argument, kind in zip(arguments, kinds, strict=True)
    ]
    if len(locals_) == 1:
        now = exp.Anonymous(this="now", expressions=[])
        today = exp.cast(exp.cast(local_time(now, zone), "DATE"), "TIMESTAMP")
        locals_.insert(0, today)
    result = exp.Anonymous(this="age", expressions=locals_)
    return marked_time(result, TimeKind.INTERVAL)


_LOCAL = (TimeKind.TIMESTAMP, TimeKind.DATE)


def _make_timestamptz(arguments: list[exp.Expression], context: ZoneContext) -> exp.Expression:
    """make_timestamptz(y, m, d, h, mi, s [, zone]): a local time in the session's zone
    (or the one named)."""
    *fields, seconds = arguments[:6]
    zone = (
        zone_argument(arguments[6], context)
        if len(arguments) == 7
        else zone_name(context, "make_timestamptz()")
    )
    local = exp.Anonymous(this="make_timestamp", expressions=[*fields, exp.cast(seconds, "DOUBLE")])
    return zoned(local, zone)


def _to_timestamp(node: exp.StrToTime, context: ZoneContext) -> exp.Expression | None:
    """to_timestamp(text, format) without a zone in its format: a local time in the
    session's zone (DuckDB's strptime gives a timestamp)."""
    text = string_constant(node.args["format"])
    if text is None or "%z" in text or "%Z" in text:
        return None
    return zoned(node, zone_name(context, "to_timestamp()"))


def _check_series(node: exp.Expression, context: ZoneContext) -> None:
    _check_steps(node.args.get("start"), node.args.get("step"), context)


def _check_steps(
    start: exp.Expression | None, step: exp.Expression | None, context: ZoneContext
) -> None:
    """Refuse generate_series() of timestamptz values by days or months outside UTC:
    PostgreSQL adds them to the local time in the session's zone, DuckDB in UTC."""
    if start is None or step is None or context.zone.name == "UTC":
        return
    if time_kind(start, context) not in (TimeKind.TIMESTAMPTZ, TimeKind.UNKNOWN):
        return
    text = _interval_constant(step)
    if text is not None:
        months, days, _ = read_interval(text)
        if not months and not days:
            return
    raise CatalogRefused(
        "dpproxy computes generate_series() of timestamps with time zone only by hours "
        "(or smaller steps) outside UTC",
        hint="step by hours (INTERVAL '24 hours'), or generate timestamps "
        "(x::timestamp) and convert them: ts AT TIME ZONE current_setting('TimeZone')",
    )


def _interval_constant(node: exp.Expression) -> str | None:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Cast) and node.to.is_type(exp.DataType.Type.INTERVAL):
        return string_constant(node.this)
    if isinstance(node, exp.Interval):
        unit = node.args.get("unit")
        amount = string_constant(node.this)
        if amount is not None and unit is not None:
            return f"{amount} {unit.name}"
    return None
