"""PostgreSQL backend: a small pool of read-only connections with a statement timeout."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import psycopg

from proxy.backends import (
    SCHEMA_QUERY,
    BackendError,
    CancelToken,
    QueryCanceled,
    group_columns,
)
from rewriter.catalog import ColumnType
from rewriter.planner import Dialect

QUERY_CANCELED = "57014"


class PostgresBackend:
    dialect: Dialect = "postgres"

    def __init__(self, dsn: str, *, pool_size: int, timeout_seconds: float) -> None:
        self._dsn = dsn
        self._timeout_ms = max(1, int(timeout_seconds * 1000))
        self._idle: asyncio.Queue[psycopg.AsyncConnection[tuple[object, ...]]] = asyncio.Queue()
        self._slots = asyncio.Semaphore(pool_size)
        self._all: set[psycopg.AsyncConnection[tuple[object, ...]]] = set()

    async def _connect(self) -> psycopg.AsyncConnection[tuple[object, ...]]:
        try:
            conn = await psycopg.AsyncConnection.connect(
                self._dsn,
                autocommit=True,
                options=(
                    f"-c default_transaction_read_only=on -c statement_timeout={self._timeout_ms}"
                ),
                application_name="dpproxy",
            )
        except psycopg.Error as error:
            raise BackendError(f"cannot connect to PostgreSQL: {error}") from None
        self._all.add(conn)
        return conn

    async def _acquire(self) -> psycopg.AsyncConnection[tuple[object, ...]]:
        while not self._idle.empty():
            conn = self._idle.get_nowait()
            if not conn.closed:
                return conn
            self._all.discard(conn)
        return await self._connect()

    async def schema_columns(self, schema: str) -> Mapping[str, Mapping[str, ColumnType]]:
        async with self._slots:
            conn = await self._acquire()
            try:
                cur = await conn.execute(SCHEMA_QUERY.format(placeholder="%s"), [schema])
                rows = await cur.fetchall()
            except psycopg.Error as error:
                await self._discard(conn)
                raise BackendError(f"PostgreSQL: {error}") from None
            self._idle.put_nowait(conn)
        return group_columns([(str(t), str(c), str(d)) for t, c, d in rows])

    async def fetch_one(self, sql: str, token: CancelToken) -> tuple[object, ...]:
        async with self._slots:
            conn = await self._acquire()
            token.bind(conn.cancel)
            try:
                cur = await conn.execute(sql.encode())
                rows = await cur.fetchall()
            except psycopg.Error as error:
                await self._discard(conn)
                if error.sqlstate == QUERY_CANCELED and token.canceled:
                    raise QueryCanceled("canceled on request") from None
                raise BackendError(f"PostgreSQL: {error}") from None
            finally:
                token.bind(None)
            self._idle.put_nowait(conn)
        if len(rows) != 1:
            raise BackendError(f"expected one row, got {len(rows)}")
        return tuple(rows[0])

    async def _discard(self, conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
        self._all.discard(conn)
        await conn.close()

    async def close(self) -> None:
        for conn in list(self._all):
            await conn.close()
        self._all.clear()
