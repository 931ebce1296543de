"""pg_type's functions as PostgreSQL 15 has them, and regproc columns compared with 0 as
PostgreSQL compares them (as OIDs, 0 for ``-``): ADBC's PostgreSQL driver connects by
reading ``pg_type WHERE (typreceive != 0 OR typsend != 0)``, which failed with
``invalid input syntax for type integer: "-"`` (every typreceive was ``-``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import psycopg
import pytest

from proxy.catalog.contents import catalog_rows
from proxy.catalog.database import CatalogDatabase
from proxy.catalog.pgtypes import TYPES
from proxy.catalog.relations import PG_CATALOG
from tests.proxy.test_catalog_translate import ask, demo_catalog

#: What adbc-driver-postgresql 1.x sends on connecting (its type resolver's query).
ADBC_TYPE_QUERY = (
    "SELECT oid, typname, typreceive, typbasetype, typrelid, typarray FROM "
    "pg_catalog.pg_type WHERE (typreceive != 0 OR typsend != 0) AND typtype != 'r' AND "
    "typreceive::TEXT != 'array_recv'"
)
_FUNCTION_COLUMNS = (
    "typinput",
    "typoutput",
    "typreceive",
    "typsend",
    "typmodin",
    "typmodout",
    "typanalyze",
    "typsubscript",
    "typalign",
    "typstorage",
)
Row = Mapping[str, object]


def _has(column: str) -> Callable[[Row], bool]:
    return lambda row: row[column] != "-"


def _lacks(column: str) -> Callable[[Row], bool]:
    return lambda row: row[column] == "-"


#: Comparisons with 0, the regproc column on either side, and the rows they hold for.
COMPARED_WITH_ZERO: list[tuple[str, Callable[[Row], bool]]] = [
    ("typreceive != 0", _has("typreceive")),
    ("typreceive <> 0", _has("typreceive")),
    ("typreceive = 0", _lacks("typreceive")),
    ("typreceive > 0", _has("typreceive")),
    ("typreceive >= 0", lambda row: True),
    ("typreceive < 0", lambda row: False),
    ("typreceive <= 0", _lacks("typreceive")),
    ("0 < typsend", _has("typsend")),
    ("0 = typsend", _lacks("typsend")),
    ("(typanalyze != (0))", _has("typanalyze")),
    ("typmodin != 0 AND typmodout != 0", _has("typmodout")),
    ("NOT (typsubscript <> 0)", _lacks("typsubscript")),
    ("t.typinput != 0 AND 0 <> t.typoutput", _has("typoutput")),
]


@pytest.fixture(scope="module")
def database() -> CatalogDatabase:
    return CatalogDatabase(demo_catalog())


def test_adbc_type_query(database: CatalogDatabase) -> None:
    names, rows = ask(database, ADBC_TYPE_QUERY)
    assert names == ("oid", "typname", "typreceive", "typbasetype", "typrelid", "typarray")
    found = {row[1]: row for row in rows}
    assert found["int4"] == (23, "int4", "int4recv", 0, 0, 1007)
    assert found["numeric"][2] == "numeric_recv"
    assert found["timestamptz"][2] == "timestamptz_recv"
    assert "_int4" not in found  # arrays: array_recv
    assert "int4range" not in found  # typtype r
    assert "anyelement" not in found  # no receive or send function ('-')
    assert len(rows) == 81


@pytest.mark.parametrize(("condition", "holds"), COMPARED_WITH_ZERO)
def test_regproc_compared_with_zero(
    database: CatalogDatabase, condition: str, holds: Callable[[Row], bool]
) -> None:
    sql = f"SELECT t.typname FROM pg_catalog.pg_type t WHERE {condition} ORDER BY t.oid"
    rows = ask(database, sql)[1]
    types = catalog_rows(demo_catalog())[(PG_CATALOG, "pg_type")]
    assert rows == [(t["typname"],) for t in types if holds(t)]


def test_regproc_null_and_numbers(database: CatalogDatabase) -> None:
    """NULL compared with 0 is NULL; a number named like a regproc column is itself."""
    assert ask(database, "SELECT CAST(NULL AS VARCHAR) AS typsend")[1] == [(None,)]
    null = "SELECT (SELECT typsend FROM pg_type WHERE false) != 0"
    assert ask(database, null)[1] == [(None,)]
    numbers = "SELECT typsend != 0 FROM (SELECT 0 AS typsend UNION ALL SELECT 7) s ORDER BY 1"
    assert ask(database, numbers)[1] == [(False,), (True,)]


def test_pg_type_functions_are_postgresql_15s(pg_dsn: str) -> None:
    """Every built-in type's functions, alignment and storage, as the test server's
    PostgreSQL 15 has them."""
    ours = {t["oid"]: t for t in catalog_rows(demo_catalog())[(PG_CATALOG, "pg_type")]}
    columns = ", ".join(f"{c}::text" for c in _FUNCTION_COLUMNS)
    with psycopg.connect(pg_dsn) as conn:
        theirs = conn.execute(
            f"SELECT oid::int, {columns} FROM pg_type WHERE oid = ANY(%s)", [list(TYPES)]
        ).fetchall()
    assert len(theirs) == len(TYPES)
    for oid, *values in theirs:
        assert tuple(ours[oid][c] for c in _FUNCTION_COLUMNS) == tuple(values), oid


def test_adbc_type_query_as_postgresql(database: CatalogDatabase, pg_dsn: str) -> None:
    """The built-in types ADBC's query finds, as PostgreSQL 15 finds them."""
    with psycopg.connect(pg_dsn) as conn:
        theirs = conn.execute(
            f"SELECT oid::int, typname::text, typreceive::text, typbasetype::int, "
            f"typrelid::int, typarray::int FROM ({ADBC_TYPE_QUERY}) t "
            "WHERE oid = ANY(%s) ORDER BY oid",
            [list(TYPES)],
        ).fetchall()
    assert ask(database, f"{ADBC_TYPE_QUERY} ORDER BY oid")[1] == theirs


def test_compared_with_zero_as_postgresql(database: CatalogDatabase, pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        for condition, _ in COMPARED_WITH_ZERO:
            sql = f"SELECT t.typname::text FROM pg_catalog.pg_type t WHERE ({condition})"
            ours = ask(database, f"{sql} ORDER BY t.oid")[1]
            theirs = conn.execute(f"{sql} AND t.oid = ANY(%s) ORDER BY t.oid", [list(TYPES)])
            assert ours == theirs.fetchall(), condition
