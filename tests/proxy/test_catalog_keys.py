"""The emulated catalog shows what the database declares of the analyst's tables, as
PostgreSQL 15 shows it: NOT NULL columns, primary keys and unique constraints with their
indexes, foreign keys between tables the analyst sees; nothing of a table without a policy
(found reproducing Metabase's describe-table and SQLAlchemy's inspector).

The same schema is made in PostgreSQL (the reference) and in a DuckDB file; each backend
reads it as the server does when it starts (``schema_declared``, ``schema_keys``), and the
catalog built from it answers psql's, Metabase's and information_schema's queries as
PostgreSQL answers them on the reference."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import duckdb
import psycopg
import pytest

from proxy.backends import Backend, DeclaredKey, Schema, column_types
from proxy.backends.duckdb import DuckDBBackend
from proxy.backends.postgres import PostgresBackend
from proxy.catalog.database import CatalogDatabase
from proxy.catalog.keys import _object_name
from rewriter import TablePolicy, build_catalog
from tests.postgres_schema import scratch_schema
from tests.proxy.test_catalog_translate import ask

PgConnection = psycopg.Connection[tuple[object, ...]]

#: wards and salaries have no policy: nothing of them is shown, not even visits' foreign
#: key to wards nor salaries' to patients.
DDL = (
    "CREATE TABLE departments (department VARCHAR NOT NULL, building VARCHAR, "
    "PRIMARY KEY (department))",
    "CREATE TABLE patients (patient_id BIGINT NOT NULL, sex VARCHAR, birth_year INTEGER, "
    "PRIMARY KEY (patient_id))",
    "CREATE TABLE wards (ward_id INTEGER PRIMARY KEY, name VARCHAR NOT NULL)",
    "CREATE TABLE visits (visit_id BIGINT NOT NULL, "
    "patient_id BIGINT NOT NULL REFERENCES patients (patient_id), visit_date DATE NOT NULL, "
    "department VARCHAR REFERENCES departments (department), code INTEGER, "
    "ward INTEGER REFERENCES wards (ward_id), "
    "PRIMARY KEY (visit_id), UNIQUE (code, visit_date))",
    "CREATE TABLE salaries (patient_id BIGINT PRIMARY KEY REFERENCES patients (patient_id), "
    "salary BIGINT NOT NULL)",
)
#: What PostgreSQL would show if the database had only what the analyst may see (and no
#: unique constraint: the emulation does not show them yet, proxy.catalog.keys).
SEEN = tuple(
    statement.replace(" REFERENCES wards (ward_id)", "").replace(", UNIQUE (code, visit_date)", "")
    for statement in DDL
    if not statement.startswith(("CREATE TABLE wards", "CREATE TABLE salaries"))
)
POLICIES = {
    "departments": TablePolicy(public=True),
    "patients": TablePolicy(privacy_unit="patient_id"),
    "visits": TablePolicy(privacy_unit="patient_id"),
}
SHOWN = ("departments", "patients", "visits")


@pytest.fixture(scope="module")
def reference(pg_dsn: str) -> Iterator[tuple[PgConnection, str]]:
    """PostgreSQL with what the analyst may see of the schema (SEEN), on the search path
    as public is on the session's."""
    with scratch_schema(pg_dsn) as (conn, schema):
        conn.execute(f'SET search_path = "{schema}"')
        for statement in SEEN:
            conn.execute(statement)
        conn.execute(f'SET search_path = "$user", "{schema}"')
        yield conn, schema


@pytest.fixture(scope="module")
def postgres_schema(pg_dsn: str) -> Iterator[str]:
    """The whole schema (DDL) in PostgreSQL, for the PostgreSQL backend."""
    with scratch_schema(pg_dsn) as (conn, schema):
        conn.execute(f'SET search_path = "{schema}"')
        for statement in DDL:
            conn.execute(statement)
        yield schema


async def _read(backend: Backend, schema: str) -> tuple[Schema, tuple[DeclaredKey, ...]]:
    try:
        return await backend.schema_declared(schema), await backend.schema_keys(schema)
    finally:
        await backend.close()


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def database(
    request: pytest.FixtureRequest,
    pg_dsn: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[CatalogDatabase]:
    """The catalog of the schema as the backend reads it when dpproxy starts."""
    backend: Backend
    if request.param == "duckdb":
        path = Path(tmp_path_factory.mktemp("keys")) / "keys.duckdb"
        with duckdb.connect(str(path)) as conn:
            for statement in DDL:
                conn.execute(statement)
        backend, schema = DuckDBBackend(path, timeout_seconds=10), "main"
    else:
        backend = PostgresBackend(pg_dsn, pool_size=1, timeout_seconds=10)
        schema = request.getfixturevalue("postgres_schema")
    declared, keys = asyncio.run(_read(backend, schema))
    catalog = build_catalog(column_types(declared), POLICIES, schema=schema)
    database = CatalogDatabase(catalog, declared, keys=keys)
    yield database
    database.close()


def _ours(database: CatalogDatabase, sql: str) -> list[tuple[object, ...]]:
    return ask(database, sql)[1]


def _theirs(reference: tuple[PgConnection, str], sql: str) -> list[tuple[object, ...]]:
    """PostgreSQL's rows, its schema's name written public as the emulation names it."""
    conn, schema = reference
    rows = conn.execute(sql.replace("'public'", f"'{schema}'")).fetchall()
    return [
        tuple(
            value.replace(f"{schema}.", "public.").replace(schema, "public")
            if isinstance(value, str)
            else value
            for value in row
        )
        for row in rows
    ]


def _table_oid(ask_rows: list[tuple[object, ...]]) -> object:
    assert len(ask_rows) == 1, ask_rows
    return ask_rows[0][0]


#: psql's first query of \d NAME: the table's OID.
FIND = (
    "SELECT c.oid FROM pg_catalog.pg_class c WHERE c.relname = '{table}' "
    "AND pg_catalog.pg_table_is_visible(c.oid)"
)
#: psql 15's \d queries (describeOneTableDetails), the table's OID filled in.
PSQL_COLUMNS = """SELECT a.attname,
  pg_catalog.format_type(a.atttypid, a.atttypmod),
  a.attnotnull
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = '{oid}' AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum"""
PSQL_TABLE = """SELECT c.relchecks, c.relkind, c.relhasindex, c.relhasrules
FROM pg_catalog.pg_class c WHERE c.oid = '{oid}'"""
PSQL_INDEXES = """SELECT c2.relname, i.indisprimary, i.indisunique, i.indisclustered, i.indisvalid, pg_catalog.pg_get_indexdef(i.indexrelid, 0, true),
  pg_catalog.pg_get_constraintdef(con.oid, true), contype, condeferrable, condeferred, i.indisreplident, c2.reltablespace
FROM pg_catalog.pg_class c, pg_catalog.pg_class c2, pg_catalog.pg_index i
  LEFT JOIN pg_catalog.pg_constraint con ON (conrelid = i.indrelid AND conindid = i.indexrelid AND contype IN ('p','u','x'))
WHERE c.oid = '{oid}' AND c.oid = i.indrelid AND i.indexrelid = c2.oid
ORDER BY i.indisprimary DESC, c2.relname"""  # noqa: E501
PSQL_FOREIGN_KEYS = """SELECT true as sametable, conname,
  pg_catalog.pg_get_constraintdef(r.oid, true) as condef,
  conrelid::pg_catalog.regclass AS ontable
FROM pg_catalog.pg_constraint r
WHERE r.conrelid = '{oid}' AND r.contype = 'f'
     AND conparentid = 0
ORDER BY conname"""
PSQL_REFERENCED_BY = """SELECT conname, conrelid::pg_catalog.regclass AS ontable,
       pg_catalog.pg_get_constraintdef(oid, true) AS condef
  FROM pg_catalog.pg_constraint c
 WHERE confrelid = '{oid}'
       AND contype = 'f' AND conparentid = 0
ORDER BY conname"""


@pytest.mark.parametrize("table", SHOWN)
@pytest.mark.parametrize(
    "query", [PSQL_COLUMNS, PSQL_TABLE, PSQL_INDEXES, PSQL_FOREIGN_KEYS, PSQL_REFERENCED_BY]
)
def test_psql_describe_as_postgresql(
    database: CatalogDatabase, reference: tuple[PgConnection, str], table: str, query: str
) -> None:
    ours = _table_oid(_ours(database, FIND.format(table=table)))
    theirs = _table_oid(_theirs(reference, FIND.format(table=table)))
    assert _ours(database, query.format(oid=ours)) == _theirs(reference, query.format(oid=theirs))


def test_psql_describe_shows_the_keys(database: CatalogDatabase) -> None:
    oid = _table_oid(_ours(database, FIND.format(table="visits")))
    assert [row[0] for row in _ours(database, PSQL_INDEXES.format(oid=oid))] == ["visits_pkey"]
    assert [row[1:3] for row in _ours(database, PSQL_FOREIGN_KEYS.format(oid=oid))] == [
        ("visits_department_fkey", "FOREIGN KEY (department) REFERENCES departments(department)"),
        ("visits_patient_id_fkey", "FOREIGN KEY (patient_id) REFERENCES patients(patient_id)"),
    ]
    patients = _table_oid(_ours(database, FIND.format(table="patients")))
    assert _ours(database, PSQL_REFERENCED_BY.format(oid=patients)) == [
        (
            "visits_patient_id_fkey",
            "visits",
            "FOREIGN KEY (patient_id) REFERENCES patients(patient_id)",
        )
    ]


def test_no_triggers_for_psql(database: CatalogDatabase) -> None:
    """PostgreSQL's relhastriggers is true for the tables of a foreign key; psql's \\d then
    lists their triggers with pg_partition_ancestors() in FROM, which the emulation does
    not read: false, so that \\d answers (without the foreign keys drivers see)."""
    rows = _ours(
        database,
        "SELECT relname, relhastriggers FROM pg_catalog.pg_class "
        "WHERE relnamespace = 2200 AND relkind = 'r' ORDER BY 1",
    )
    assert rows == [(table, False) for table in SHOWN]


#: Metabase's describe-fields and describe-fks (driver postgres), for schema public.
METABASE_FIELDS = """SELECT "c"."column_name" AS "name",
  "c"."table_name" AS "table-name",
  "pk"."column_name" IS NOT NULL AS "pk?",
  (("column_default" IS NULL) OR (LOWER("column_default") = 'null')) AND ("is_nullable" = 'NO') AND NOT ((("column_default" IS NOT NULL) AND ("column_default" LIKE '%nextval(%')) OR ("is_identity" <> 'NO')) AS "database-required"
FROM "information_schema"."columns" AS "c"
LEFT JOIN (SELECT "tc"."table_schema", "tc"."table_name", "kc"."column_name"
  FROM "information_schema"."table_constraints" AS "tc"
  INNER JOIN "information_schema"."key_column_usage" AS "kc"
    ON ("tc"."constraint_name" = "kc"."constraint_name") AND ("tc"."table_schema" = "kc"."table_schema") AND ("tc"."table_name" = "kc"."table_name")
  WHERE "tc"."constraint_type" = 'PRIMARY KEY') AS "pk"
  ON ("c"."table_schema" = "pk"."table_schema") AND ("c"."table_name" = "pk"."table_name") AND ("c"."column_name" = "pk"."column_name")
WHERE ("c"."table_schema" = 'public') AND "c"."table_name" IN ('departments', 'patients', 'visits')
ORDER BY "table-name" ASC, "c"."ordinal_position" ASC"""  # noqa: E501
METABASE_FOREIGN_KEYS = """SELECT "fk_ns"."nspname" AS "fk-table-schema", "fk_table"."relname" AS "fk-table-name", "fk_column"."attname" AS "fk-column-name", "pk_ns"."nspname" AS "pk-table-schema", "pk_table"."relname" AS "pk-table-name", "pk_column"."attname" AS "pk-column-name"
FROM "pg_constraint" AS "c"
INNER JOIN "pg_class" AS "fk_table" ON "c"."conrelid" = "fk_table"."oid"
INNER JOIN "pg_namespace" AS "fk_ns" ON "c"."connamespace" = "fk_ns"."oid"
INNER JOIN "pg_attribute" AS "fk_column" ON "c"."conrelid" = "fk_column"."attrelid"
INNER JOIN "pg_class" AS "pk_table" ON "c"."confrelid" = "pk_table"."oid"
INNER JOIN "pg_namespace" AS "pk_ns" ON "pk_table"."relnamespace" = "pk_ns"."oid"
INNER JOIN "pg_attribute" AS "pk_column" ON "c"."confrelid" = "pk_column"."attrelid"
WHERE fk_ns.nspname !~ '^information_schema|catalog_history|pg_' AND ("c"."contype" = 'f'::char) AND ("fk_ns"."nspname" = 'public')
AND "fk_column"."attnum" = ANY ("c"."conkey") AND "pk_column"."attnum" = ANY ("c"."confkey")
AND "fk_table"."relname" IN ('departments', 'patients', 'visits')
ORDER BY "fk-table-schema" ASC, "fk-table-name" ASC, "fk-column-name" ASC"""  # noqa: E501
INFORMATION_SCHEMA = (
    "SELECT constraint_schema, constraint_name, table_schema, table_name, constraint_type, "
    "is_deferrable, initially_deferred, enforced, nulls_distinct "
    "FROM information_schema.table_constraints WHERE table_schema = 'public' "
    "AND constraint_type <> 'CHECK' AND table_name IN ('departments', 'patients', 'visits') "
    "ORDER BY table_name, constraint_name",
    "SELECT table_name, count(*) FROM information_schema.table_constraints "
    "WHERE table_schema = 'public' AND constraint_type = 'CHECK' "
    "AND table_name IN ('departments', 'patients', 'visits') GROUP BY table_name ORDER BY 1",
    "SELECT t.table_name, c.check_clause FROM information_schema.check_constraints c "
    "JOIN information_schema.table_constraints t ON t.constraint_name = c.constraint_name "
    "AND t.constraint_schema = c.constraint_schema WHERE t.table_schema = 'public' "
    "AND t.table_name IN ('departments', 'patients', 'visits') ORDER BY 1, 2",
    "SELECT constraint_schema, constraint_name, table_schema, table_name, column_name, "
    "ordinal_position, position_in_unique_constraint FROM information_schema.key_column_usage "
    "WHERE table_schema = 'public' AND table_name IN ('departments', 'patients', 'visits') "
    "ORDER BY constraint_name, ordinal_position",
    "SELECT table_schema, table_name, column_name, constraint_schema, constraint_name "
    "FROM information_schema.constraint_column_usage WHERE constraint_schema = 'public' "
    "ORDER BY constraint_name, column_name",
    "SELECT constraint_schema, constraint_name, unique_constraint_schema, "
    "unique_constraint_name, match_option, update_rule, delete_rule "
    "FROM information_schema.referential_constraints WHERE constraint_schema = 'public' "
    "ORDER BY constraint_name",
    "SELECT table_name, column_name, is_nullable FROM information_schema.columns "
    "WHERE table_schema = 'public' AND table_name IN ('departments', 'patients', 'visits') "
    "ORDER BY table_name, ordinal_position",
    "SELECT schemaname, tablename, indexname, indexdef FROM pg_catalog.pg_indexes "
    "WHERE schemaname = 'public' AND tablename IN ('departments', 'patients', 'visits') "
    "ORDER BY indexname",
    "SELECT tablename, hasindexes, hasrules, rowsecurity FROM pg_catalog.pg_tables "
    "WHERE schemaname = 'public' AND tablename IN ('departments', 'patients', 'visits') "
    "ORDER BY tablename",
)


@pytest.mark.parametrize("sql", [METABASE_FIELDS, METABASE_FOREIGN_KEYS, *INFORMATION_SCHEMA])
def test_clients_queries_as_postgresql(
    database: CatalogDatabase, reference: tuple[PgConnection, str], sql: str
) -> None:
    assert _ours(database, sql) == _theirs(reference, sql)


def test_metabase_sees_the_primary_keys(database: CatalogDatabase) -> None:
    keys = [(row[1], row[0]) for row in _ours(database, METABASE_FIELDS) if row[2]]
    assert keys == [
        ("departments", "department"),
        ("patients", "patient_id"),
        ("visits", "visit_id"),
    ]


def test_nothing_of_the_hidden_tables(database: CatalogDatabase) -> None:
    """wards and salaries (no policy) have keys and foreign keys: none is shown, nor
    visits' foreign key to wards."""
    names = [
        str(row[0])
        for sql in (
            "SELECT conname FROM pg_catalog.pg_constraint",
            "SELECT relname FROM pg_catalog.pg_class WHERE relkind = 'i'",
            "SELECT constraint_name FROM information_schema.table_constraints",
            "SELECT indexname FROM pg_catalog.pg_indexes",
            "SELECT table_name FROM information_schema.constraint_column_usage",
        )
        for row in _ours(database, sql)
    ]
    assert names
    assert not [name for name in names if "ward" in name or "salar" in name]
    constraints = _ours(database, "SELECT count(*) FROM pg_catalog.pg_constraint")
    assert constraints == [(5,)]  # 3 primary keys, 2 foreign keys (no unique: keys.py)


@pytest.mark.parametrize(
    ("table", "columns", "label"),
    [
        ("stays", None, "pkey"),
        ("t" * 70, None, "pkey"),
        ("stays", "code_visit_date", "key"),
        ("a" * 40, "b" * 40, "key"),
        ("a" * 10, "b" * 60, "fkey"),
        ("é" * 31, "c", "key"),
    ],
)
def test_default_names_as_postgresql(
    reference: tuple[PgConnection, str], table: str, columns: str | None, label: str
) -> None:
    """A name the database does not give (DuckDB's) is made as PostgreSQL makes it
    (makeObjectName): cut to 63 bytes, the longer part first."""
    conn, _ = reference
    # PostgreSQL's makeObjectName is not callable from SQL: the name it gives the key of a
    # new table is compared (the table's and the column's names cut to 63 bytes first).
    row = conn.execute("SELECT %s::name, %s::name", (table, columns or "")).fetchone()
    assert row is not None
    name_table, name_columns = str(row[0]), str(row[1])
    ours = _object_name(name_table, None if columns is None else name_columns, label)
    assert len(ours.encode()) <= 63
    conn.execute("BEGIN")
    try:
        quoted_table = '"' + name_table + '"'
        if label == "fkey":
            conn.execute(f'CREATE TABLE "{name_table}_r" (x integer PRIMARY KEY)')
        column = '"' + (name_columns or "x") + '"'
        constraint = {
            "pkey": f"PRIMARY KEY ({column})",
            "key": f"UNIQUE ({column})",
            "fkey": f'FOREIGN KEY ({column}) REFERENCES "{name_table}_r" (x)',
        }[label]
        conn.execute(f"CREATE TABLE {quoted_table} ({column} integer, {constraint})")
        kind = {"pkey": "p", "key": "u", "fkey": "f"}[label]
        theirs = conn.execute(
            "SELECT conname FROM pg_catalog.pg_constraint WHERE conrelid = %s::regclass "
            "AND contype = %s",
            (quoted_table, kind),
        ).fetchone()
    finally:
        conn.execute("ROLLBACK")
    assert theirs is not None and ours == theirs[0]
