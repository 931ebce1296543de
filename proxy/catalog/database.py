"""The in-memory DuckDB holding the emulated catalog, one per server.

It holds no data of any database: only the rows of ``contents.py``. It cannot read files
or load extensions, every query is interrupted after a few seconds or at once when its
QueryStop is cancelled (a cancel request), and its answer is fetched in small batches and
given up past MAX_ROWS rows or MAX_BYTES bytes.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import numpy

from proxy.backends.interrupt import Interrupter
from proxy.catalog.contents import Declared, Row, catalog_rows, session_relation_sql
from proxy.catalog.datetimes import UTC_ZONE, OutputPlan, SessionZone, UnshownValues, output_plan
from proxy.catalog.functions import macro_statements
from proxy.catalog.keywords import KEYWORDS
from proxy.catalog.pgtypes import TYPE_ALIASES, TYPES
from proxy.catalog.relations import DUCK_SCHEMAS, FUNCTIONS_SCHEMA, RELATIONS
from rewriter import Catalog

TIMEOUT_SECONDS = 5.0
MAX_ROWS = 100_000
#: The largest answer (about: the length of its text values, 8 bytes for other values).
MAX_BYTES = 64 * 1024 * 1024
MEMORY_LIMIT = "256MB"
_MAX_BATCH = 2048  # rows fetched at a time, at most (fewer while the rows are large)
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


class CatalogResultTooLarge(CatalogQueryFailed):
    """The answer is larger than MAX_BYTES, or the query needs more than MEMORY_LIMIT."""


class CatalogQueryCanceled(CatalogQueryFailed):
    """The query's QueryStop was cancelled: it was interrupted, or never started."""


class QueryStop:
    """Stops one catalog query from any thread: cancelled before the query starts, it never
    starts; while it runs, it is interrupted at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._canceled = False
        self._interrupter: Interrupter | None = None

    @property
    def canceled(self) -> bool:
        return self._canceled

    def cancel(self) -> None:
        with self._lock:
            self._canceled = True
            interrupter = self._interrupter
        if interrupter is not None:
            interrupter.fire()

    def attach(self, interrupter: Interrupter | None) -> None:
        """The query now running (fired at once if already cancelled), or None."""
        with self._lock:
            self._interrupter = interrupter
            canceled = self._canceled
        if interrupter is not None and canceled:
            interrupter.fire()


@dataclass(frozen=True)
class QueryOutput:
    column_names: tuple[str, ...]
    column_types: tuple[str, ...]  # DuckDB type names
    rows: list[tuple[object, ...]]
    size: int = 0  # about how many bytes the rows hold (see value_size)


class CatalogDatabase:
    def __init__(self, catalog: Catalog, declared: Declared | None = None) -> None:
        self._connection = duckdb.connect(":memory:")
        self._lock = threading.Lock()
        _build(self._connection, catalog, declared)
        for statement in (
            # Times are computed in UTC unless the translation names the session's zone
            # (DuckDB's default is the machine's).
            "SET TimeZone = 'UTC'",
            "SET enable_external_access = false",
            "SET threads = 1",
            f"SET memory_limit = '{MEMORY_LIMIT}'",
            "SET lock_configuration = true",
        ):
            self._connection.execute(statement)

    def run_blocking(
        self, sql: str, stop: QueryStop | None = None, zone: SessionZone = UTC_ZONE
    ) -> QueryOutput:
        """Run ``sql`` (blocks: call it from a worker thread, see CatalogResponder).
        Raises CatalogQueryCanceled when ``stop`` is cancelled, before or while it runs.

        Values DuckDB's Python client would not give as PostgreSQL shows them (intervals,
        timestamps and times with time zone: see datetimes.py) come as their text,
        timestamptz values in ``zone``, the session's TimeZone."""
        stop = QueryStop() if stop is None else stop
        with self._lock:
            cursor = self._connection.cursor()
        interrupter = Interrupter(cursor)
        stop.attach(interrupter)  # a cancel from now on reaches the query
        timer = threading.Timer(TIMEOUT_SECONDS, interrupter.fire)
        timer.start()
        try:
            if stop.canceled:
                raise CatalogQueryCanceled("canceled before it started")
            # The columns' types from binding the query alone (a relation runs nothing
            # until asked), so that it runs once, with the columns DuckDB's values would
            # not show right projected (catalog queries are SELECTs only: classify).
            relation = cursor.sql(sql)
            names = tuple(relation.columns)
            types = list(relation.types)
            plan = output_plan(names, types, zone)
            cursor.execute(sql if plan is None else plan.query(sql))
            rows, size = _fetch(cursor, stop, plan)
        except duckdb.InterruptException:
            if stop.canceled:
                raise CatalogQueryCanceled("canceled on request") from None
            raise CatalogQueryTooLong(f"stopped after {TIMEOUT_SECONDS:g} s") from None
        except duckdb.OutOfMemoryException:
            raise CatalogResultTooLarge(
                f"it needs more than the {MEMORY_LIMIT} of memory catalog queries may use"
            ) from None
        except duckdb.Error as error:
            raise CatalogQueryFailed(str(error).split("\n", 1)[0]) from None
        except UnshownValues as error:
            raise CatalogQueryFailed(str(error)) from None
        finally:
            timer.cancel()
            stop.attach(None)
            interrupter.end()
            cursor.close()
        return QueryOutput(
            names,
            tuple(str(t) for t in types),
            rows,
            size,
        )

    def close(self) -> None:
        self._connection.close()


def _fetch(
    cursor: duckdb.DuckDBPyConnection, stop: QueryStop, plan: OutputPlan | None
) -> tuple[list[tuple[object, ...]], int]:
    """The rows of the query run on ``cursor`` and their size, fetched a few at a time:
    as many as are expected to fit in what is left of MAX_BYTES (at least one row, at
    most _MAX_BATCH), so that an answer too large is given up after little more than
    MAX_BYTES were fetched. Raises CatalogQueryTooLong past MAX_ROWS rows,
    CatalogResultTooLarge past MAX_BYTES and CatalogQueryCanceled once ``stop`` is.
    ``plan``: how the rows of a projected query are shown (OutputPlan.convert)."""
    rows: list[tuple[object, ...]] = []
    size = 0
    batch = 1
    while True:
        if stop.canceled:
            raise CatalogQueryCanceled("canceled on request")
        fetched = cursor.fetchmany(batch)
        if not fetched:
            return rows, size
        if plan is not None:
            fetched = [plan.convert(row) for row in fetched]
        size += sum(value_size(row) for row in fetched)
        rows.extend(fetched)
        if size > MAX_BYTES:
            raise CatalogResultTooLarge(
                f"its answer is larger than {MAX_BYTES // (1024 * 1024)} MB"
            )
        if len(rows) > MAX_ROWS:
            raise CatalogQueryTooLong(f"more than {MAX_ROWS} rows")
        fitting = (MAX_BYTES - size) // (size // len(rows) + 1)
        batch = max(1, min(batch * 4, _MAX_BATCH, fitting, MAX_ROWS + 1 - len(rows)))


def value_size(value: object) -> int:
    """About how many bytes ``value`` (a row, or one of its values) takes in an answer:
    the length of text and binary values, 8 bytes for any other, nested lists and
    structs counted whole."""
    if isinstance(value, str | bytes):
        return 8 + len(value)
    if isinstance(value, list | tuple):
        return 8 + sum(value_size(item) for item in value)
    if isinstance(value, dict):
        return 8 + sum(value_size(k) + value_size(v) for k, v in value.items())
    return 8


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
