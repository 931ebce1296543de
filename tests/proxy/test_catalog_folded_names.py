"""The names of a catalog query's output columns as PostgreSQL gives them: an unquoted
column name or alias folded to lower case, a quoted one as written. Power BI's
``select TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE from INFORMATION_SCHEMA.tables`` named its
columns "TABLE_SCHEMA"... (PostgreSQL: table_schema...)."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from proxy.catalog.database import CatalogDatabase
from proxy.catalog.translate import translate
from tests.proxy.test_catalog_translate import SESSION, demo_catalog

QUERIES = [
    "SELECT TABLE_NAME FROM information_schema.tables LIMIT 0",
    "select TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE from INFORMATION_SCHEMA.tables "
    "where TABLE_SCHEMA not in ('information_schema', 'pg_catalog') "
    "order by TABLE_SCHEMA, TABLE_NAME LIMIT 0",
    "select COLUMN_NAME, ORDINAL_POSITION, IS_NULLABLE, case when (data_type like "
    "'%unsigned%') then DATA_TYPE || ' unsigned' else DATA_TYPE end as DATA_TYPE from "
    "INFORMATION_SCHEMA.columns where TABLE_SCHEMA = 'public' and TABLE_NAME = 'visits' "
    "order by TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION LIMIT 0",
    'SELECT t.TABLE_NAME, T."table_schema", c.RelName AS RN, c.oid AS "OID" '
    "FROM information_schema.tables t, pg_class c LIMIT 0",
    'SELECT "table_name" AS "Table", table_type AS Kind FROM information_schema.tables LIMIT 0',
    "SELECT (SELECT RELNAME FROM pg_class LIMIT 1), (SELECT RELKIND AS KIND FROM pg_class "
    'LIMIT 1), (SELECT 1 AS "One")',
    "SELECT NSPNAME FROM pg_namespace UNION ALL SELECT RELNAME FROM pg_class LIMIT 0",
    "SELECT * FROM (SELECT RELNAME AS RN, RELKIND FROM pg_class) Q LIMIT 0",
    "WITH X AS (SELECT TYPNAME AS TN FROM pg_type) SELECT * FROM x LIMIT 0",
]


@pytest.fixture(scope="module")
def database() -> Iterator[CatalogDatabase]:
    database = CatalogDatabase(demo_catalog())
    yield database
    database.close()


@pytest.mark.parametrize("sql", QUERIES)
def test_output_names_as_postgresql(database: CatalogDatabase, pg_dsn: str, sql: str) -> None:
    translation = translate(sql, SESSION)
    assert translation is not None
    answer = database.run_blocking(translation.sql)
    ours = translation.column_names or tuple(answer.column_names)
    with psycopg.connect(pg_dsn) as conn:
        cursor = conn.execute(sql)
        theirs = tuple(d.name for d in cursor.description or ())
    assert ours == theirs
