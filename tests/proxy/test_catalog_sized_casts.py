"""Casts to varchar(n), char(n) and bytea in catalog queries, compared with the real
PostgreSQL 15.

Before: ``'abcdefgh'::varchar(5)`` kept the whole text (PostgreSQL: abcde), ``'ab'::char(5)``
was not padded (PostgreSQL's bpchar: 'ab   '), ``'abc'::char`` was not char(1) ('a'); a
parameter cast so ($1::varchar(5)) the same. ``'\\x0102'::bytea`` was 01 30 32 (DuckDB
read \\x01 as its own escape and 02 as text) where PostgreSQL reads two bytes, and the
escape format (``'a\\\\000b'``) was not read as PostgreSQL's byteain reads it; text that
byteain refuses is refused with its error.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import psycopg
import pytest

from proxy.catalog.database import CatalogDatabase
from proxy.catalog.datetimes import session_zone
from proxy.catalog.text import pg_text
from proxy.catalog.translate import CatalogRefused, SessionValues, translate
from tests.proxy.test_catalog_translate import demo_catalog

Connection = psycopg.Connection[tuple[object, ...]]

pytestmark = pytest.mark.postgres

SESSION = SessionValues("alice", "demo", "PostgreSQL 15", {"timezone": "UTC"})

QUERIES = [
    "SELECT 'abcdefgh'::varchar(5), 'ab'::char(5), 'abc'::char, 'abc'::character, "
    "'abc'::character(2), 'a  '::bpchar, ' ab  '::char(3), 'abcdef'::varchar(3)::char(5)",
    "SELECT 'abc'::varchar, CAST('abcdef' AS character varying(2)), NULL::char(3), "
    "12345::varchar(2), 'é́xyz'::varchar(2), 'ab'::char(4) AS named, ('ab'::char(3))",
    # A bpchar's trailing spaces do not count where it is compared, joined or cast.
    "SELECT 'ab'::char(5) || 'x', 'ab'::char(5) = 'ab', 'ab'::char(5)::text, "
    "'ab'::char(5) LIKE 'ab%', 'ab'::char(5)::varchar || '|'",
    "SELECT x FROM (SELECT 'ab'::char(4) AS x) t",
    "SELECT relname::varchar(3), relname::char(10) FROM pg_class WHERE relname = 'pg_class'",
    "SELECT '\\x0102'::bytea, 'a\\\\000b\\101\\\\'::bytea, ''::bytea, '\\x'::bytea, "
    "'\\x 01 02 '::bytea, 'é'::bytea, '\\xAbcD'::bytea, 'abc'::bytea",
]
REFUSED = ["\\x0g", "\\x012", "a\\b", "\\X01", "\\x0 1", "a\\400", "a\\09", "\\"]


@pytest.fixture(scope="module")
def database() -> CatalogDatabase:
    return CatalogDatabase(demo_catalog())


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[Connection]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


def _ours(
    database: CatalogDatabase, sql: str, parameters: Sequence[str | None] = ()
) -> list[str | None]:
    translation = translate(sql, SESSION, parameters)
    assert translation is not None, sql
    output = database.run_blocking(translation.sql, zone=session_zone("UTC"))
    return [pg_text(value) for value in output.rows[0]]


def _theirs(postgres: Connection, sql: str, parameters: Sequence[str] = ()) -> list[str | None]:
    cursor = postgres.cursor()
    cursor.execute(sql.replace("$1", "%(p)s"), {"p": parameters[0]} if parameters else None)
    result = cursor.pgresult
    assert result is not None and cursor.description is not None
    cells = [result.get_value(0, i) for i in range(len(cursor.description))]
    return [None if cell is None else bytes(cell).decode() for cell in cells]


@pytest.mark.parametrize("sql", QUERIES)
def test_values_are_postgresqls(database: CatalogDatabase, postgres: Connection, sql: str) -> None:
    assert _ours(database, sql) == _theirs(postgres, sql)


@pytest.mark.parametrize(
    ("sql", "value"),
    [
        ("SELECT $1::varchar(5)", "abcdefgh"),
        ("SELECT $1::char(5)", "ab"),
        ("SELECT $1::char", "abc"),
        ("SELECT $1::bytea", "\\x0102"),
        ("SELECT $1::bytea", "a\\\\000b\\101"),
        ("SELECT length($1::char(5)), $1::varchar(2) = 'ab'", "ab"),
    ],
)
def test_parameters_are_cast_as_postgresql_casts_them(
    database: CatalogDatabase, postgres: Connection, sql: str, value: str
) -> None:
    assert _ours(database, sql, [value]) == _theirs(postgres, sql, [value])


@pytest.mark.parametrize("text", REFUSED)
def test_bytea_text_postgresql_refuses_is_refused_with_its_error(
    postgres: Connection, text: str
) -> None:
    with pytest.raises(psycopg.Error) as theirs:
        postgres.execute("SELECT %s::text::bytea", (text,))
    with pytest.raises(CatalogRefused) as ours:
        translate("SELECT '" + text.replace("'", "''") + "'::bytea", SESSION)
    assert (ours.value.sqlstate, ours.value.message) == (
        theirs.value.sqlstate,
        theirs.value.diag.message_primary,
    )


@pytest.mark.parametrize(
    "kind", ["varchar(0)", "char(0)", "character(0)", "bpchar(0)", "varchar(10485761)"]
)
def test_lengths_postgresql_refuses_are_refused_with_its_error(
    postgres: Connection, kind: str
) -> None:
    with pytest.raises(psycopg.Error) as theirs:
        postgres.execute(f"SELECT 'a'::{kind}")
    with pytest.raises(CatalogRefused) as ours:
        translate(f"SELECT 'a'::{kind}", SESSION)
    assert (ours.value.sqlstate, ours.value.message) == (
        theirs.value.sqlstate,
        theirs.value.diag.message_primary,
    )
