"""A cancel request or the server's statement timeout stops a backend's query whenever it
comes before the query has ended, and says which it was (57014 with its reason).

DuckDB forgets an interrupt that comes before it has started the query, so a cancel that
lands between the backend's last check and the start of the query was lost: the query ran
to completion. ``FiresAfterTheCheck`` makes that moment deterministic: the token fires just
after the worker thread has read it (found not canceled), right before DuckDB starts. The
server's statement timeout fires the same token (with STATEMENT_TIMEOUT) from its timer.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import duckdb
import psycopg
import pytest

from proxy.backends import (
    STATEMENT_TIMEOUT,
    USER_REQUEST,
    BackendError,
    CancelToken,
    QueryCanceled,
)
from proxy.backends.duckdb import DuckDBBackend
from proxy.backends.postgres import PostgresBackend

#: About 20 s on DuckDB when nothing stops it (2 cores, quiet).
SLOW_DUCKDB = "SELECT count(*) FROM range(6000000000) t(x) WHERE x % 7 = 3"
#: A stopped query ends within this: far below SLOW_DUCKDB's own time, with room for a
#: machine busy with other tests (1 s was once exceeded by 0.2 s under load).
PROMPT_SECONDS = 4.0


class FiresAfterTheCheck(CancelToken):
    """Fires itself (with ``fire_reason``) the first time a thread other than the event
    loop's reads ``canceled``, and answers that read with the value from before: as if the
    cancel or the timeout came right after the backend checked, before DuckDB started."""

    def __init__(self, fire_reason: str) -> None:
        self._state = False
        self._loop_thread = threading.get_ident()
        self.fire_reason = fire_reason
        self.fired_after_check = False
        super().__init__()

    @property
    def canceled(self) -> bool:
        if self.fired_after_check or threading.get_ident() == self._loop_thread:
            return self._state
        self.fired_after_check = True
        before = self._state
        self.cancel(self.fire_reason)
        return before

    @canceled.setter
    def canceled(self, value: bool) -> None:
        self._state = value


@pytest.fixture
def duck(tmp_path: Path) -> Path:
    path = tmp_path / "t.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute("CREATE TABLE t AS SELECT range AS x FROM range(10)")
    return path


@pytest.mark.parametrize("reason", [USER_REQUEST, STATEMENT_TIMEOUT])
def test_duckdb_a_stop_right_before_the_query_starts_is_not_lost(duck: Path, reason: str) -> None:
    async def run() -> None:
        backend = DuckDBBackend(duck, timeout_seconds=60)
        try:
            token = FiresAfterTheCheck(reason)
            began = time.monotonic()
            with pytest.raises(QueryCanceled, match=f"canceled due to {reason}"):
                await backend.fetch_all(SLOW_DUCKDB, token)
            assert time.monotonic() - began < PROMPT_SECONDS
            assert token.fired_after_check and token.reason == reason
            # A cancel once the query has ended does nothing: the answer stands, and the
            # next query on the same connection is not interrupted by it.
            done = CancelToken()
            assert await backend.fetch_all("SELECT SUM(x) FROM t", done) == [(45,)]
            done.cancel()
            await asyncio.sleep(0.05)
            assert await backend.fetch_all("SELECT COUNT(*) FROM t", CancelToken()) == [(10,)]
        finally:
            await backend.close()

    asyncio.run(run())


def test_duckdb_statement_timeout_is_a_cancel_with_its_reason(duck: Path) -> None:
    """The server's statement_timeout_seconds: QueryCanceled, ``token.reason`` the
    timeout (PostgreSQL's 57014 "canceling statement due to statement timeout"), also
    when it fires at any moment around the query's start."""

    async def run() -> None:
        backend = DuckDBBackend(duck, timeout_seconds=0.3)
        try:
            token = CancelToken()
            began = time.monotonic()
            with pytest.raises(QueryCanceled, match="canceled due to statement timeout"):
                await backend.fetch_all(SLOW_DUCKDB, token)
            assert 0.3 <= time.monotonic() - began < 0.3 + PROMPT_SECONDS
            assert token.canceled and token.reason == STATEMENT_TIMEOUT
        finally:
            await backend.close()
        for attempt in range(30):
            backend = DuckDBBackend(duck, timeout_seconds=attempt * 0.0002)
            try:
                token = CancelToken()
                began = time.monotonic()
                with pytest.raises(QueryCanceled):
                    await backend.fetch_all(SLOW_DUCKDB, token)
                assert time.monotonic() - began < PROMPT_SECONDS
                assert token.reason == STATEMENT_TIMEOUT
            finally:
                await backend.close()

    asyncio.run(run())


def test_duckdb_a_cancelled_task_stops_its_query(duck: Path) -> None:
    """A shutdown cancels the session's task: the query in the worker thread stops too,
    at whatever moment around its start the task is cancelled (asyncio.run returns only
    once the worker threads have ended), and no thread is left interrupting."""

    async def run() -> None:
        backend = DuckDBBackend(duck, timeout_seconds=60)
        try:
            for attempt in range(20):
                task = asyncio.create_task(backend.fetch_all(SLOW_DUCKDB, CancelToken()))
                await asyncio.sleep(attempt * 0.0005)
                task.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await task
            assert await backend.fetch_all("SELECT COUNT(*) FROM t", CancelToken()) == [(10,)]
        finally:
            await backend.close()

    began = time.monotonic()
    asyncio.run(run())
    assert time.monotonic() - began < PROMPT_SECONDS + 20 * 0.0005
    assert [t for t in threading.enumerate() if t.name == "dpproxy-duckdb-stop"] == []


@pytest.mark.postgres
def test_postgres_statement_timeout_is_a_cancel_with_its_reason(pg_dsn: str) -> None:
    """PostgreSQL's own statement_timeout (set at connect from statement_timeout_seconds)
    is QueryCanceled with the timeout's reason; a cancel by someone else (an admin's
    pg_cancel_backend) is still a database failure."""

    async def run() -> None:
        backend = PostgresBackend(pg_dsn, pool_size=1, timeout_seconds=0.3)
        try:
            token = CancelToken()
            with pytest.raises(QueryCanceled, match="canceled due to statement timeout"):
                await backend.fetch_all("SELECT pg_sleep(3)", token)
            assert token.canceled and token.reason == STATEMENT_TIMEOUT
            assert await backend.fetch_all("SELECT 1", CancelToken()) == [(1,)]
        finally:
            await backend.close()
        backend = PostgresBackend(pg_dsn, pool_size=1, timeout_seconds=60)
        try:
            token = CancelToken()
            marker = "dpproxy_test_external_cancel"
            query = asyncio.create_task(backend.fetch_all(f"SELECT pg_sleep(3), '{marker}'", token))
            await asyncio.sleep(0.3)
            with psycopg.connect(pg_dsn, autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE %s"
                    " AND pid <> pg_backend_pid()",
                    [f"%{marker}%"],
                )
            with pytest.raises(BackendError) as caught:
                await query
            assert not isinstance(caught.value, QueryCanceled)
            assert not token.canceled
        finally:
            await backend.close()

    asyncio.run(run())
