"""PostgreSQL backend: a bounded pool of read-only connections with a statement timeout.

At most ``pool_size`` connections exist; each runs in autocommit with
``default_transaction_read_only=on`` and ``statement_timeout`` set at connect. Broken,
failed or canceled connections are closed and replaced by new ones when next needed.
Cancel uses psycopg's ``cancel_safe()`` in a task, never a blocking call on the loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

import psycopg

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
from rewriter.planner import Dialect

QUERY_CANCELED = "57014"
#: A valid unique index (a PRIMARY KEY or UNIQUE constraint has one) on exactly the column,
#: without expressions or a predicate (a partial index keeps only some rows unique).
_UNIQUE_INDEX_QUERY = (
    "SELECT 1 FROM pg_catalog.pg_index i "
    "JOIN pg_catalog.pg_class c ON c.oid = i.indrelid "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "JOIN pg_catalog.pg_attribute a ON a.attrelid = c.oid AND a.attnum = i.indkey[0] "
    "WHERE n.nspname = %s AND c.relname = %s AND a.attname = %s AND i.indisunique "
    "AND i.indisvalid AND i.indnkeyatts = 1 AND i.indexprs IS NULL AND i.indpred IS NULL "
    # A table with INHERITS children: its key does not cover their rows, which a query of
    # the table reads too (a partitioned table's unique index covers its partitions).
    "AND (c.relkind = 'p' OR NOT EXISTS "
    "(SELECT 1 FROM pg_catalog.pg_inherits h WHERE h.inhparent = c.oid)) "
    "LIMIT 1"
)
CANCEL_TIMEOUT_SECONDS = 10.0
logger = logging.getLogger("dpproxy.backends.postgres")


class PostgresBackend:
    dialect: Dialect = "postgres"
    finite_decimals = False  # numeric(p, s) holds NaN

    def __init__(self, dsn: str, *, pool_size: int, timeout_seconds: float) -> None:
        self._dsn = dsn
        self._timeout_ms = max(1, int(timeout_seconds * 1000))
        self._idle: asyncio.Queue[psycopg.AsyncConnection[tuple[object, ...]]] = asyncio.Queue()
        self._slots = asyncio.Semaphore(pool_size)
        self._all: set[psycopg.AsyncConnection[tuple[object, ...]]] = set()
        self._cancels: set[asyncio.Task[None]] = set()

    async def _connect(self) -> psycopg.AsyncConnection[tuple[object, ...]]:
        try:
            conn = await psycopg.AsyncConnection.connect(
                self._dsn,
                autocommit=True,
                options=(
                    f"-c default_transaction_read_only=on -c statement_timeout={self._timeout_ms}"
                ),
                application_name="dpproxy",
                # Text always arrives as UTF-8, whatever the DSN or PGCLIENTENCODING says: in
                # another encoding a character it lacks would fail the fetch (an error that
                # depends on the data), and SQL_ASCII would return bytes.
                client_encoding="UTF8",
            )
        except psycopg.Error as error:
            raise BackendError(f"cannot connect to PostgreSQL: {error}") from None
        self._all.add(conn)
        return conn

    async def _acquire(self) -> psycopg.AsyncConnection[tuple[object, ...]]:
        while not self._idle.empty():
            conn = self._idle.get_nowait()
            if not conn.closed and not conn.broken:
                return conn
            self._all.discard(conn)
        return await self._connect()

    async def schema_declared(self, schema: str) -> Schema:
        async with self._slots:
            conn = await self._acquire()
            try:
                cur = await conn.execute(SCHEMA_QUERY.format(placeholder="%s"), [schema])
                rows = await cur.fetchall()
            except psycopg.Error as error:
                await self._discard(conn)
                raise BackendError(f"PostgreSQL: {error}") from None
            self._idle.put_nowait(conn)
        return group_declared([tuple(row) for row in rows])

    async def key_check(self, schema: str, table: str, column: str) -> KeyCheck:
        """Only a unique index counts: other sessions can change the rows at any time, so
        rows unique today prove nothing about tomorrow's."""
        async with self._slots:
            conn = await self._acquire()
            try:
                cur = await conn.execute(_UNIQUE_INDEX_QUERY, [schema, table, column])
                found = await cur.fetchall()
            except psycopg.Error as error:
                await self._discard(conn)
                raise BackendError(f"PostgreSQL: {error}") from None
            self._idle.put_nowait(conn)
        return KeyCheck.DECLARED if found else KeyCheck.UNENFORCED

    async def fetch_all(self, sql: str, token: CancelToken) -> list[tuple[object, ...]]:
        async with self._slots:
            conn = await self._acquire()
            token.bind(self._canceller(conn))
            reusable = False
            started = time.monotonic()
            try:
                if token.canceled:
                    raise QueryCanceled(f"canceled due to {token.reason}")
                cur = await conn.execute(sql.encode())
                rows = await cur.fetchall()
                reusable = True
            except psycopg.Error as error:
                if error.sqlstate == QUERY_CANCELED:
                    self._timed_out(token, time.monotonic() - started)
                    if token.canceled:
                        raise QueryCanceled(f"canceled due to {token.reason}") from None
                raise BackendError(f"PostgreSQL: {error}") from None
            finally:
                token.bind(None)
                # A connection whose query was canceled, failed or abandoned is closed: a
                # late cancel must never reach the next query on it.
                if reusable and not token.canceled and not conn.broken:
                    self._idle.put_nowait(conn)
                else:
                    await self._discard(conn)
        return [tuple(row) for row in rows]

    def _timed_out(self, token: CancelToken, seconds: float) -> None:
        """A 57014 that no cancel of ours caused, after the query ran ``seconds`` (which
        the server's run of it does not exceed): when that reaches the statement_timeout
        set at connect, the timeout stopped it, and ``token`` says so (its reason). The
        time decides, not the message, whose wording depends on the server's lc_messages."""
        if not token.canceled and seconds >= self._timeout_ms / 1000:
            token.bind(None)  # the query has ended: nothing to cancel on the server
            token.cancel(STATEMENT_TIMEOUT)

    def _canceller(self, conn: psycopg.AsyncConnection[tuple[object, ...]]) -> Callable[[], None]:
        """A callable (safe from any thread) that asks PostgreSQL to cancel ``conn``'s
        query with psycopg's non-blocking cancel_safe()."""
        loop = asyncio.get_running_loop()

        def start() -> None:
            task = loop.create_task(self._cancel(conn))
            self._cancels.add(task)
            task.add_done_callback(self._cancels.discard)

        def cancel() -> None:
            loop.call_soon_threadsafe(start)

        return cancel

    async def _cancel(self, conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
        try:
            await conn.cancel_safe(timeout=CANCEL_TIMEOUT_SECONDS)
        except psycopg.Error as error:
            logger.warning("cancelling a PostgreSQL query failed: %s", error)

    async def _discard(self, conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
        self._all.discard(conn)
        try:
            await conn.close()
        except psycopg.Error as error:
            logger.warning("closing a PostgreSQL connection failed: %s", error)

    async def close(self) -> None:
        for conn in list(self._all):
            await conn.close()
        self._all.clear()
