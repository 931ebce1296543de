"""Grafana's table and column pickers (postgresMetaQuery.ts: showTables(), getSchema()),
answered as PostgreSQL 15 answers them. They read the search path with
``FROM generate_series(...) AS i, string_to_array(current_setting('search_path'), ',') s``
and split a table's name with parse_ident(): both were refused
(``dpproxy does not support the function string_to_array() in FROM``; parse_ident() did
not exist). A function of one value in FROM is one row, as in PostgreSQL; file and system
functions stay refused there."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from proxy.catalog.database import CatalogDatabase
from proxy.catalog.translate import CatalogRefused, translate
from tests.postgres_schema import scratch_schema
from tests.proxy.test_catalog_translate import SESSION, ask, demo_catalog

#: Grafana's search-path test, as postgresMetaQuery.ts writes it.
SEARCH_PATH = """
      quote_ident(table_schema) IN (
      SELECT
        CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
      FROM
        generate_series(
          array_lower(string_to_array(current_setting('search_path'),','),1),
          array_upper(string_to_array(current_setting('search_path'),','),1)
        ) as i,
        string_to_array(current_setting('search_path'),',') s
      )"""
SHOW_TABLES = f"""SELECT
    CASE WHEN {SEARCH_PATH}
      THEN quote_ident(table_name)
      ELSE quote_ident(table_schema) || '.' || quote_ident(table_name)
    END AS "table"
    FROM information_schema.tables
    WHERE quote_ident(table_schema) NOT IN ('information_schema','pg_catalog',
      '_timescaledb_cache','_timescaledb_catalog','_timescaledb_internal',
      '_timescaledb_config','timescaledb_information','timescaledb_experimental')
    ORDER BY CASE WHEN {SEARCH_PATH} THEN 0 ELSE 1 END, 1"""


def get_schema(table: str) -> str:
    """getSchema(table): the columns of a table named bare or schema-qualified."""
    return f"""SELECT quote_ident(column_name) AS "column", data_type AS "type"
    FROM information_schema.columns
    WHERE
      CASE WHEN array_length(parse_ident('{table}'),1) = 2
        THEN quote_ident(table_schema) = (parse_ident('{table}'))[1]
          AND quote_ident(table_name) = (parse_ident('{table}'))[2]
        ELSE quote_ident(table_name) = '{table}'
          AND {SEARCH_PATH}
      END"""


@pytest.fixture(scope="module")
def database() -> Iterator[CatalogDatabase]:
    database = CatalogDatabase(demo_catalog())
    yield database
    database.close()


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[tuple[psycopg.Connection[tuple[object, ...]], str]]:
    """PostgreSQL with demo_catalog's tables in a schema of their own, on its search path
    as public is on the session's."""
    with scratch_schema(pg_dsn) as (conn, schema):
        conn.execute(
            f'CREATE TABLE "{schema}".visits (visit_id bigint, patient_id bigint, '
            f'visit_date date, cost double precision); CREATE TABLE "{schema}".patients '
            "(patient_id bigint, sex text)"
        )
        conn.execute(f'SET search_path = "$user", "{schema}"')
        yield conn, schema


def test_show_tables_as_postgresql(
    database: CatalogDatabase, postgres: tuple[psycopg.Connection[tuple[object, ...]], str]
) -> None:
    conn, _ = postgres
    names, rows = ask(database, SHOW_TABLES)
    theirs = conn.execute(SHOW_TABLES).fetchall()
    assert names == ("table",)
    # The tables on the search path, unqualified (the server has other schemas' too).
    assert rows == [row for row in theirs if "." not in str(row[0])]
    assert rows == [("patients",), ("visits",)]


@pytest.mark.parametrize("table", ["visits", "patients", "nothing"])
def test_get_schema_of_a_bare_name_as_postgresql(
    database: CatalogDatabase,
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str],
    table: str,
) -> None:
    conn, _ = postgres
    names, rows = ask(database, get_schema(table))
    assert names == ("column", "type")
    assert rows == conn.execute(get_schema(table)).fetchall()


def test_get_schema_of_a_qualified_name_as_postgresql(
    database: CatalogDatabase, postgres: tuple[psycopg.Connection[tuple[object, ...]], str]
) -> None:
    conn, schema = postgres
    rows = ask(database, get_schema("public.visits"))[1]
    assert rows == conn.execute(get_schema(f"{schema}.visits")).fetchall()
    assert rows == [
        ("visit_id", "bigint"),
        ("patient_id", "bigint"),
        ("visit_date", "date"),
        ("cost", "double precision"),
    ]
    assert ask(database, get_schema("other.visits"))[1] == []


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM string_to_array('a,b', ',')",
        "SELECT * FROM string_to_array('a,b', ',') s",
        "SELECT * FROM string_to_array('a,b', ',') AS s(x)",
        "SELECT s, ordinality, s[2] FROM string_to_array('a,b', ',') WITH ORDINALITY s",
        "SELECT s.* FROM string_to_array('a,b', ',') WITH ORDINALITY AS s(x, n)",
        "SELECT s[i] AS part FROM generate_series(1, 3) AS i, string_to_array('x,y,z', ',') s "
        "ORDER BY i",
        "SELECT string_to_array FROM string_to_array(NULL, ',')",
        "SELECT trim(s[2]) FROM string_to_array(current_setting('search_path'), ',') s",
    ],
)
def test_a_function_of_one_value_in_from_is_one_row(
    database: CatalogDatabase, pg_dsn: str, sql: str
) -> None:
    ours = translate(sql, SESSION)
    assert ours is not None
    answer = database.run_blocking(ours.sql)
    with psycopg.connect(pg_dsn) as conn:
        conn.execute('SET search_path = "$user", public')
        cursor = conn.execute(sql)
        names = tuple(d.name for d in cursor.description or ())
        theirs = cursor.fetchall()
    assert (ours.column_names or tuple(answer.column_names)) == names
    assert answer.rows == theirs


def test_too_many_column_aliases_are_postgresqls_error(pg_dsn: str) -> None:
    sql = "SELECT * FROM string_to_array('a,b', ',') s(x, y)"
    with psycopg.connect(pg_dsn) as conn, pytest.raises(psycopg.Error) as theirs:
        conn.execute(sql)
    with pytest.raises(CatalogRefused) as ours:
        translate(sql, SESSION)
    assert ours.value.sqlstate == theirs.value.sqlstate == "42P10"
    assert ours.value.message == theirs.value.diag.message_primary


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM read_csv('/etc/passwd') s",
        "SELECT * FROM read_text('/etc/passwd')",
        "SELECT * FROM read_json('/etc/x.json') g, string_to_array('a', ',') s",
        "SELECT * FROM string_to_array('a', ',') s, read_parquet('/tmp/x.parquet') p",
        "SELECT * FROM pg_ls_dir('.')",
        "SELECT * FROM regexp_split_to_array('a,b', ',')",
    ],
)
def test_other_functions_in_from_stay_refused(sql: str) -> None:
    with pytest.raises(CatalogRefused, match=r"does not support the function \w+\(\) in FROM"):
        translate(sql, SESSION)


@pytest.mark.parametrize(
    "argument",
    [
        "'visits'",
        "'public.visits'",
        '\'  Public . "My""Table"  \'',
        "'a.b.c.d'",
        "'É1$x'",
        "'a b', false",
        "'a b', NULL",
        "NULL",
        "'X'::text",
    ],
)
def test_parse_ident_as_postgresql(database: CatalogDatabase, pg_dsn: str, argument: str) -> None:
    sql = f"SELECT parse_ident({argument})"
    with psycopg.connect(pg_dsn) as conn:
        theirs = conn.execute(sql).fetchall()
    assert ask(database, sql) == (("parse_ident",), theirs)


@pytest.mark.parametrize(
    "text", ["a.", ".a", '"a', '""', "a b", "1a", "", "a..b", "a. .b", '"x"y', "a.b."]
)
def test_parse_ident_errors_as_postgresql(pg_dsn: str, text: str) -> None:
    sql = f"SELECT parse_ident('{text}')"
    with psycopg.connect(pg_dsn) as conn, pytest.raises(psycopg.Error) as theirs:
        conn.execute(sql)
    with pytest.raises(CatalogRefused) as ours:
        translate(sql, SESSION)
    assert ours.value.sqlstate == theirs.value.sqlstate == "22023"
    assert ours.value.message == theirs.value.diag.message_primary
    assert ours.value.hint == theirs.value.diag.message_detail


def test_parse_ident_of_a_column_is_refused() -> None:
    with pytest.raises(CatalogRefused, match="parse_ident"):
        translate("SELECT parse_ident(relname) FROM pg_class", SESSION)
