"""Column names of catalog answers for SQL that sqlglot reads as a node of another name,
compared with the real PostgreSQL 15's.

Before: ``SELECT position('a' in 'banana')`` and ``strpos('ab', 'b')`` were named
str_position (PostgreSQL: position, strpos), ``substr`` substring, every trim trim (btrim,
ltrim, rtrim), lpad and rpad pad, ``ceiling`` ceil, ``power``/``pow``/``mod``/``corr``
?column?, ``log10`` log, ``to_date`` str_to_date, ``array_length`` array_size, ``unnest``
explode, ``generate_series`` exploding_generate_series, ``string_agg`` group_concat,
``bit_and`` bitwise_and_agg, ``var_pop`` variance_pop, ``to_hex`` hex; a window function,
an aggregate WITHIN GROUP and a subscript ?column?; and a cast its type as sqlglot spells
it (``1::int`` int, ``::double precision``, ``::numeric(5,2)`` decimal(5, 2), ``::bool``
boolean, ``::varchar(3)`` varchar(3), ``::char(3)`` char(3)) where PostgreSQL writes the
type's own name (int4, float8, numeric, bool, varchar, bpchar).
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from proxy.catalog.database import CatalogDatabase
from proxy.catalog.datetimes import session_zone
from proxy.catalog.translate import SessionValues, translate
from tests.proxy.test_catalog_translate import demo_catalog

Connection = psycopg.Connection[tuple[object, ...]]

pytestmark = pytest.mark.postgres

QUERIES = [
    "SELECT position('a' in 'banana'), strpos('ab', 'b')",
    "SELECT substr('abc', 1, 1), substring('abc' from 1 for 1), substring('abc', 1, 1), "
    "substring('abc' from 2), substring('abc' for 2)",
    "SELECT trim(' a '), btrim(' a '), ltrim(' a'), rtrim('a '), trim(leading 'x' from 'xa'), "
    "trim(trailing from 'a  '), trim(both 'x' from 'xax'), trim(from ' a ')",
    "SELECT char_length('a'), character_length('a'), length('a')",
    "SELECT overlay('abc' placing 'x' from 1 for 1), extract(year from date '2024-01-01'), "
    "date_part('year', date '2024-01-01')",
    "SELECT lpad('a', 3), rpad('a', 3), concat('a', 'b'), split_part('a,b', ',', 1)",
    "SELECT ceil(1.2), ceiling(1.2), power(2, 3), pow(2, 3), 2 ^ 3, mod(5, 3), 5 % 3, "
    "log(10), log10(10), ln(2)",
    "SELECT to_date('2024-01-01', 'YYYY-MM-DD'), to_char(date '2024-01-01', 'YYYY'), to_hex(255)",
    "SELECT array_length(ARRAY[1, 2], 1), unnest(ARRAY[1])",
    "SELECT generate_series(1, 1)",
    "SELECT string_agg(x, ',') FROM (VALUES ('a')) t(x)",
    "SELECT bool_and(true), bool_or(true), bit_and(x), bit_or(x), var_pop(x), variance(x), "
    "corr(x, x) FROM (VALUES (1), (2)) t(x)",
    "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY x), mode() WITHIN GROUP (ORDER BY x), "
    "count(*) FILTER (WHERE x > 0) FROM (VALUES (1)) t(x)",
    "SELECT row_number() OVER (), rank() OVER (), lag(1) OVER (), sum(1) OVER ()",
    "SELECT (ARRAY[1, 2])[1], (ARRAY[1, 2])[1:2], (1::int), ((2))",
    "SELECT 1::int, 1::integer, 1::int4, 1::smallint, 1::int2, 1::bigint, 1::int8",
    "SELECT 1::float, 1::float8, 1::double precision, 1::real, 1::float4, 1::float(3), "
    "1::float(30)",
    "SELECT 1::numeric, 1::decimal, 1::numeric(5, 2), 1::dec, true::bool, true::boolean",
    "SELECT 'a'::varchar, 'a'::varchar(3), 'a'::character varying(3), 'a'::char, 'a'::char(3), "
    "'a'::character(2), 'a'::bpchar, 'a'::text, 'a'::name, CAST('a' AS varchar(2))",
    "SELECT '2024-01-01'::date, '2024-01-01'::timestamp, '2024-01-01'::timestamptz, "
    "'2024-01-01'::timestamp with time zone, '10:00'::time, '1 day'::interval, 'a'::bytea",
    "SELECT '{1}'::int[], '{a}'::text[], ARRAY[1]::int[], 1::pg_catalog.int4",
]


@pytest.fixture(scope="module")
def database() -> CatalogDatabase:
    return CatalogDatabase(demo_catalog())


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[Connection]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


def _names(database: CatalogDatabase, sql: str) -> list[str]:
    translation = translate(sql, SessionValues("alice", "demo", "PostgreSQL 15", {}))
    assert translation is not None and translation.column_names is not None, sql
    output = database.run_blocking(translation.sql, zone=session_zone("UTC"))
    assert len(output.column_types) == len(translation.column_names)
    return list(translation.column_names)


@pytest.mark.parametrize("sql", QUERIES)
def test_column_names_are_postgresqls(
    database: CatalogDatabase, postgres: Connection, sql: str
) -> None:
    cursor = postgres.execute(sql)
    assert cursor.description is not None
    assert _names(database, sql) == [column.name for column in cursor.description]
