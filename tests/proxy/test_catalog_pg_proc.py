"""pg_proc holds the functions the emulated catalog names (pg_type's input, output,
receive, send, typmod, analyze and subscript functions, pg_am's handlers, pg_range's),
as PostgreSQL 15 has them; and a regproc column compared with an OID, or cast to oid,
stands for its function's OID as in PostgreSQL.

Npgsql 4 (bundled with Power BI Desktop) loads the server's types with
``JOIN pg_proc ON pg_proc.oid = a.typreceive``: with pg_proc empty it found no type at all,
where PostgreSQL returns every base, array, range, enum and domain type."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from proxy.catalog.contents import catalog_rows
from proxy.catalog.database import CatalogDatabase
from proxy.catalog.pgtypes import TYPES
from proxy.catalog.relations import PG_CATALOG
from tests.proxy.test_catalog_translate import ask, demo_catalog

#: Npgsql 4.0's PostgresDatabaseInfo.GenerateTypesQuery (PostgreSQL 9.2 and later).
NPGSQL_TYPES = """/*** Load all supported types ***/
SELECT ns.nspname, a.typname, a.oid, a.typrelid, a.typbasetype,
CASE WHEN pg_proc.proname='array_recv' THEN 'a' ELSE a.typtype END AS type,
CASE
  WHEN pg_proc.proname='array_recv' THEN a.typelem
  WHEN a.typtype='r' THEN rngsubtype
  ELSE 0
END AS elemoid,
CASE
  WHEN pg_proc.proname IN ('array_recv','oidvectorrecv') THEN 3    /* Arrays last */
  WHEN a.typtype='r' THEN 2                                        /* Ranges before */
  WHEN a.typtype='d' THEN 1                                        /* Domains before */
  ELSE 0                                                           /* Base types first */
END AS ord
FROM pg_type AS a
JOIN pg_namespace AS ns ON (ns.oid = a.typnamespace)
JOIN pg_proc ON pg_proc.oid = a.typreceive
LEFT OUTER JOIN pg_class AS cls ON (cls.oid = a.typrelid)
LEFT OUTER JOIN pg_type AS b ON (b.oid = a.typelem)
LEFT OUTER JOIN pg_class AS elemcls ON (elemcls.oid = b.typrelid)
LEFT OUTER JOIN pg_range ON (pg_range.rngtypid = a.oid)
WHERE
  a.typtype IN ('b', 'r', 'e', 'd') OR         /* Base, range, enum, domain */
  (a.typtype = 'c' AND cls.relkind='c') OR /* User-defined free-standing composites (not table composites) by default */
  (pg_proc.proname='array_recv' AND (
    b.typtype IN ('b', 'r', 'e', 'd') OR       /* Array of base, range, enum, domain */
    (b.typtype = 'p' AND b.typname IN ('record', 'void')) OR /* Arrays of special supported pseudo-types */
    (b.typtype = 'c' AND elemcls.relkind='c')  /* Array of user-defined free-standing composites (not table composites) */
  )) OR
  (a.typtype = 'p' AND a.typname IN ('record', 'void'))  /* Some special supported pseudo-types */
ORDER BY ord"""  # noqa: E501
_REGPROC_COLUMNS = (
    "typinput",
    "typoutput",
    "typreceive",
    "typsend",
    "typmodin",
    "typmodout",
    "typanalyze",
    "typsubscript",
)
_PROC_COLUMNS = (
    "oid::int, proname::text, pronamespace::int, proowner::int, prolang::int, "
    "procost::float8, prorows::float8, provariadic::int, prosupport::text, prokind::text, "
    "prosecdef, proleakproof, proisstrict, proretset, provolatile::text, proparallel::text, "
    "pronargs::int, pronargdefaults::int, prorettype::int, proargtypes::oid[]::int8[], "
    "prosrc"
)


@pytest.fixture(scope="module")
def database() -> Iterator[CatalogDatabase]:
    database = CatalogDatabase(demo_catalog())
    yield database
    database.close()


def _theirs(pg_dsn: str, sql: str, *params: object) -> list[tuple[object, ...]]:
    with psycopg.connect(pg_dsn) as conn:
        return conn.execute(sql, params or None).fetchall()


def test_npgsql_types_query_as_postgresql(database: CatalogDatabase, pg_dsn: str) -> None:
    """Every type of the emulated pg_type that PostgreSQL's answer has, as it has it."""
    names, rows = ask(database, NPGSQL_TYPES)
    theirs = _theirs(pg_dsn, f"SELECT * FROM ({NPGSQL_TYPES}) q WHERE oid = ANY(%s)", list(TYPES))
    assert names == (
        "nspname", "typname", "oid", "typrelid", "typbasetype", "type", "elemoid", "ord"
    )  # fmt: skip
    assert len(rows) > 150
    assert sorted(rows, key=repr) == sorted(theirs, key=repr)
    order = [int(str(row[7])) for row in rows]
    assert order == sorted(order)  # ORDER BY ord
    found = {row[1]: row for row in rows}
    assert found["int4"] == ("pg_catalog", "int4", 23, 0, 0, "b", 0, 0)
    assert found["_int4"] == ("pg_catalog", "_int4", 1007, 0, 0, "a", 23, 3)
    assert found["daterange"] == ("pg_catalog", "daterange", 3912, 0, 0, "r", 1082, 2)


def test_every_function_the_catalog_names_is_in_pg_proc() -> None:
    rows = catalog_rows(demo_catalog())
    named = {
        row[column] for row in rows[(PG_CATALOG, "pg_type")] for column in _REGPROC_COLUMNS
    } | {row["amhandler"] for row in rows[(PG_CATALOG, "pg_am")]}
    named |= {
        row[column]
        for row in rows[(PG_CATALOG, "pg_range")]
        for column in ("rngcanonical", "rngsubdiff")
    }
    names = [row["proname"] for row in rows.get((PG_CATALOG, "pg_proc"), [])]
    assert named - {"-"} == set(names)
    assert len(names) == len(set(names))  # regproc names them unambiguously


def test_pg_proc_rows_are_postgresql_15s(database: CatalogDatabase, pg_dsn: str) -> None:
    oids = [row["oid"] for row in catalog_rows(demo_catalog()).get((PG_CATALOG, "pg_proc"), [])]
    sql = f"SELECT {_PROC_COLUMNS} FROM pg_proc ORDER BY oid"
    ours = [
        tuple(list(value) if isinstance(value, list) else value for value in row)
        for row in ask(database, sql)[1]
    ]
    theirs = _theirs(
        pg_dsn,
        f"SELECT {_PROC_COLUMNS} FROM pg_proc WHERE oid = ANY(%s) ORDER BY oid",
        oids,
    )
    assert len(ours) == len(oids) > 300
    assert ours == theirs


def test_pg_range_is_postgresql_15s(database: CatalogDatabase, pg_dsn: str) -> None:
    sql = (
        "SELECT rngtypid::int, rngsubtype::int, rngmultitypid::int, rngcollation::int, "
        "rngsubopc::int, rngcanonical::text, rngsubdiff::text FROM pg_range ORDER BY 1"
    )
    assert ask(database, sql)[1] == _theirs(pg_dsn, sql)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT t.typname::text, p.proname::text FROM pg_type t "
        "JOIN pg_proc p ON p.oid = t.typinput WHERE t.typname IN ('int4', '_text', 'numeric')",
        "SELECT t.typname::text FROM pg_type t, pg_proc p "
        "WHERE t.typsend = p.oid AND p.proname = 'range_send'",
        "SELECT typname::text FROM pg_type WHERE typreceive = 2400 AND typname LIKE '_int%'",
        "SELECT typname::text FROM pg_type WHERE 2407 = typsend AND typname = 'int4'",
        "SELECT typname::text, typreceive::oid::int, typmodin::oid::int FROM pg_type "
        "WHERE typname IN ('varchar', 'int4', 'anyelement')",
        "SELECT typname::text FROM pg_type WHERE typreceive = 'array_recv'::regproc "
        "AND typname IN ('_int4', 'int4')",
        "SELECT r.rngtypid::int, p.proname::text FROM pg_range r "
        "LEFT JOIN pg_proc p ON p.oid = r.rngcanonical",
        "SELECT a.amname::text, p.oid::int FROM pg_am a JOIN pg_proc p ON a.amhandler = p.oid",
    ],
)
def test_regproc_compared_with_an_oid_as_postgresql(
    database: CatalogDatabase, pg_dsn: str, sql: str
) -> None:
    ours = sorted(ask(database, sql)[1], key=repr)
    assert ours
    theirs = _theirs(pg_dsn, sql)
    if "pg_am" in sql:
        theirs = [row for row in theirs if row[0] in ("heap", "btree", "hash")]
    assert ours == sorted(theirs, key=repr)


def test_function_signatures_as_postgresql(database: CatalogDatabase, pg_dsn: str) -> None:
    """pg_get_function_result() and _arguments() (psql's \\df) of every function in pg_proc,
    and of an OID pg_proc lacks, as PostgreSQL 15 shows them."""
    sql = (
        "SELECT p.oid::int, pg_get_function_result(p.oid), pg_get_function_arguments(p.oid), "
        "pg_get_function_identity_arguments(p.oid) FROM pg_proc p"
    )
    ours = ask(database, f"{sql} ORDER BY 1")[1]
    oids = [row[0] for row in ours]
    assert len(oids) > 300
    assert ours == _theirs(pg_dsn, f"{sql} WHERE p.oid = ANY(%s) ORDER BY 1", oids)
    missing = "SELECT pg_get_function_result(1), pg_get_function_arguments(NULL)"
    assert ask(database, missing)[1] == _theirs(pg_dsn, missing) == [(None, None)]


def test_format_type_of_every_type_as_postgresql(database: CatalogDatabase, pg_dsn: str) -> None:
    """Arrays listed before their element (_numeric before numeric) were shown "[]"."""
    sql = "SELECT oid::int, format_type(oid, NULL) FROM pg_type"
    ours = ask(database, f"{sql} ORDER BY 1")[1]
    assert ours == _theirs(pg_dsn, f"{sql} WHERE oid = ANY(%s) ORDER BY 1", list(TYPES))
    assert (1231, "numeric[]") in ours
