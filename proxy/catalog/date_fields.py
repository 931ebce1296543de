"""EXTRACT, date_part() and date_trunc() as PostgreSQL 15 computes them: a timestamp with
time zone's fields in the session's TimeZone.

EXTRACT gives a numeric (with PostgreSQL's scale: 6 decimals for seconds and epoch, 3
for milliseconds), date_part() a double precision computed as PostgreSQL computes it;
their columns are called extract and date_part. Years BC count as PostgreSQL counts them
(1 BC is -1; DuckDB: 0), and centuries and millennia begin in years 1, 1001, 2001.
date_trunc() of a timestamptz truncates its local time and reads the result again in the
zone (for a day or more: midnight of a day Paris changes to summer time is +01), and of
a date is a timestamptz too, as in PostgreSQL.
"""

from __future__ import annotations

from sqlglot import exp

from proxy.catalog.arithmetic import dispatchable
from proxy.catalog.functions import macro_call
from proxy.catalog.number_kinds import Kind, marked
from proxy.catalog.raised import marked as marked_error
from proxy.catalog.refusal import CatalogRefused
from proxy.catalog.time_kinds import TimeKind, ZoneContext, marked_time, time_kind
from proxy.catalog.zone_arguments import zone_argument
from proxy.catalog.zoned_macros import CLOCK_UNITS, TRUNCATED_ANY
from proxy.catalog.zoned_values import (
    Build,
    by_type,
    let,
    local_time,
    template,
    zone_name,
    zone_offset,
    zoned,
)

#: PostgreSQL's spellings of each unit (DecodeUnits reads the first 10 characters).
_UNITS = {
    "century": "c cent centuries century",
    "day": "d day days",
    "decade": "dec decade decades decs",
    "dow": "dow",
    "doy": "doy",
    "epoch": "epoch",
    "hour": "h hour hours hr hrs",
    "isodow": "isodow",
    "isoyear": "isoyear",
    "julian": "j jd julian",
    "microseconds": "microsecon us usec usecond useconds usecs",
    "millennium": "mil millennia millennium mils",
    "milliseconds": "millisecon ms msec msecond mseconds msecs",
    "minute": "m min mins minute minutes",
    "month": "mon mons month months",
    "quarter": "qtr quarter",
    "second": "s sec second seconds secs",
    "timezone": "timezone",
    "timezone_hour": "timezone_h",
    "timezone_minute": "timezone_m",
    "week": "w week weeks",
    "year": "y year years yr yrs",
}
_UNIT_NAMES = {
    spelling: unit for unit, spellings in _UNITS.items() for spelling in spellings.split()
}
_TRUNCATED_UNITS = frozenset(
    {
        "microseconds",
        "milliseconds",
        "second",
        "minute",
        "hour",
        "day",
        "week",
        "month",
        "quarter",
        "year",
        "decade",
        "century",
        "millennium",
    }
)
#: Fields that grow with time: ±Infinity for ±infinity (PostgreSQL), NULL for the others.
_MONOTONIC = frozenset({"year", "decade", "century", "millennium", "julian", "isoyear", "epoch"})
_ZONE_FIELDS = frozenset({"timezone", "timezone_hour", "timezone_minute"})
_CLOCK_FIELDS = frozenset({"hour", "minute", "second", "milliseconds", "microseconds"})
#: The numeric scale of each field of EXTRACT (0 for the others).
_SCALES = {"second": 6, "milliseconds": 3, "epoch": 6}
_TYPE_NAMES = {
    TimeKind.TIMESTAMPTZ: "timestamp with time zone",
    TimeKind.TIMESTAMP: "timestamp without time zone",
    TimeKind.DATE: "date",
}


def unit_name(node: exp.Expression | None, of: TimeKind) -> str:
    """PostgreSQL's name of the unit ``node`` (a keyword or a string constant) spells."""
    if isinstance(node, exp.Var | exp.Column | exp.Identifier):
        text = node.name
    elif isinstance(node, exp.Literal) and node.is_string:
        text = str(node.this)
    else:
        raise CatalogRefused(
            "dpproxy computes EXTRACT, date_part() and date_trunc() of a unit it can read",
            hint="write the unit as a constant: date_trunc('day', x)",
        )
    unit = _UNIT_NAMES.get(text.strip().strip('"').lower()[:10])
    if unit is None:
        raise _unrecognized(text.lower(), of)
    return unit


def _unrecognized(unit: str, of: TimeKind) -> CatalogRefused:
    type_name = _TYPE_NAMES.get(of, "timestamp with time zone")
    return CatalogRefused(f'unit "{unit}" not recognized for type {type_name}', sqlstate="22023")


def _unsupported(unit: str, of: TimeKind) -> CatalogRefused:
    return CatalogRefused(f'unit "{unit}" not supported for type {_TYPE_NAMES[of]}')


# ---------------------------------------------------------------------------------------
# EXTRACT and date_part()


def rewrite_extract(node: exp.Expression, context: ZoneContext) -> exp.Expression | None:
    """EXTRACT(field FROM x) and date_part('field', x) (read as a call of date_part by
    proxy.catalog.respell) of a timestamp with time zone, a timestamp or a date; None for
    anything else (an interval, a time: DuckDB's)."""
    if isinstance(node, exp.Extract):
        field_node, value, numeric = node.this, node.expression, True
    elif (
        isinstance(node, exp.Anonymous)
        and str(node.this).lower() == "date_part"
        and len(node.expressions) == 2
    ):
        (field_node, value), numeric = node.expressions, False
    else:
        return None
    kind = time_kind(value, context)
    if kind not in (TimeKind.TIMESTAMPTZ, TimeKind.TIMESTAMP, TimeKind.DATE, TimeKind.UNKNOWN):
        return None
    unit = unit_name(field_node, kind if kind is not TimeKind.UNKNOWN else TimeKind.TIMESTAMPTZ)
    if numeric and unit == "julian":
        raise CatalogRefused(
            "dpproxy does not compute EXTRACT(julian ...)",
            hint="date_part('julian', x) gives the Julian day as a double precision",
        )
    if kind is TimeKind.DATE and numeric and unit in _CLOCK_FIELDS | _ZONE_FIELDS:
        raise _unsupported(unit, kind)
    if kind in (TimeKind.TIMESTAMP, TimeKind.DATE) and unit in _ZONE_FIELDS:
        raise _unsupported(unit, TimeKind.TIMESTAMP)
    duck_type = f"DECIMAL(38, {_SCALES.get(unit, 0)})" if numeric else "DOUBLE"

    def of_local(local: exp.Expression) -> exp.Expression:
        if unit in _ZONE_FIELDS:  # only of a value whose type DuckDB knows: when it runs
            refusal = marked_error(
                "0A000", f'unit "{unit}" not supported for type {_TYPE_NAMES[TimeKind.TIMESTAMP]}'
            )
            return exp.cast(
                exp.Anonymous(this="error", expressions=[exp.Literal.string(refusal)]), duck_type
            )
        return _field(unit, local, None, numeric)

    branches: dict[TimeKind | str, Build] = {
        TimeKind.TIMESTAMP: of_local,
        # date_part(text, date) is date_part(text, timestamp) in PostgreSQL.
        TimeKind.DATE: lambda v: of_local(exp.cast(v, "TIMESTAMP")),
    }
    if kind in (TimeKind.TIMESTAMPTZ, TimeKind.UNKNOWN):
        branches[TimeKind.TIMESTAMPTZ] = _zoned_field(unit, numeric, context)
    field = by_type(
        value,
        kind,
        branches,
        lambda v: exp.cast(
            exp.Anonymous(this="date_part", expressions=[exp.Literal.string(unit), v]), duck_type
        ),
    )
    return marked(field, Kind.NUMERIC if numeric else Kind.FLOAT8)


def _zoned_field(unit: str, numeric: bool, context: ZoneContext) -> Build:
    """The field of a timestamptz: of its local time in the session's zone (its epoch
    needs none)."""
    if unit == "epoch":
        return lambda value: _field(unit, value, value, numeric)
    zone = zone_name(context, f"{unit} of a timestamp with time zone")

    def build(value: exp.Expression) -> exp.Expression:
        return _field(unit, local_time(value, zone), value, numeric, zone)

    return build


def _field(
    unit: str,
    local: exp.Expression,
    moment: exp.Expression | None,
    numeric: bool,
    zone: exp.Expression | None = None,
) -> exp.Expression:
    """The field ``unit`` of the local time ``local`` (of the timestamptz ``moment`` in
    ``zone``, or of a timestamp), of PostgreSQL's type: a numeric or a double precision."""
    finite_of = local if moment is None else moment
    if unit == "epoch":
        micros = template("epoch_us(:x)", x=finite_of)
        value = _numeric(micros, 6) if numeric else _double_ratio(micros, 1_000_000)
    elif unit in _ZONE_FIELDS:
        if moment is None or zone is None:
            raise _unsupported(unit, TimeKind.TIMESTAMP)
        east = zone_offset(moment, zone)
        seconds = {
            "timezone": east,
            "timezone_hour": template(":o // 3600", o=east),
            "timezone_minute": template("(:o // 60) % 60", o=east),
        }[unit]
        value = _numeric(seconds, 0) if numeric else exp.cast(seconds, "DOUBLE")
    else:
        value = _local_field(unit, local, numeric)
    return _finite(value, finite_of, unit, numeric)


def _local_field(unit: str, local: exp.Expression, numeric: bool) -> exp.Expression:
    if unit in ("second", "milliseconds", "microseconds"):
        micros = template("datepart('microseconds', :l)", l=local)
        if numeric:
            return _numeric(micros, {"second": 6, "milliseconds": 3}.get(unit, 0))
        # PostgreSQL's float arithmetic: tm_sec + fsec / 1000000.0 and its kin.
        second = template("datepart('second', :l)", l=local)
        fraction = template("CAST(:us - :s * 1000000 AS DOUBLE)", us=micros, s=second)
        if unit == "second":
            return template(":s + :f / 1000000.0", s=second, f=fraction)
        if unit == "milliseconds":
            return template(":s * 1000.0 + :f / 1000.0", s=second, f=fraction)
        return template(":s * 1000000.0 + :f", s=second, f=fraction)
    if unit == "julian":
        return template(
            "CAST(epoch_us(date_trunc('day', :l)) // 86400000000 + 2440588 AS DOUBLE) + "
            "(CAST((datepart('hour', :l) * 60 + datepart('minute', :l)) * 60 "
            "+ datepart('second', :l) AS DOUBLE) + CAST(datepart('microseconds', :l) "
            "- datepart('second', :l) * 1000000 AS DOUBLE) / 1000000.0) / 86400.0",
            l=local,
        )
    year = template("datepart('year', :l)", l=local)
    formulas = {
        # 1 BC is year 0 to DuckDB, -1 to PostgreSQL (and its decades and ISO years).
        "year": "CASE WHEN :y <= 0 THEN :y - 1 ELSE :y END",
        "isoyear": "CASE WHEN :i <= 0 THEN :i - 1 ELSE :i END",
        "decade": "CASE WHEN :y >= 0 THEN :y // 10 ELSE -((8 - (:y - 1)) // 10) END",
        "century": "CASE WHEN :y > 0 THEN (:y + 99) // 100 ELSE -((99 - (:y - 1)) // 100) END",
        "millennium": (
            "CASE WHEN :y > 0 THEN (:y + 999) // 1000 ELSE -((999 - (:y - 1)) // 1000) END"
        ),
    }
    if unit in formulas:
        isoyear = template("datepart('isoyear', :l)", l=local)
        integer = template(formulas[unit], y=year, i=isoyear)
    else:
        integer = exp.Anonymous(this="datepart", expressions=[exp.Literal.string(unit), local])
    return _numeric(integer, 0) if numeric else exp.cast(integer, "DOUBLE")


def _numeric(integer: exp.Expression, scale: int) -> exp.Expression:
    """``integer`` / 10^scale, a numeric of that scale (exactly: DuckDB's DECIMAL product)."""
    whole = exp.cast(integer, "DECIMAL(38, 0)")
    if not scale:
        return whole
    unit = exp.cast(exp.Literal.number(f"0.{'0' * (scale - 1)}1"), f"DECIMAL({scale + 1}, {scale})")
    return exp.Mul(this=whole, expression=unit)


def _double_ratio(integer: exp.Expression, divisor: int) -> exp.Expression:
    return template(f"CAST(:x AS DOUBLE) / {divisor}.0", x=integer)


def _finite(value: exp.Expression, of: exp.Expression, unit: str, numeric: bool) -> exp.Expression:
    """``value``, or what PostgreSQL gives for ±infinity: ±Infinity for the fields that
    grow with time (a numeric infinity dpproxy refuses), NULL for the others."""
    if unit not in _MONOTONIC:
        infinite: exp.Expression = exp.Null()
    elif numeric:
        infinite = exp.Anonymous(
            this="error",
            expressions=[
                exp.Literal.string(
                    marked_error(
                        "0A000",
                        "dpproxy's catalog does not compute infinite numerics",
                        "date_part() gives Infinity as a double precision.",
                    )
                )
            ],
        )
    else:
        infinite = template(
            "CASE WHEN :x > 'epoch' THEN CAST('Infinity' AS DOUBLE) "
            "ELSE CAST('-Infinity' AS DOUBLE) END",
            x=of,
        )
    return template("CASE WHEN isfinite(:x) THEN :v ELSE :i END", x=of, v=value, i=infinite)


# ---------------------------------------------------------------------------------------
# date_trunc()


def _truncated_stamp(unit: str, local: exp.Expression) -> exp.Expression:
    """date_trunc of a timestamp (PostgreSQL's centuries, millennia and decades)."""
    if unit in ("century", "millennium", "decade"):
        truncated = macro_call(f"pg_trunc_{unit}", local)
    else:
        truncated = exp.Anonymous(this="date_trunc", expressions=[exp.Literal.string(unit), local])
    return template("CASE WHEN isfinite(:l) THEN :t ELSE :l END", l=local, t=truncated)


def _truncated_moment(unit: str, moment: exp.Expression, zone: exp.Expression) -> exp.Expression:
    """date_trunc of a timestamptz in ``zone``: its local time truncated and read again
    there, or below a day the moment less what truncation takes off (its offset kept)."""

    def truncated(value: exp.Expression) -> exp.Expression:
        local = local_time(value, zone)
        if unit in CLOCK_UNITS:
            result = template(
                ":x - (:l - :t)", x=value, l=local, t=_truncated_stamp(unit, local.copy())
            )
        else:
            result = zoned(_truncated_stamp(unit, local), zone)
        return template("CASE WHEN isfinite(:x) THEN :r ELSE :x END", x=value, r=result)

    return marked_time(let(moment, truncated), TimeKind.TIMESTAMPTZ)


def rewrite_trunc(node: exp.Expression, context: ZoneContext) -> exp.Expression | None:
    """date_trunc(unit, x [, zone]) as PostgreSQL truncates x: a timestamptz in the
    session's zone (or the one named), a date as a timestamptz, a timestamp as DuckDB but
    centuries and millennia; None for anything else (an interval)."""
    if not isinstance(node, exp.TimestampTrunc):
        return None
    value = node.this
    kind = time_kind(value, context)
    if kind not in (TimeKind.TIMESTAMPTZ, TimeKind.TIMESTAMP, TimeKind.DATE, TimeKind.UNKNOWN):
        return None
    unit = unit_name(
        node.args.get("unit"), kind if kind is not TimeKind.UNKNOWN else TimeKind.TIMESTAMPTZ
    )
    if unit not in _TRUNCATED_UNITS:
        of = TimeKind.TIMESTAMP if kind is TimeKind.TIMESTAMP else TimeKind.TIMESTAMPTZ
        if unit in _ZONE_FIELDS:  # units of date_trunc's reading that it does not truncate to
            raise _unsupported(unit, of)
        raise _unrecognized(unit, of)
    unit_literal = exp.Literal.string(unit)
    named = node.args.get("zone")
    if named is not None:
        zone = zone_argument(named, context)
    elif kind is TimeKind.TIMESTAMP:
        zone = exp.Literal.string("UTC")  # not used: a timestamp has no zone
    else:
        zone = zone_name(context, "date_trunc() of a timestamp with time zone")
    if kind is TimeKind.TIMESTAMPTZ:
        return _truncated_moment(unit, value, zone)
    if kind is TimeKind.DATE:
        return _truncated_moment(unit, zoned(exp.cast(value, "TIMESTAMP"), zone), zone)
    if kind is TimeKind.TIMESTAMP:
        if named is not None:
            raise CatalogRefused(
                "function date_trunc(unknown, timestamp without time zone, unknown) does not exist",
                sqlstate="42883",
            )
        return marked_time(let(value, lambda v: _truncated_stamp(unit, v)), TimeKind.TIMESTAMP)
    if not dispatchable(value):
        raise CatalogRefused(
            "dpproxy cannot tell the type of the value date_trunc() truncates",
            hint="cast it: date_trunc('day', x::timestamptz)",
        )
    return macro_call(TRUNCATED_ANY, unit_literal, value, zone)
