"""current_timestamp, current_date, localtime..., date_trunc('day', now()) and timestamptz
literals without an offset, computed in the session's TimeZone as PostgreSQL does.

DuckDB computes them in UTC (its own TimeZone), and its spellings of these functions bind
to a column of the same name. So the moment is taken with now(), and dates and times of
day are computed from it in the session's zone with timezone(zone, moment); a zone DuckDB
has no name for (a POSIX rule with daylight saving time) is refused rather than answered
in UTC. Zones themselves are proxy.catalog.datetimes' concern.
"""

from __future__ import annotations

import re

from sqlglot import exp

from proxy.catalog.datetimes import SessionZone, session_zone
from proxy.catalog.refusal import CatalogRefused
from proxy.catalog.session_values import SessionValues

# DuckDB's functions of the moment (its own spellings: the rewritten now()s).
_NOW_FUNCTIONS = frozenset({"now", "transaction_timestamp", "get_current_timestamp"})
_LOCAL_TYPES = (exp.DataType.Type.DATE, exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIME)
# A timestamptz literal's text without a time zone: read in the session's TimeZone.
_LOCAL_TIMESTAMP_TEXT = re.compile(
    r"\s*\d{4,}-\d{1,2}-\d{1,2}(?:[ T]\d{1,2}:\d{2}(?::\d{2}(?:\.\d*)?)?)?\s*", re.ASCII
)


def zoned_cast(node: exp.Cast, session: SessionValues) -> exp.Expression | None:
    """A cast PostgreSQL computes in the session's TimeZone, computed there in DuckDB
    (where it would be in UTC): TIMESTAMPTZ '2020-01-01 00:00' (no offset: local time)
    and now()::date, ::timestamp, ::time (the date, time of day in the zone); None for
    any other cast."""
    zone = _session_zone(session)
    to, value = node.to, node.this
    if to.is_type(exp.DataType.Type.TIMESTAMPTZ):
        if not (
            isinstance(value, exp.Literal)
            and value.is_string
            and _LOCAL_TIMESTAMP_TEXT.fullmatch(value.name)
        ):
            return None
        local = exp.cast(value, exp.DataType.build("TIMESTAMP"))
        return exp.Anonymous(this="timezone", expressions=[_duckdb_zone(zone), local])
    if to.is_type(*_LOCAL_TYPES) and _is_timestamptz(value):
        return exp.cast(_local_time(zone, value), to)
    return None


def _is_timestamptz(node: exp.Expression) -> bool:
    """Whether ``node`` (rewritten) is a timestamp with time zone known as such: one of
    the moment (now()...) or a cast to timestamptz."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Anonymous):
        name = str(node.this).lower()
        if name == "timezone" and len(node.expressions) == 2:
            local = node.expressions[1]  # timezone(zone, timestamp): the rewritten literal
            return isinstance(local, exp.Cast) and local.to.is_type(exp.DataType.Type.TIMESTAMP)
        return name in _NOW_FUNCTIONS
    return isinstance(node, exp.Cast) and node.to.is_type(exp.DataType.Type.TIMESTAMPTZ)


def _session_zone(session: SessionValues) -> SessionZone:
    return session_zone(session.settings.get("timezone", "UTC"))


def _duckdb_zone(zone: SessionZone) -> exp.Expression:
    if zone.duckdb is None:
        raise CatalogRefused(zone.refusal("local times"))
    return exp.Literal.string(zone.duckdb)


def _local_time(zone: SessionZone, moment: exp.Expression) -> exp.Expression:
    """The date and time of day of ``moment`` (a timestamptz) in ``zone``: a TIMESTAMP."""
    return exp.Anonymous(this="timezone", expressions=[_duckdb_zone(zone), moment])


def _moment(node: exp.Expression, what: str) -> exp.Expression:
    """now(), for current_timestamp, localtimestamp...; refused with a precision
    (current_timestamp(3)), which dpproxy does not round to."""
    if node.args.get("this") is not None:
        raise CatalogRefused(
            f"dpproxy does not support a precision for {what}", hint=f"write {what} alone"
        )
    return exp.Anonymous(this="now", expressions=[])


def rewrite_moment(node: exp.Expression, session: SessionValues) -> exp.Expression | None:
    """current_timestamp, current_date, current_time, localtimestamp and localtime as
    PostgreSQL computes them, in the session's TimeZone (DuckDB's spellings bind to a
    column of the same name: SELECT CURRENT_TIMESTAMP AS "current_timestamp" fails)."""
    if isinstance(node, exp.CurrentTimestamp):
        return _moment(node, "current_timestamp")
    if isinstance(node, exp.CurrentDate):
        local = _local_time(_session_zone(session), _moment(node, "current_date"))
        return exp.cast(local, exp.DataType.build("DATE"))
    if isinstance(node, exp.Localtimestamp):
        return _local_time(_session_zone(session), _moment(node, "localtimestamp"))
    if isinstance(node, exp.Localtime):
        local = _local_time(_session_zone(session), _moment(node, "localtime"))
        return exp.cast(local, exp.DataType.build("TIME"))
    if isinstance(node, exp.CurrentTime):
        moment = exp.cast(_moment(node, "current_time"), exp.DataType.build("TIMETZ"))
        return _local_time(_session_zone(session), moment)
    if isinstance(node, exp.TimestampTrunc) and _is_timestamptz(node.this):
        # date_trunc('day', now()): the start of the day in the session's TimeZone.
        zone = _session_zone(session)
        node.set("this", _local_time(zone, node.this))
        return _local_time(zone, node)
    return None
