"""The catalog engine's macros for timestamps with time zone in a named time zone, called
by the translation (proxy.catalog.zoned_values, zoned_operators, date_fields, to_char).

The engine computes in UTC (its TimeZone is locked), so each macro takes the zone as an
argument: the name DuckDB's ICU knows the session's TimeZone by (SessionZone.duckdb).
timezone(zone, x) gives a timestamptz's date and time of day there (a TIMESTAMP), and
timezone(zone, local) the moment of a local time, resolved as PostgreSQL resolves it: a
time skipped by a change to summer time is read with the offset before it (02:30 on the
day Paris skips to 03:00 is 03:30+02), a time that happens twice is the later one.
"""

from __future__ import annotations

from proxy.catalog.raised import marked
from proxy.catalog.relations import FUNCTIONS_SCHEMA

S = FUNCTIONS_SCHEMA
ZONE_OFFSET = "pg_zone_offset"
TIMESTAMPTZ_TEXT = "pg_tstz_text"
TIMESTAMPTZ_IN = "pg_tstz_in"
TIMESTAMPTZ_PLUS = "pg_tstz_plus"
ANY_PLUS_INTERVAL = "pg_any_plus_interval"
TIMESTAMPTZ_PLUS_ANY = "pg_tstz_plus_any"
TRUNCATED_STAMP = "pg_trunc_stamp"
TRUNCATED_TIMESTAMPTZ = "pg_trunc_tstz"
TRUNCATED_ANY = "pg_trunc_any"
AT_ZONE_ANY = "pg_at_zone_any"
TIMESTAMPTZ_MINUS_ANY = "pg_tstz_minus_any"
ANY_MINUS_TIMESTAMPTZ = "pg_any_minus_tstz"
ANY_MINUS_LOCAL = "pg_any_minus_local"
LOCAL_MINUS_ANY = "pg_local_minus_any"
ANY_PLUS_ANY = "pg_any_plus_any"
ANY_MINUS_ANY = "pg_any_minus_any"
TIMESTAMPTZ_JSON = "pg_tstz_json"
OFFSET_TEXT = "pg_offset_text"

#: PostgreSQL's units of date_trunc() below a day: the moment keeps its offset (PostgreSQL
#: does not resolve the local time again), so 02:40 in the hour Paris repeats on leaving
#: summer time truncates to 02:00 of the same offset.
CLOCK_UNITS = ("microseconds", "milliseconds", "second", "minute", "hour")

#: A local time without an offset (read in the zone), and one with a numeric offset of
#: at most 15:59 hours, Z, UTC or GMT (read as written): what pg_tstz_in reads as
#: PostgreSQL does. Other texts (zone names and abbreviations, which DuckDB and
#: PostgreSQL read differently) are refused.
_LOCAL = r"\s*\d{4,}-\d{1,2}-\d{1,2}(?:[ T]\d{1,2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?)?"
_OFFSET = r"\s*(?:[+-](?:0\d|1[0-5])(?::[0-5]\d(?::[0-5]\d)?|[0-5]\d)?|Z|UTC|GMT)"
LOCAL_TEXT = _LOCAL + r"\s*"
ZONED_TEXT = _LOCAL + _OFFSET + r"\s*"
_UNREAD_TEXT = marked(
    "0A000",
    "dpproxy cannot read this text as a timestamp with time zone",
    "Write it as YYYY-MM-DD HH:MM:SS, with an offset such as +02:00, or without one to "
    "read it in the session's TimeZone.",
).replace("'", "''")


def _let(name: str, value: str, body: str) -> str:
    """``body`` over ``name``, ``value`` evaluated once (a lambda over a list of one)."""
    return f"list_transform([{value}], lambda {name}: {body})[1]"


def _as_moment(value: str, duck_type: str) -> str:
    """A timestamp or a date meeting a timestamptz: its local time in zone z."""
    if duck_type == "TIMESTAMP":
        return f"timezone(z, {value})"
    if duck_type == "DATE":
        return f"timezone(z, CAST({value} AS TIMESTAMP))"
    return value


#: The pairs of date and time types DuckDB adds (+) and subtracts (-), each of which gets
#: its own overload in pg_any_plus_any and pg_any_minus_any, so that DuckDB casts none of
#: them to a timestamptz to take another's.
_SUMS = (
    ("TIMESTAMPTZ", "INTERVAL"),
    ("INTERVAL", "TIMESTAMPTZ"),
    ("TIMESTAMP", "INTERVAL"),
    ("INTERVAL", "TIMESTAMP"),
    ("DATE", "INTERVAL"),
    ("INTERVAL", "DATE"),
    ("INTERVAL", "INTERVAL"),
    ("DATE", "TIME"),
    ("TIME", "DATE"),
    ("TIME", "INTERVAL"),
)
_DIFFERENCES = (
    ("TIMESTAMPTZ", "INTERVAL"),
    ("TIMESTAMPTZ", "TIMESTAMPTZ"),
    ("TIMESTAMPTZ", "TIMESTAMP"),
    ("TIMESTAMPTZ", "DATE"),
    ("TIMESTAMP", "TIMESTAMPTZ"),
    ("DATE", "TIMESTAMPTZ"),
    ("TIMESTAMP", "INTERVAL"),
    ("TIMESTAMP", "TIMESTAMP"),
    ("DATE", "INTERVAL"),
    ("DATE", "DATE"),
    ("INTERVAL", "INTERVAL"),
    ("TIME", "INTERVAL"),
)


def _any_with_any(minus: bool) -> tuple[str, ...]:
    """x + y or x - y where DuckDB alone knows both types (two columns)."""
    operator = "-" if minus else "+"
    overloads = []
    for left, right in _DIFFERENCES if minus else _SUMS:
        if "TIMESTAMPTZ" in (left, right) and "INTERVAL" in (left, right):
            moment, interval = ("x", "y") if left == "TIMESTAMPTZ" else ("y", "x")
            added = f"-{interval}" if minus else interval
            body = f"{S}.{TIMESTAMPTZ_PLUS}({moment}, {added}, z)"
        elif "TIMESTAMPTZ" in (left, right):
            body = f"{_as_moment('x', left)} - {_as_moment('y', right)}"
        else:
            body = f"x {operator} y"
        overloads.append(f"(x {left}, y {right}, z) AS {body}")
    overloads.append(f"(x, y, z) AS x {operator} y")
    return tuple(overloads)


# Each macro takes a value it uses more than once through a lambda (_let), so that it is
# computed once and, above all, bound once: DuckDB binds a macro's argument at each of its
# uses, and nested macros (the text of a sum of an interval) would take it seconds.
_TRUNCATED_CLOCK = ", ".join(f"'{unit}'" for unit in CLOCK_UNITS)
_MACROS: dict[str, tuple[str, ...]] = {
    # Seconds east of UTC of the moment x in zone z (NULL for ±infinity).
    ZONE_OFFSET: (
        "(x, z) AS "
        + _let(
            "dp_offset_of",
            "x",
            "CASE WHEN isfinite(dp_offset_of) THEN (epoch_us(timezone(z, dp_offset_of)) "
            "- epoch_us(dp_offset_of)) // 1000000 END",
        ),
    ),
    # PostgreSQL's EncodeTimezone: +01, -03:30, +00:09:21.
    OFFSET_TEXT: (
        "(o) AS "
        + _let(
            "dp_east",
            "o",
            "CASE WHEN dp_east < 0 THEN '-' ELSE '+' END "
            "|| printf('%02d', abs(dp_east) // 3600) "
            "|| CASE WHEN abs(dp_east) % 60 <> 0 THEN printf(':%02d:%02d', "
            "abs(dp_east) % 3600 // 60, abs(dp_east) % 60) "
            "WHEN abs(dp_east) % 3600 <> 0 THEN printf(':%02d', abs(dp_east) % 3600 // 60) "
            "ELSE '' END",
        ),
    ),
    # A timestamptz's text in zone z, as PostgreSQL writes it: 2024-03-31 03:30:00+02, years
    # BC as 0044-03-15 12:00:00+00:09:21 BC (DuckDB writes 0044-03-15 (BC) 12:00:00).
    TIMESTAMPTZ_TEXT: (
        "(x, z) AS "
        + _let(
            "dp_shown",
            "x",
            "CASE WHEN NOT isfinite(dp_shown) THEN CAST(dp_shown AS VARCHAR) ELSE "
            + _let(
                "dp_text",
                "CAST(timezone(z, dp_shown) AS VARCHAR)",
                f"replace(dp_text, ' (BC)', '') "
                f"|| {S}.{OFFSET_TEXT}({S}.{ZONE_OFFSET}(dp_shown, z)) "
                "|| CASE WHEN contains(dp_text, '(BC)') THEN ' BC' ELSE '' END",
            )
            + " END",
        ),
    ),
    # Text as a timestamptz: without an offset, a local time in zone z.
    TIMESTAMPTZ_IN: (
        "(t, z) AS "
        + _let(
            "dp_read",
            "t",
            f"CASE WHEN regexp_full_match(dp_read, '{LOCAL_TEXT}') "
            "THEN timezone(z, CAST(dp_read AS TIMESTAMP)) "
            f"WHEN regexp_full_match(dp_read, '{ZONED_TEXT}') THEN CAST(dp_read AS TIMESTAMPTZ) "
            "WHEN lower(trim(dp_read)) IN ('infinity', '+infinity', '-infinity', 'epoch') "
            "THEN CAST(lower(trim(dp_read)) AS TIMESTAMPTZ) "
            f"WHEN dp_read IS NOT NULL THEN error('{_UNREAD_TEXT}') END",
        ),
    ),
    # PostgreSQL's timestamptz_pl_interval: the months, then the days are added to the
    # local time in zone z (each read again there), then the rest as a duration.
    "pg_shift_months": (
        "(x, m, z) AS "
        + _let(
            "dp_before_months",
            "x",
            "CASE WHEN m = 0 THEN dp_before_months "
            "ELSE timezone(z, timezone(z, dp_before_months) + to_months(m)) END",
        ),
    ),
    "pg_shift_days": (
        "(x, d, z) AS "
        + _let(
            "dp_before_days",
            "x",
            "CASE WHEN d = 0 THEN dp_before_days "
            "ELSE timezone(z, timezone(z, dp_before_days) + to_days(d)) END",
        ),
    ),
    TIMESTAMPTZ_PLUS: (
        "(x, i, z) AS "
        + _let(
            "dp_pair",
            "{'x': x, 'i': i}",
            "CASE WHEN NOT isfinite(dp_pair.x) OR dp_pair.i IS NULL THEN dp_pair.x + dp_pair.i "
            f"ELSE {S}.pg_shift_days({S}.pg_shift_months(dp_pair.x, "
            "datepart('year', dp_pair.i) * 12 + datepart('month', dp_pair.i), z), "
            "datepart('day', dp_pair.i), z) "
            "+ to_microseconds(datepart('hour', dp_pair.i) * 3600000000 "
            "+ datepart('minute', dp_pair.i) * 60000000 "
            "+ datepart('microseconds', dp_pair.i)) END",
        ),
    ),
    # x + i where only DuckDB knows x's type (a column, a subquery's value): each type
    # DuckDB would cast to a timestamptz has its own overload, so none is.
    ANY_PLUS_INTERVAL: (
        f"(x TIMESTAMPTZ, i, z) AS {S}.{TIMESTAMPTZ_PLUS}(x, i, z)",
        "(x TIMESTAMP, i, z) AS x + i",
        "(x DATE, i, z) AS x + i",
        "(x, i, z) AS x + i",
    ),
    TIMESTAMPTZ_PLUS_ANY: (
        f"(x, i INTERVAL, z) AS {S}.{TIMESTAMPTZ_PLUS}(x, i, z)",
        "(x, i, z) AS x + i",
    ),
    ANY_PLUS_ANY: _any_with_any(minus=False),
    ANY_MINUS_ANY: _any_with_any(minus=True),
    # x - y where only DuckDB knows one type, the other's a timestamptz, a timestamp or a
    # date: a timestamp or a date meeting a timestamptz is its local time in zone z.
    TIMESTAMPTZ_MINUS_ANY: (
        f"(x, y INTERVAL, z) AS {S}.{TIMESTAMPTZ_PLUS}(x, -y, z)",
        "(x, y TIMESTAMP, z) AS x - timezone(z, y)",
        "(x, y DATE, z) AS x - timezone(z, CAST(y AS TIMESTAMP))",
        "(x, y, z) AS x - y",
    ),
    ANY_MINUS_TIMESTAMPTZ: (
        "(x TIMESTAMPTZ, y, z) AS x - y",
        "(x TIMESTAMP, y, z) AS timezone(z, x) - y",
        "(x DATE, y, z) AS timezone(z, CAST(x AS TIMESTAMP)) - y",
        "(x, y, z) AS x - y",
    ),
    ANY_MINUS_LOCAL: (
        "(x TIMESTAMPTZ, y, z) AS x - timezone(z, CAST(y AS TIMESTAMP))",
        "(x TIMESTAMP, y, z) AS x - y",
        "(x DATE, y, z) AS x - y",
        "(x, y, z) AS x - y",
    ),
    LOCAL_MINUS_ANY: (
        "(x, y TIMESTAMPTZ, z) AS timezone(z, CAST(x AS TIMESTAMP)) - y",
        "(x, y TIMESTAMP, z) AS x - y",
        "(x, y DATE, z) AS x - y",
        "(x, y, z) AS x - y",
    ),
    # A timestamptz in JSON, as PostgreSQL writes it there: 2024-03-31T09:30:00+09:00.
    TIMESTAMPTZ_JSON: (
        "(x, z) AS "
        + _let(
            "dp_json",
            "x",
            "CASE WHEN NOT isfinite(dp_json) THEN CAST(dp_json AS VARCHAR) ELSE "
            + _let(
                "dp_json_offset",
                f"{S}.{ZONE_OFFSET}(dp_json, z)",
                "replace(replace(CAST(timezone(z, dp_json) AS VARCHAR), ' (BC)', ''), ' ', 'T') "
                "|| CASE WHEN dp_json_offset < 0 THEN '-' ELSE '+' END "
                "|| printf('%02d:%02d', abs(dp_json_offset) // 3600, "
                "abs(dp_json_offset) % 3600 // 60) "
                "|| CASE WHEN abs(dp_json_offset) % 60 <> 0 "
                "THEN printf(':%02d', abs(dp_json_offset) % 60) ELSE '' END "
                "|| CASE WHEN datepart('year', timezone(z, dp_json)) <= 0 THEN ' BC' "
                "ELSE '' END",
            )
            + " END",
        ),
    ),
    # date_trunc of a timestamp as PostgreSQL truncates it: centuries and millennia begin
    # in years 1, 1001, 2001 (DuckDB: 2000), decades and years BC as PostgreSQL counts them.
    "pg_to_year": (
        "(l, y) AS "
        + _let(
            "dp_in_year",
            "l",
            "date_trunc('year', dp_in_year) "
            "+ to_years(CAST(y - datepart('year', dp_in_year) AS INTEGER))",
        ),
    ),
    "pg_trunc_century": (
        "(l) AS "
        + _let(
            "dp_century",
            "l",
            f"{S}.pg_to_year(dp_century, CASE WHEN datepart('year', dp_century) > 0 "
            "THEN (datepart('year', dp_century) + 99) // 100 * 100 - 99 "
            "ELSE -((99 - (datepart('year', dp_century) - 1)) // 100) * 100 + 1 END)",
        ),
    ),
    "pg_trunc_millennium": (
        "(l) AS "
        + _let(
            "dp_millennium",
            "l",
            f"{S}.pg_to_year(dp_millennium, CASE WHEN datepart('year', dp_millennium) > 0 "
            "THEN (datepart('year', dp_millennium) + 999) // 1000 * 1000 - 999 "
            "ELSE -((999 - (datepart('year', dp_millennium) - 1)) // 1000) * 1000 + 1 END)",
        ),
    ),
    "pg_trunc_decade": (
        "(l) AS "
        + _let(
            "dp_decade",
            "l",
            f"{S}.pg_to_year(dp_decade, CASE WHEN datepart('year', dp_decade) > 0 "
            "THEN datepart('year', dp_decade) // 10 * 10 "
            "ELSE -((8 - (datepart('year', dp_decade) - 1)) // 10) * 10 END)",
        ),
    ),
    TRUNCATED_STAMP: (
        "(u, l) AS "
        + _let(
            "dp_local",
            "l",
            "CASE WHEN NOT isfinite(dp_local) THEN dp_local "
            f"WHEN u = 'century' THEN {S}.pg_trunc_century(dp_local) "
            f"WHEN u = 'millennium' THEN {S}.pg_trunc_millennium(dp_local) "
            f"WHEN u = 'decade' THEN {S}.pg_trunc_decade(dp_local) "
            "ELSE date_trunc(u, dp_local) END",
        ),
    ),
    TRUNCATED_TIMESTAMPTZ: (
        "(u, x, z) AS "
        + _let(
            "dp_truncated",
            "x",
            "CASE WHEN NOT isfinite(dp_truncated) THEN dp_truncated "
            f"WHEN u IN ({_TRUNCATED_CLOCK}) THEN dp_truncated - (timezone(z, dp_truncated) "
            f"- {S}.{TRUNCATED_STAMP}(u, timezone(z, dp_truncated))) "
            f"ELSE timezone(z, {S}.{TRUNCATED_STAMP}(u, timezone(z, dp_truncated))) END",
        ),
    ),
    TRUNCATED_ANY: (
        f"(u, x TIMESTAMPTZ, z) AS {S}.{TRUNCATED_TIMESTAMPTZ}(u, x, z)",
        f"(u, x TIMESTAMP, z) AS {S}.{TRUNCATED_STAMP}(u, x)",
        # date_trunc(text, date) is date_trunc(text, timestamptz) in PostgreSQL.
        f"(u, x DATE, z) AS {S}.{TRUNCATED_TIMESTAMPTZ}(u, timezone(z, CAST(x AS TIMESTAMP)), z)",
        "(u, x, z) AS date_trunc(u, x)",
    ),
    # x AT TIME ZONE zz where only DuckDB knows x's type; a date is a timestamptz (at its
    # midnight in the session's zone z) in PostgreSQL.
    AT_ZONE_ANY: (
        "(x TIMESTAMPTZ, zz, z) AS timezone(zz, x)",
        "(x TIMESTAMP, zz, z) AS timezone(zz, x)",
        "(x DATE, zz, z) AS timezone(zz, timezone(z, CAST(x AS TIMESTAMP)))",
        "(x, zz, z) AS timezone(zz, x)",
    ),
}

MACRO_NAMES = frozenset(_MACROS)


def zoned_macro_statements() -> list[str]:
    """CREATE MACRO statements, each after those it calls."""
    return [f"CREATE MACRO {S}.{name} {', '.join(bodies)}" for name, bodies in _MACROS.items()]
