"""PostgreSQL backend: a bounded pool of read-only connections with a statement timeout.

At most ``pool_size`` connections exist; each runs in autocommit with
``default_transaction_read_only=on`` and ``statement_timeout`` set at connect. Broken,
failed or canceled connections are closed and replaced by new ones when next needed.
Cancel uses psycopg's ``cancel_safe()`` in a task, never a blocking call on the loop.

Before a charged query, ``ready`` makes sure a live connection is at hand: it takes an idle
connection (or connects), checks it with ``SELECT 1`` (a dead one is closed and the next
tried), and puts it back marked for the statement that checked it, whose ``fetch_all``
then uses it (unless another statement took it meanwhile: then the most recently used
idle connection, as every idle connection goes back to the top of the pool after a
successful round trip).
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias, TypeVar

import psycopg
from psycopg import sql as pgsql

from proxy.backends import (
    SCHEMA_QUERY,
    STATEMENT_TIMEOUT,
    BackendError,
    CancelToken,
    DeclaredKey,
    KeyCheck,
    NotReady,
    QueryCanceled,
    Schema,
    group_declared,
    single_count,
)
from proxy.backends.pg_collation import (
    COLLATION_QUERY,
    DATABASE_QUERY,
    PgCollation,
    database_collation,
    named_collation,
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
#: The PRIMARY KEY, UNIQUE and FOREIGN KEY constraints of a schema's tables, their
#: columns in the constraint's order; a foreign key only if it references a table of the
#: same schema. From pg_catalog: information_schema's constraint views show a user only
#: the constraints of tables it may change, and dpproxy's user may only read.
_CONSTRAINTS_QUERY = (
    "SELECT c.relname, k.contype, k.conname, "
    "ARRAY(SELECT a.attname::text FROM unnest(k.conkey) WITH ORDINALITY AS u(n, o) "
    "JOIN pg_catalog.pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.n "
    "ORDER BY u.o), f.relname, "
    "ARRAY(SELECT a.attname::text FROM unnest(k.confkey) WITH ORDINALITY AS u(n, o) "
    "JOIN pg_catalog.pg_attribute a ON a.attrelid = k.confrelid AND a.attnum = u.n "
    "ORDER BY u.o), k.confupdtype, k.confdeltype, k.confmatchtype, k.condeferrable, "
    "k.condeferred "
    "FROM pg_catalog.pg_constraint k "
    "JOIN pg_catalog.pg_class c ON c.oid = k.conrelid "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "LEFT JOIN pg_catalog.pg_class f ON f.oid = k.confrelid "
    "WHERE n.nspname = %s AND k.contype IN ('p', 'u', 'f') "
    "AND (k.contype <> 'f' OR f.relnamespace = c.relnamespace) "
    "ORDER BY c.relname, k.conname"
)
CANCEL_TIMEOUT_SECONDS = 10.0
#: How long ``ready`` may take to connect and check a connection: a database that does not
#: answer in that time refuses the query before its charge.
READY_TIMEOUT_SECONDS = 10.0
logger = logging.getLogger("dpproxy.backends.postgres")

Connection: TypeAlias = psycopg.AsyncConnection[tuple[object, ...]]
T = TypeVar("T")


class PostgresBackend:
    dialect: Dialect = "postgres"
    finite_decimals = False  # numeric(p, s) holds NaN

    def __init__(self, dsn: str, *, pool_size: int, timeout_seconds: float) -> None:
        self._dsn = dsn
        self._pool_size = pool_size
        self._timeout_ms = max(1, int(timeout_seconds * 1000))
        # Idle connections, the most recently used last (taken first).
        self._idle: list[Connection] = []
        self._slots = asyncio.Semaphore(pool_size)
        self._all: set[Connection] = set()
        self._cancels: set[asyncio.Task[None]] = set()
        # The connection ``ready`` checked for a statement (its task), if still idle.
        self._checked: weakref.WeakKeyDictionary[asyncio.Task[Any], Connection] = (
            weakref.WeakKeyDictionary()
        )

    async def _connect(self) -> Connection:
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
            text = str(error).strip().replace("\n", " ")
            raise BackendError(
                f"cannot connect to PostgreSQL: {text}; check [backend] dsn (host, port, user, "
                "password, database) and that the server is running and reachable"
            ) from None
        self._all.add(conn)
        return conn

    async def _acquire(self) -> Connection:
        """The connection ``ready`` checked for this statement if it is still idle, else
        the most recently used idle one, else a new one."""
        task = asyncio.current_task()
        checked = None if task is None else self._checked.pop(task, None)
        if checked is not None and checked in self._idle:
            self._idle.remove(checked)
            if not checked.closed and not checked.broken:
                return checked
            self._all.discard(checked)
        while self._idle:
            conn = self._take_idle()
            if not conn.closed and not conn.broken:
                return conn
            self._all.discard(conn)
        return await self._connect()

    def _take_idle(self) -> Connection:
        """The most recently used idle connection that ``ready`` did not check for another
        statement, or, if there is none, the most recently used one."""
        marked = set(self._checked.values())
        for index in range(len(self._idle) - 1, -1, -1):
            if self._idle[index] not in marked:
                return self._idle.pop(index)
        return self._idle.pop()

    async def ready(self, token: CancelToken) -> None:
        """A live connection at hand for this statement's ``fetch_all`` (see the module's
        docstring). NotReady if PostgreSQL cannot be reached or does not answer within
        READY_TIMEOUT_SECONDS; QueryCanceled if ``token`` fires meanwhile."""
        owner = asyncio.current_task()
        check = asyncio.ensure_future(self._check(owner))
        loop = asyncio.get_running_loop()

        def stop() -> None:  # from any thread
            loop.call_soon_threadsafe(check.cancel)

        token.bind(stop)
        try:
            if token.canceled:
                check.cancel()
            await check
        except asyncio.CancelledError:
            if check.cancelled() and token.canceled and (owner is None or not owner.cancelling()):
                raise QueryCanceled(f"canceled due to {token.reason}") from None
            raise
        finally:
            token.bind(None)

    async def _check(self, owner: asyncio.Task[Any] | None) -> None:
        """An idle connection that has just answered ``SELECT 1`` (dead ones are closed on
        the way), or a new one; put back on top of the idle ones, marked for ``owner``.
        Waiting for a free slot of the pool does not count against READY_TIMEOUT_SECONDS."""
        async with self._slots:
            while True:
                if not self._idle or (
                    # every idle connection was checked for another statement: a new one,
                    # while the pool may grow
                    len(self._all) < self._pool_size
                    and set(self._idle) <= set(self._checked.values())
                ):
                    conn = await self._timed(self._connect())  # a round trip: it is alive
                    break
                conn = self._take_idle()
                if conn.closed or conn.broken:
                    self._all.discard(conn)
                    continue
                try:
                    await self._timed(conn.execute("SELECT 1"))
                except psycopg.Error as error:
                    logger.info("a pooled PostgreSQL connection is dead, closed: %s", error)
                    await self._discard(conn)
                    continue
                except BaseException:  # timed out or cancelled mid-way: its state is unknown
                    await self._discard(conn)
                    raise
                break
            self._idle.append(conn)
            if owner is not None:
                self._checked[owner] = conn

    async def _timed(self, work: Awaitable[T]) -> T:
        """``work``, within READY_TIMEOUT_SECONDS; NotReady if it fails or takes longer."""
        try:
            async with asyncio.timeout(READY_TIMEOUT_SECONDS):
                return await work
        except TimeoutError:
            raise NotReady(
                f"PostgreSQL did not answer within {READY_TIMEOUT_SECONDS:g} seconds"
            ) from None
        except BackendError as error:  # cannot connect
            raise NotReady(str(error)) from None

    async def schema_declared(self, schema: str) -> Schema:
        async with self._slots:
            conn = await self._acquire()
            try:
                cur = await conn.execute(SCHEMA_QUERY.format(placeholder="%s"), [schema])
                rows = await cur.fetchall()
            except psycopg.Error as error:
                await self._discard(conn)
                raise BackendError(f"PostgreSQL: {error}") from None
            self._idle.append(conn)
        return group_declared([tuple(row) for row in rows])

    async def schema_keys(self, schema: str) -> tuple[DeclaredKey, ...]:
        rows = await self._fetch_at_start(_CONSTRAINTS_QUERY, [schema])
        return tuple(_declared_key(row) for row in rows)

    async def key_check(self, schema: str, table: str, column: str) -> KeyCheck:
        """Only a unique index counts: other sessions can change the rows at any time, so
        rows unique today prove nothing about tomorrow's."""
        found = await self._fetch_at_start(_UNIQUE_INDEX_QUERY, [schema, table, column])
        return KeyCheck.DECLARED if found else KeyCheck.UNENFORCED

    async def rows_within(self, schema: str, table: str, limit: int) -> bool:
        """Counted when dpproxy starts: other sessions may add rows later (docs)."""
        query = pgsql.SQL("SELECT COUNT(*) FROM (SELECT 1 FROM {}.{} LIMIT %s) AS s").format(
            pgsql.Identifier(schema), pgsql.Identifier(table)
        )
        rows = await self._fetch_at_start(query, [limit + 1])
        return single_count(rows, f"the rows of {schema}.{table}") <= limit

    async def database_collation(self) -> PgCollation:
        """The database's default collation (pg_database), read when dpproxy starts."""
        rows = await self._fetch_at_start(DATABASE_QUERY, [])
        if len(rows) != 1 or not isinstance(rows[0][0], dict):
            raise BackendError("PostgreSQL: the current database is not in pg_database")
        return database_collation(rows[0][0])

    async def collation(self, name: str) -> PgCollation | None:
        """The collation a column declares (information_schema's name, with its schema
        unless pg_catalog), or None if pg_collation has no such collation."""
        rows = await self._fetch_at_start(COLLATION_QUERY, [name, name])
        if len(rows) != 1 or not isinstance(rows[0][0], dict):
            return None
        return named_collation(name, rows[0][0])

    async def _fetch_at_start(
        self, query: pgsql.Composed | str, params: list[object]
    ) -> list[tuple[Any, ...]]:
        """The rows of one query dpproxy sends when it starts (not an analyst's)."""
        async with self._slots:
            conn = await self._acquire()
            try:
                cur = await conn.execute(query, params)
                found = await cur.fetchall()
            except psycopg.Error as error:
                await self._discard(conn)
                raise BackendError(f"PostgreSQL: {error}") from None
            self._idle.append(conn)
        return found

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
                    self._idle.append(conn)
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

    def _canceller(self, conn: Connection) -> Callable[[], None]:
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

    async def _cancel(self, conn: Connection) -> None:
        try:
            await conn.cancel_safe(timeout=CANCEL_TIMEOUT_SECONDS)
        except psycopg.Error as error:
            logger.warning("cancelling a PostgreSQL query failed: %s", error)

    async def _discard(self, conn: Connection) -> None:
        self._all.discard(conn)
        try:
            await conn.close()
        except psycopg.Error as error:
            logger.warning("closing a PostgreSQL connection failed: %s", error)

    async def close(self) -> None:
        for conn in list(self._all):
            await conn.close()
        self._all.clear()


def _declared_key(row: tuple[Any, ...]) -> DeclaredKey:
    """A row of _CONSTRAINTS_QUERY as a DeclaredKey."""
    table, kind, name, columns, referenced, referenced_columns, on_update, on_delete = row[:8]
    match, deferrable, deferred = row[8:11]
    foreign = kind == "f"
    return DeclaredKey(
        str(table),
        str(kind),
        tuple(str(column) for column in columns),
        name=str(name),
        referenced_table=str(referenced) if foreign and referenced is not None else None,
        referenced_columns=tuple(str(column) for column in referenced_columns or ()),
        update_rule=str(on_update) if foreign else "a",
        delete_rule=str(on_delete) if foreign else "a",
        match_full=foreign and match == "f",
        deferrable=bool(deferrable),
        deferred=bool(deferred),
    )
