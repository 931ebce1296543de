"""The in-memory DuckDB holding the emulated catalog, one per server.

It holds no data of any database: only the rows of ``contents.py``. It cannot read files
or load extensions, and every query is interrupted after a few seconds.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import numpy

from proxy.catalog.contents import Declared, Row, catalog_rows, session_relation_sql
from proxy.catalog.functions import macro_statements
from proxy.catalog.keywords import KEYWORDS
from proxy.catalog.pgtypes import TYPE_ALIASES, TYPES
from proxy.catalog.relations import DUCK_SCHEMAS, FUNCTIONS_SCHEMA, RELATIONS
from rewriter import Catalog

TIMEOUT_SECONDS = 5.0
MAX_ROWS = 100_000
_KEYWORD_DESCRIPTIONS = {
    "U": "unreserved",
    "C": "unreserved (cannot be function or type name)",
    "T": "reserved (can be function or type name)",
    "R": "reserved",
}


class CatalogQueryFailed(Exception):
    """DuckDB could not run a translated catalog query (its message is safe to show: the
    catalog database holds no data)."""


class CatalogQueryTooLong(CatalogQueryFailed):
    """The query ran longer than TIMEOUT_SECONDS or returned more than MAX_ROWS rows."""


@dataclass(frozen=True)
class QueryOutput:
    column_names: tuple[str, ...]
    column_types: tuple[str, ...]  # DuckDB type names
    rows: list[tuple[object, ...]]


class CatalogDatabase:
    def __init__(self, catalog: Catalog, declared: Declared | None = None) -> None:
        self._connection = duckdb.connect(":memory:")
        self._lock = threading.Lock()
        _build(self._connection, catalog, declared)
        for statement in (
            "SET enable_external_access = false",
            "SET threads = 1",
            "SET memory_limit = '256MB'",
            "SET lock_configuration = true",
        ):
            self._connection.execute(statement)

    async def run(self, sql: str) -> QueryOutput:
        return await asyncio.to_thread(self.run_blocking, sql)

    def run_blocking(self, sql: str) -> QueryOutput:
        with self._lock:
            cursor = self._connection.cursor()
        timer = threading.Timer(TIMEOUT_SECONDS, cursor.interrupt)
        timer.start()
        try:
            cursor.execute(sql)
            description = cursor.description or []
            rows = cursor.fetchmany(MAX_ROWS + 1)
        except duckdb.InterruptException:
            raise CatalogQueryTooLong(f"stopped after {TIMEOUT_SECONDS:g} s") from None
        except duckdb.Error as error:
            raise CatalogQueryFailed(str(error).split("\n", 1)[0]) from None
        finally:
            timer.cancel()
            cursor.close()
        if len(rows) > MAX_ROWS:
            raise CatalogQueryTooLong(f"more than {MAX_ROWS} rows")
        return QueryOutput(
            tuple(str(d[0]) for d in description), tuple(str(d[1]) for d in description), rows
        )

    def close(self) -> None:
        self._connection.close()


def _build(
    connection: duckdb.DuckDBPyConnection, catalog: Catalog, declared: Declared | None
) -> None:
    for schema in DUCK_SCHEMAS.values():
        connection.execute(f"CREATE SCHEMA {schema}")
    contents = catalog_rows(catalog, declared)
    for relation in RELATIONS.values():
        columns = relation.duck_columns()
        ddl = ", ".join(f'"{name}" {duck}' for name, duck in columns)
        connection.execute(f"CREATE TABLE {relation.base_name} ({ddl})")
        _insert(
            connection, relation.base_name, [c for c, _ in columns], contents.get(relation.key, [])
        )
    schema = FUNCTIONS_SCHEMA
    connection.execute(f"CREATE TABLE {schema}.dp_type_formats (oid BIGINT, formatted VARCHAR)")
    _insert(
        connection,
        f"{schema}.dp_type_formats",
        ("oid", "formatted"),
        [{"oid": oid, "formatted": t.formatted} for oid, t in TYPES.items()],
    )
    connection.execute(f"CREATE TABLE {schema}.dp_type_names (oid BIGINT, name VARCHAR)")
    _insert(
        connection,
        f"{schema}.dp_type_names",
        ("oid", "name"),
        [{"oid": oid, "name": name} for oid, name in sorted(_type_names())],
    )
    connection.execute(
        f"CREATE TABLE {schema}.dp_keywords (word VARCHAR, catcode VARCHAR, "
        "barelabel BOOLEAN, catdesc VARCHAR, baredesc VARCHAR)"
    )
    _insert(
        connection,
        f"{schema}.dp_keywords",
        ("word", "catcode", "barelabel", "catdesc", "baredesc"),
        [
            {
                "word": word,
                "catcode": code,
                "barelabel": bare,
                "catdesc": _KEYWORD_DESCRIPTIONS[code],
                "baredesc": "can be bare label" if bare else "requires AS",
            }
            for (code, bare), words in KEYWORDS.items()
            for word in words.split()
        ],
    )
    for statement in macro_statements():
        connection.execute(statement)
    for relation in RELATIONS.values():
        if relation.session:
            connection.execute(
                f"CREATE MACRO {relation.duck_name}(user_name, database_name, settings) "
                f"AS TABLE {session_relation_sql(relation)}"
            )


def _insert(
    connection: duckdb.DuckDBPyConnection, table: str, columns: Sequence[str], rows: list[Row]
) -> None:
    if not rows:
        return
    unknown = {name for row in rows for name in row} - set(columns)
    if unknown:
        raise ValueError(f"{table} has no columns {sorted(unknown)}")
    # A dict of NumPy object arrays is a relation DuckDB scans directly (fast, no SQL text).
    source = {name: numpy.array([row.get(name) for row in rows], dtype=object) for name in columns}
    connection.register("dp_rows", source)
    try:
        connection.execute(f"INSERT INTO {table} SELECT * FROM dp_rows")
    finally:
        connection.unregister("dp_rows")


def _type_names() -> set[tuple[int, str]]:
    names: set[tuple[int, str]] = set()
    for oid, pg_type in TYPES.items():
        for name in (pg_type.name, pg_type.formatted):
            names.add((oid, name.lower()))
            names.add((oid, f"pg_catalog.{name.lower()}"))
        if pg_type.category == "A":
            element = TYPES.get(pg_type.element)
            if element is not None:
                names.add((oid, f"{element.name}[]"))
    for alias, oid in TYPE_ALIASES.items():
        names.add((oid, alias))
        array = TYPES[oid].array
        if array:
            names.add((array, f"{alias}[]"))
    return names
