"""Undeclared parameters typed by their context as PostgreSQL 15 types them, compared with
the ParameterDescription of a real PostgreSQL over the same tables; their stand-ins at
Describe; their values bound by those types."""

from __future__ import annotations

import struct

import psycopg
import pytest

from proxy import parameters
from proxy.backends import DeclaredType, column_digits, column_types
from proxy.parameter_type_rules import catalog_column_oids
from proxy.protocol import values as v
from proxy.seam import QueryError
from rewriter import ColumnPolicy, TablePolicy, build_catalog

#: The tables, as PostgreSQL declares them (and as information_schema reports them).
TABLES = {
    "patients": {
        "patient_id": ("bigint", None, None),
        "birth_year": ("integer", None, None),
        "sex": ("character varying", None, None),
        "income": ("double precision", None, None),
    },
    "visits": {
        "visit_id": ("bigint", None, None),
        "patient_id": ("bigint", None, None),
        "visit_date": ("date", None, None),
        "department": ("character varying", None, None),
        "diagnosis": ("character varying", None, None),
        "cost": ("double precision", None, None),
        "length_of_stay": ("integer", None, None),
        "small": ("smallint", None, None),
        "amount": ("numeric", 10, 2),
        "ts": ("timestamp without time zone", None, None),
        "tstz": ("timestamp with time zone", None, None),
        "flag": ("boolean", None, None),
        "note": ("text", None, None),
    },
}
DECLARED = {
    table: {
        name: DeclaredType(kind, None, precision, scale)
        for name, (kind, precision, scale) in columns.items()
    }
    for table, columns in TABLES.items()
}
CATALOG = build_catalog(
    column_types(DECLARED),
    {
        "patients": TablePolicy(privacy_unit="patient_id"),
        "visits": TablePolicy(
            privacy_unit="patient_id", columns={"cost": ColumnPolicy(lower=0, upper=100)}
        ),
    },
    schema="public",
    digits=column_digits(DECLARED),
)
COLUMNS = catalog_column_oids(CATALOG)

D, F8, I2, I4, I8, N, T = v.DATE, v.FLOAT8, v.INT2, v.INT4, v.INT8, v.NUMERIC, v.TEXT
TS, TZ, B = v.TIMESTAMP, v.TIMESTAMPTZ, v.BOOL
V = "SELECT COUNT(*) FROM visits WHERE "

#: Statements and the types PostgreSQL 15 describes their parameters with (measured;
#: test_the_cases_are_postgresql_s checks them against the server).
CASES: list[tuple[str, tuple[int, ...]]] = [
    (V + "visit_date >= $1", (D,)),
    (V + "cost BETWEEN $1 AND $2", (F8, F8)),
    (V + "length_of_stay NOT BETWEEN $1 AND $2", (I4, I4)),
    (V + "diagnosis LIKE $1", (T,)),
    (V + "diagnosis NOT ILIKE $1", (T,)),
    (V + "diagnosis ~ $1", (T,)),
    (V + "diagnosis LIKE $1 || '%'", (T,)),
    ("SELECT COUNT(*) FROM visits LIMIT $1 OFFSET $2", (I8, I8)),
    ("SELECT COUNT(*) FROM visits FETCH FIRST $1 ROWS ONLY", (I8,)),
    ("SELECT percentile_cont($1) WITHIN GROUP (ORDER BY cost) FROM visits", (F8,)),
    ("SELECT percentile_disc($1) WITHIN GROUP (ORDER BY cost) FROM visits", (F8,)),
    ("SELECT width_bucket(cost, 0, 100, $1) FROM visits", (I4,)),
    ("SELECT width_bucket(cost, $1, $2, $3) FROM visits", (F8, F8, I4)),
    ("SELECT width_bucket(length_of_stay, $1, $2, 5) FROM visits", (F8, F8)),
    ("SELECT width_bucket(amount, $1, $2, 5) FROM visits", (N, N)),
    ("SELECT date_trunc($1, visit_date) FROM visits", (T,)),
    ("SELECT to_char(visit_date, $1) FROM visits", (T,)),
    ("SELECT substring(diagnosis, $1, $2) FROM visits", (T, T)),  # regex substring there
    (V + "substring(diagnosis, 1, $1) = 'a'", (I4,)),
    (V + "substr(diagnosis, $1, $2) = 'a'", (I4, I4)),
    (V + "left(diagnosis, $1) = 'x'", (I4,)),
    ("SELECT $1", (T,)),
    ("SELECT $1 AS x, COUNT(*) FROM visits", (T,)),
    (V + "department = $1", (T,)),  # varchar: compared as text
    (V + "patient_id = $1", (I8,)),
    (V + "small = $1", (I2,)),
    (V + "amount = $1", (N,)),
    (V + "ts < $1", (TS,)),
    (V + "tstz < $1", (TZ,)),
    (V + "flag = $1", (B,)),
    (V + "note IN ($1)", (T,)),
    (V + "small IN ($1)", (I2,)),
    (V + "length_of_stay NOT IN ($1, $2)", (I4, I4)),
    (V + "length_of_stay IN ($1, 2.5)", (N,)),
    (V + "cost IN ($1, 2)", (F8,)),
    (V + "$1 < cost", (F8,)),
    (V + "cost * $1 > 10", (F8,)),
    (V + "cost > $1 * 2", (I4,)),
    (V + "cost > 2.5 * $1", (N,)),
    (V + "length_of_stay + $1 > 10", (I4,)),
    (V + "length_of_stay > 3000000000 + $1", (I8,)),
    (V + "small + small > $1", (I2,)),
    (V + "cost + length_of_stay > $1", (F8,)),
    (V + "visit_date - $1 > 5", (D,)),
    (V + "visit_date - visit_date > $1", (I4,)),
    (V + "visit_date + 1 > $1", (D,)),
    (V + "visit_date >= $1 AND visit_date < $1 + 30", (D,)),
    (V + "EXTRACT(YEAR FROM visit_date) = $1 AND date_part('month', visit_date) = $2", (N, F8)),
    (V + "date_part($1, visit_date) = 2024", (T,)),
    (V + "date_trunc('month', visit_date) = $1", (TZ,)),
    (V + "date_trunc('day', ts) = $1", (TS,)),
    (V + "$1 = $2", (T, T)),
    (V + "1 = $1 AND 'a' = $2 AND 1.5 < $3 AND NULL = $4", (I4, T, N, T)),
    (V + "cost > $1 AND $1 < 100", (F8,)),
    (V + "$1", (B,)),
    (V + "NOT $1 AND cost > 1 AND $2", (B, B)),
    (V + "(cost > $1) = $2", (F8, B)),
    (V + "(cost, length_of_stay) > ($1, $2)", (F8, I4)),
    (V + "length_of_stay = ANY(ARRAY[$1, 2])", (I4,)),
    (V + "COALESCE(cost, $1) > 1 AND NULLIF(length_of_stay, $2) > 1", (F8, I4)),
    (V + "greatest(cost, $1) > 3", (F8,)),
    (V + "CASE WHEN cost > $1 THEN 1 ELSE 0 END = 1", (F8,)),
    (V + "CASE department WHEN $1 THEN 1 ELSE 0 END = 1", (T,)),
    ("SELECT SUM(CASE WHEN cost > $1 THEN $2 ELSE 0 END) FROM visits", (F8, I4)),
    ("SELECT CASE WHEN cost > 1 THEN $1 END, COUNT(*) FROM visits GROUP BY 1", (T,)),
    ("SELECT SUM(length_of_stay * $1) FROM visits", (I4,)),
    (V + "abs(cost - $1) < 5 AND round(cost) = $2 AND floor(length_of_stay) = $3", (F8, F8, F8)),
    (V + "round(amount, $1) = 1 AND length(diagnosis) = $2", (I4, I4)),
    (V + "make_date($1, $2, $3) <= visit_date", (I4, I4, I4)),
    (V + "starts_with(diagnosis, $1) AND strpos(diagnosis, $2) > 0", (T, T)),
    (V + "current_date > $1 AND now() > $2 AND localtimestamp > $3", (D, TZ, TS)),
    (V + "cast($1 as date) > visit_date AND $2::varchar = department", (D, v.VARCHAR)),
    (V + "lower(diagnosis) = $1 AND to_char(visit_date, 'YYYY') = $2", (T, T)),
    (
        "SELECT AVG(length_of_stay) FROM visits HAVING SUM(length_of_stay) > $1 AND "
        "SUM(patient_id) > $2 AND AVG(cost) > $3 AND MIN(visit_date) > $4 AND COUNT(*) > $5",
        (I8, N, F8, D, I8),
    ),
    ("SELECT COUNT(*) FILTER (WHERE cost > $1) FROM visits WHERE length_of_stay > $1", (F8,)),
    (
        "SELECT COUNT(*) FROM visits v JOIN patients p ON v.patient_id = p.patient_id "
        "AND p.birth_year > $1 WHERE v.cost > $1 AND p.sex = $2",
        (I4, T),
    ),
    (
        "SELECT COUNT(*) FROM visits GROUP BY department HAVING COUNT(*) > $1 "
        "ORDER BY COUNT(*) LIMIT $1",
        (I8,),
    ),
    ("SELECT COUNT(*) FROM (SELECT cost * 2 AS c FROM visits) s WHERE s.c > $1", (F8,)),
    (
        "WITH s AS (SELECT cost AS c, length_of_stay FROM visits) "
        "SELECT COUNT(*) FROM s WHERE c > $1 AND length_of_stay < $2",
        (F8, I4),
    ),
    (
        "SELECT COUNT(*) FROM visits WHERE patient_id IN "
        "(SELECT patient_id FROM patients WHERE birth_year > $1) AND $2 IN "
        "(SELECT length_of_stay FROM visits)",
        (I4, I4),
    ),
    (
        V + "EXISTS (SELECT 1 FROM patients p WHERE p.patient_id = visits.patient_id "
        "AND p.birth_year > $1)",
        (I4,),
    ),
]
#: Where dpproxy says text and PostgreSQL another type, of the same Python values: the
#: catalog does not tell varchar from text columns; interval values are not taken (arrays:
#: tests/proxy/test_array_parameter_types.py).
DIFFERENT: list[tuple[str, tuple[int, ...], tuple[int, ...]]] = [
    (V + "department IN ($1, $2)", (T, T), (v.VARCHAR, v.VARCHAR)),
    (V + "COALESCE(diagnosis, $1) = 'a'", (T,), (v.VARCHAR,)),
    (V + "age(ts) > $1", (T,), (v.INTERVAL,)),
]


def types_of(sql: str, declared: list[int] | None = None) -> tuple[int, ...]:
    return parameters.prepare(sql, declared or [], COLUMNS).parameter_types


def test_the_catalog_gives_the_declared_types() -> None:
    assert COLUMNS["visits"] == {
        "visit_id": I8, "patient_id": I8, "visit_date": D, "department": T, "diagnosis": T,
        "cost": F8, "length_of_stay": I4, "small": I2, "amount": N, "ts": TS, "tstz": TZ,
        "flag": B, "note": T,
    }  # fmt: skip


@pytest.mark.parametrize(("sql", "expected"), CASES, ids=range(len(CASES)))
def test_undeclared_parameters_take_postgresql_s_types(sql: str, expected: tuple[int, ...]) -> None:
    assert types_of(sql) == expected


@pytest.mark.parametrize(("sql", "ours", "theirs"), DIFFERENT, ids=range(len(DIFFERENT)))
def test_where_dpproxy_says_text(sql: str, ours: tuple[int, ...], theirs: tuple[int, ...]) -> None:
    assert types_of(sql) == ours


def test_declared_and_cast_types_win() -> None:
    assert types_of(V + "cost > $1 AND visit_date > $2", [v.NUMERIC]) == (N, D)
    assert types_of(V + "cost > $1::numeric") == (N,)
    assert types_of(V + "$1 = $2", [v.INT8]) == (I8, I8)  # the other as the declared one
    assert types_of("SELECT $1::interval") == (T,)  # no interval values: text, as before


def test_without_the_catalog_columns_leave_parameters_text() -> None:
    parsed = parameters.prepare(V + "cost > $1 AND diagnosis LIKE $2 LIMIT $3", [])
    assert parsed.parameter_types == (T, T, I8)
    # The emulated pg_catalog's columns have PostgreSQL's types (name, oid): see
    # tests/proxy/test_catalog_parameter_types.py.
    assert types_of("SELECT oid FROM pg_type WHERE typname = $1 AND oid = $2") == (
        v.NAME,
        v.OID,
    )


def test_the_cases_are_postgresql_s(pg_schema: str, pg_dsn: str) -> None:
    """Every case's types are what PostgreSQL 15 describes (ParameterDescription)."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path = "{pg_schema}"')
        for table, columns in TABLES.items():
            listed = ", ".join(
                f"{name} {kind}" + (f"({p},{s})" if p is not None else "")
                for name, (kind, p, s) in columns.items()
            )
            conn.execute(f"CREATE TABLE {table} ({listed})")
        described: dict[str, tuple[int, ...]] = {}
        for sql, _, *_ in [*CASES, *DIFFERENT]:
            result = conn.pgconn.prepare(b"", sql.encode())
            assert result.status == psycopg.pq.ExecStatus.COMMAND_OK, (sql, result.error_message)
            found = conn.pgconn.describe_prepared(b"")
            described[sql] = tuple(found.param_type(i) for i in range(found.nparams))
    assert {sql: described[sql] for sql, _ in CASES} == dict(CASES)
    assert {sql: described[sql] for sql, _, _ in DIFFERENT} == {s: t for s, _, t in DIFFERENT}


# --- stand-ins at Describe -------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "described"),
    [
        (V + "diagnosis LIKE $1", V + "diagnosis LIKE 'a'"),
        ("SELECT COUNT(*) FROM visits LIMIT $1", "SELECT COUNT(*) FROM visits LIMIT 1"),
        ("SELECT COUNT(*) FROM visits LIMIT $1::int",
         "SELECT COUNT(*) FROM visits LIMIT CAST(1 AS INT)"),
        ("SELECT percentile_cont($1) WITHIN GROUP (ORDER BY cost) FROM visits",
         "SELECT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY cost) FROM visits"),
        ("SELECT percentile_cont($1::float8) WITHIN GROUP (ORDER BY cost) FROM visits",
         "SELECT PERCENTILE_CONT(CAST(0.5 AS DOUBLE PRECISION)) WITHIN GROUP (ORDER BY cost) "
         "FROM visits"),
        ("SELECT width_bucket(cost, $1, $2, $3) FROM visits",
         "SELECT WIDTH_BUCKET(cost, 0.0, 1.0, 1) FROM visits"),
        ("SELECT date_trunc($1, visit_date) FROM visits",
         "SELECT DATE_TRUNC('day', visit_date) FROM visits"),
        (V + "visit_date >= $1 AND cost BETWEEN $2 AND $3",
         V + "visit_date >= CAST('2000-01-01' AS DATE) AND cost BETWEEN 1.0 AND 1.0"),
        (V + "flag = $1 AND ts > $2",
         V + "flag = TRUE AND ts > CAST('2000-01-01 00:00:00' AS TIMESTAMP)"),
        ("SELECT $1 AS label, COUNT(*) FROM visits", "SELECT NULL AS label, COUNT(*) FROM visits"),
    ],
)  # fmt: skip
def test_describe_stands_in_values_every_check_takes(sql: str, described: str) -> None:
    assert parameters.describe_sql(parameters.prepare(sql, [], COLUMNS)) == described


def test_a_declared_text_stands_in_as_its_context_wants() -> None:
    # pgJDBC's setString declares varchar; psycopg's str, OID 0.
    sql = V + "visit_date >= $1::date AND cost > $2"
    parsed = parameters.prepare(sql, [v.VARCHAR, v.TEXT], COLUMNS)
    assert parameters.describe_sql(parsed) == (
        V + "visit_date >= CAST('2000-01-01' AS DATE) AND cost > '1'"
    )


# --- values bound by the inferred types -----------------------------------------------


def bound(sql: str, data: list[bytes | None], formats: list[int]) -> str:
    return parameters.bind(parameters.prepare(sql, [], COLUMNS), formats, data)


def test_binary_values_of_inferred_types() -> None:
    # asyncpg: a date, floats, an int, a text, encoded by the ParameterDescription.
    days = (2024 - 2000) * 365 + 6  # 2024-01-01: 8766 days after 2000-01-01
    sql = V + "visit_date >= $1 AND cost BETWEEN $2 AND $3 AND length_of_stay > $4 LIMIT $5"
    data = [
        struct.pack("!i", days),
        struct.pack("!d", 1.5),
        struct.pack("!d", 99.0),
        struct.pack("!i", 3),
        struct.pack("!q", 10),
    ]
    assert bound(sql, data, [1]) == (
        V + "visit_date >= CAST('2024-01-01' AS DATE) AND cost BETWEEN 1.5 AND 99.0 "
        "AND length_of_stay > 3 LIMIT 10"
    )


def test_text_values_of_inferred_types() -> None:
    sql = V + "cost > $1 AND visit_date >= $2 AND diagnosis LIKE $3 LIMIT $4"
    assert bound(sql, [b"100", b"2024-01-31", b"I%", b"5"], []) == (
        V + "cost > 100.0 AND visit_date >= CAST('2024-01-31' AS DATE) "
        "AND diagnosis LIKE 'I%' LIMIT 5"
    )
    # A text its type does not read binds as before, a quoted string the database reads.
    assert bound(V + "visit_date >= $1", [b"Jan 1 2024"], []) == V + "visit_date >= 'Jan 1 2024'"
    # One of the ISO 8601 forms PostgreSQL's date input reads is that date
    # (rewriter.datetime_input).
    assert bound(V + "visit_date >= $1", [b"2024-1-1T10:00Z"], []) == (
        V + "visit_date >= CAST('2024-01-01' AS DATE)"
    )
    assert bound(V + "cost > $1", [b"1e999x"], []) == V + "cost > '1e999x'"


def test_casts_and_binary_values_stay_strict() -> None:
    with pytest.raises(QueryError) as cast:
        bound(V + "cost > $1::int", [b"abc"], [])
    assert cast.value.sqlstate == "22P02"
    with pytest.raises(QueryError) as binary:
        bound(V + "visit_date >= $1", [b"\x00\x01"], [1])
    assert binary.value.sqlstate == "22P03"
    with pytest.raises(QueryError) as encoding:
        bound(V + "cost > $1", [b"\xff"], [])
    assert encoding.value.sqlstate == "22021"


def test_thousands_of_terms_are_typed_without_recursion() -> None:
    ors = V + " OR ".join(["cost = $1"] * 5000)
    sums = V + "length_of_stay > " + " + ".join(["1"] * 5000) + " + $1"
    assert types_of(ors) == (F8,)
    assert types_of(sums) == (I4,)
