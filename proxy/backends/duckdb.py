"""DuckDB backend: the database file opened read-only, queries run off the event loop."""

from __future__ import annotations

import asyncio
from pathlib import Path

import duckdb

from proxy.backends import (
    SCHEMA_QUERY,
    STATEMENT_TIMEOUT,
    BackendError,
    CancelToken,
    KeyCheck,
    QueryCanceled,
    Schema,
    group_declared,
)
from proxy.backends.collations import COLLATIONS_QUERY, with_collations
from proxy.backends.interrupt import Interrupter
from rewriter.planner import Dialect

#: Single-column PRIMARY KEY and UNIQUE constraints of one table.
_KEYS_QUERY = (
    "SELECT constraint_column_names FROM duckdb_constraints() WHERE database_name = "
    "current_database() AND schema_name = ? AND table_name = ? "
    "AND constraint_type IN ('PRIMARY KEY', 'UNIQUE')"
)


class DuckDBBackend:
    dialect: Dialect = "duckdb"
    finite_decimals = True  # DuckDB's DECIMAL has no NaN or infinity

    def __init__(self, path: Path, *, timeout_seconds: float) -> None:
        if not path.exists():
            raise BackendError(
                f"{path}: no such DuckDB file; fix [backend] path in the configuration"
            )
        try:
            self._connection = duckdb.connect(
                str(path),
                read_only=True,
                config={"enable_external_access": False, "lock_configuration": True},
            )
        except duckdb.Error as error:
            raise BackendError(f"{path}: cannot open as a DuckDB database: {error}") from None
        self._timeout = timeout_seconds

    async def schema_declared(self, schema: str) -> Schema:
        cursor = self._connection.cursor()
        try:
            rows = cursor.execute(SCHEMA_QUERY.format(placeholder="?"), [schema]).fetchall()
            statements = cursor.execute(COLLATIONS_QUERY, [schema]).fetchall()
        finally:
            cursor.close()
        declared = group_declared([tuple(row) for row in rows])
        return with_collations(declared, [tuple(row) for row in statements])

    async def key_check(self, schema: str, table: str, column: str) -> KeyCheck:
        """A declared key, else the data itself: the file is open read-only, which locks
        out writers, so rows unique now stay unique while dpproxy runs."""
        return await asyncio.to_thread(self._key_check, schema, table, column)

    def _key_check(self, schema: str, table: str, column: str) -> KeyCheck:
        cursor = self._connection.cursor()
        try:
            for (names,) in cursor.execute(_KEYS_QUERY, [schema, table]).fetchall():
                if isinstance(names, list) and [str(n).lower() for n in names] == [column.lower()]:
                    return KeyCheck.DECLARED
            name = f"{_quoted(schema)}.{_quoted(table)}"
            repeated = cursor.execute(
                f"SELECT 1 FROM {name} WHERE {_quoted(column)} IS NOT NULL "
                f"GROUP BY {_quoted(column)} HAVING COUNT(*) > 1 LIMIT 1"
            ).fetchall()
        except duckdb.Error as error:
            raise BackendError(f"DuckDB: {error}") from None
        finally:
            cursor.close()
        return KeyCheck.DUPLICATED if repeated else KeyCheck.VERIFIED

    async def fetch_all(self, sql: str, token: CancelToken) -> list[tuple[object, ...]]:
        """``sql``'s rows. A cancel request (``token``) or the server's statement timeout
        (which fires ``token`` with STATEMENT_TIMEOUT) stops it, at whatever moment it
        comes before the query has ended, with QueryCanceled (``token.reason`` says why)."""
        cursor = self._connection.cursor()
        stop = Interrupter(cursor)
        token.bind(stop.fire)
        loop = asyncio.get_running_loop()
        timer = loop.call_later(self._timeout, token.cancel, STATEMENT_TIMEOUT)
        # Shielded: a cancelled task must not keep _run from ever starting (the cursor
        # would stay open and a fired stop would interrupt it for ever).
        work = loop.run_in_executor(None, _run, cursor, sql, token, stop)
        work.add_done_callback(_consume)
        try:
            return await asyncio.shield(work)
        except duckdb.InterruptException:
            if token.canceled:
                raise QueryCanceled(f"canceled due to {token.reason}") from None
            raise BackendError("DuckDB: interrupted") from None
        except duckdb.Error as error:
            raise BackendError(f"DuckDB: {error}") from None
        except asyncio.CancelledError:
            # The task was cancelled (a shutdown): stop the thread's query too, and return
            # once it has ended and closed its cursor (before the backend may be closed).
            stop.fire()
            await asyncio.wait((work,))
            raise
        finally:
            timer.cancel()
            token.bind(None)

    async def close(self) -> None:
        self._connection.close()


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _consume(work: asyncio.Future[list[tuple[object, ...]]]) -> None:
    """Retrieve the outcome of a query whose task was cancelled (else asyncio logs it)."""
    if not work.cancelled():
        work.exception()


def _run(
    cursor: duckdb.DuckDBPyConnection, sql: str, token: CancelToken, stop: Interrupter
) -> list[tuple[object, ...]]:
    """In a worker thread; closes the cursor when done (it is not shared with the loop).
    A stop fired before the check below means the query never starts; one fired later
    interrupts it (see proxy.backends.interrupt)."""
    try:
        if token.canceled or stop.fired:
            raise QueryCanceled(f"canceled due to {token.reason}")
        return [tuple(row) for row in cursor.execute(sql).fetchall()]
    finally:
        stop.end()
        cursor.close()
