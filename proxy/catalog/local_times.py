"""current_timestamp, current_date, localtime... computed in the session's TimeZone as
PostgreSQL does.

DuckDB computes them in UTC (its own TimeZone), and its spellings of these functions bind
to a column of the same name. So the moment is taken with now(), and dates and times of
day are computed from it in the session's zone with timezone(zone, moment); a zone DuckDB
has no name for (a POSIX rule with daylight saving time) is refused rather than answered
in UTC. Zones themselves are proxy.catalog.datetimes' concern; what else PostgreSQL
computes in the zone (casts, EXTRACT, to_char...), proxy.catalog.zoned_rewrites'.
"""

from __future__ import annotations

from sqlglot import exp

from proxy.catalog.datetimes import SessionZone, session_zone
from proxy.catalog.refusal import CatalogRefused
from proxy.catalog.session_values import SessionValues
from proxy.catalog.time_kinds import TimeKind, marked_time


def _session_zone(session: SessionValues) -> SessionZone:
    return session_zone(session.settings.get("timezone", "UTC"))


def _duckdb_zone(zone: SessionZone) -> exp.Expression:
    if zone.duckdb is None:
        raise CatalogRefused(zone.refusal("local times"))
    return exp.Literal.string(zone.duckdb)


def _local_time(zone: SessionZone, moment: exp.Expression) -> exp.Expression:
    """The date and time of day of ``moment`` (a timestamptz) in ``zone``: a TIMESTAMP."""
    local = exp.Anonymous(this="timezone", expressions=[_duckdb_zone(zone), moment])
    return marked_time(local, TimeKind.TIMESTAMP)


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
        return marked_time(_local_time(_session_zone(session), moment), TimeKind.TIMETZ)
    return None
