"""Bad input that must not take dpproxy down or hold up other analysts: huge catalog
answers, statements too long or too deep, slow catalog queries and plans, and a state
store locked by another process. Against the real server (`dpproxy serve`) and clients."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from accountant import AnalystBudget, Decision, Epsilon, StateStore
from proxy.asker import Asker
from proxy.catalog import CatalogResponder
from proxy.catalog import responder as responder_module
from proxy.catalog.database import MAX_BYTES, CatalogDatabase, CatalogResultTooLarge
from proxy.ledger import AsyncLedger
from proxy.responders import SessionContext
from proxy.workers import Workers
from rewriter import Catalog, ColumnType, TablePolicy, build_catalog
from rewriter.parse import MAX_SQL_LENGTH
from tests.integration.server import RunningServer, fresh_demo_server

pytestmark = pytest.mark.integration

PATIENTS = 300
MB = 1024 * 1024


LOCK_TIMEOUT = 2.0  # [state] lock_timeout_seconds: a locked store is refused after 2 s


@contextlib.contextmanager
def duckdb_server(factory: pytest.TempPathFactory, name: str) -> Iterator[RunningServer]:
    """A `dpproxy serve` over DuckDB; fails at the end if it logged a traceback."""
    with fresh_demo_server(
        factory, name, patients=PATIENTS, lock_timeout_seconds=LOCK_TIMEOUT
    ) as running:
        yield running


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with duckdb_server(tmp_path_factory, "robust") as running:
        yield running


def connect(server: RunningServer, user: str) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(server.dsn(user), autocommit=True, connect_timeout=10)


# --- 1. catalog answers are capped in bytes ---


def test_a_catalog_answer_larger_than_the_byte_cap_is_refused(server: RunningServer) -> None:
    rows = MAX_BYTES // MB + 16  # 1 MB each: past the cap in bytes, far below it in rows
    with connect(server, "alice") as conn:
        with pytest.raises(psycopg.errors.ProgramLimitExceeded) as refused:
            conn.execute(f"SELECT repeat('x', {MB}) FROM generate_series(1, {rows})").fetchall()
        assert f"larger than {MAX_BYTES // MB} MB" in str(refused.value)
        assert refused.value.diag.message_hint is not None
        assert "fewer rows" in refused.value.diag.message_hint
        # The session goes on, and an answer below the cap comes whole.
        answer = conn.execute("SELECT repeat('y', 1048576) FROM generate_series(1, 8)").fetchall()
        assert len(answer) == 8 and all(value == "y" * MB for (value,) in answer)


def test_a_catalog_query_out_of_memory_is_the_same_clear_error(server: RunningServer) -> None:
    with connect(server, "alice") as conn:
        with pytest.raises(psycopg.errors.ProgramLimitExceeded) as refused:
            conn.execute(
                f"SELECT repeat('x', {MB}) AS a FROM generate_series(1, 300) ORDER BY a"
            ).fetchall()
        assert "memory" in str(refused.value)
        assert conn.execute("SELECT 1").fetchall() == [(1,)]


def test_the_catalog_database_gives_up_past_the_byte_cap() -> None:
    database = CatalogDatabase(_catalog())
    try:
        with pytest.raises(CatalogResultTooLarge, match="larger than"):
            database.run_blocking(
                f"SELECT repeat('x', {MB}) FROM generate_series(1, {MAX_BYTES // MB + 1})"
            )
        small = database.run_blocking("SELECT repeat('x', 1000) FROM generate_series(1, 5000)")
        assert len(small.rows) == 5000 and 5000 * 1000 < small.size < MAX_BYTES
    finally:
        database.close()


# --- 2. long statements: the length first, parsing off the event loop ---


def test_a_statement_over_the_length_limit_is_refused_before_it_is_parsed(
    server: RunningServer,
) -> None:
    """Thousands of terms and no table: once parsed (seconds, on the event loop) as a
    catalog query, and too deep for the translation (an internal error)."""
    sql = "SELECT " + "+".join(["1"] * (MAX_SQL_LENGTH // 2 + 10_000))
    with connect(server, "alice") as conn:
        with pytest.raises(psycopg.errors.ProgramLimitExceeded) as refused:
            conn.execute(sql)
        assert f"accepts at most {MAX_SQL_LENGTH}" in str(refused.value)
        assert conn.execute("SELECT 1").fetchall() == [(1,)]


def test_a_catalog_query_too_deep_to_translate_is_refused(server: RunningServer) -> None:
    sql = "SELECT " + "+".join(["1"] * (MAX_SQL_LENGTH // 2 - 5_000))
    with connect(server, "alice") as conn:
        with pytest.raises(psycopg.errors.StatementTooComplex, match="nested too deeply"):
            conn.execute(sql)
        assert conn.execute("SELECT 1").fetchall() == [(1,)]


def test_parsing_a_long_statement_leaves_the_event_loop_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A statement of 14,000 constants takes the catalog responder a while to parse (and
    classify: it is a DP query). Meanwhile another analyst's catalog query is answered.

    The compiled parser (sqlglotc) parses it in a tenth of a second and holds the GIL
    while it does, so the statement's translation is made slower here on purpose (a sleep,
    which lets the GIL go): had it run on the event loop, the short query would wait."""
    long = (
        "SELECT COUNT(*) FROM visits WHERE visit_id IN ("
        + ", ".join(str(i) for i in range(14_000))
        + ")"
    )
    assert len(long) < MAX_SQL_LENGTH
    translate = responder_module._translate

    def slow_translate(sql: str, *args: Any) -> Any:
        if sql == long:
            time.sleep(1)
        return translate(sql, *args)

    monkeypatch.setattr(responder_module, "_translate", slow_translate)
    responder = CatalogResponder(_catalog())
    ledger = AsyncLedger(tmp_path / "state.sqlite")
    order: list[str] = []

    async def ask(analyst: str, sql: str, name: str) -> None:
        await responder.answer(sql, _context(ledger, analyst))
        order.append(name)

    async def both() -> None:
        await asyncio.gather(ask("alice", long, "long"), ask("bob", "SELECT 42 AS answer", "short"))

    try:
        asyncio.run(both())
    finally:
        responder.close()
        ledger.close()
    assert order == ["short", "long"]


# --- 3. planning and catalog queries: their own threads, one job per analyst ---


def test_workers_run_one_job_per_analyst_and_others_meanwhile() -> None:
    workers = Workers(2, "test-workers")
    first_started, release_first = threading.Event(), threading.Event()
    order: list[str] = []

    def first() -> str:
        first_started.set()
        release_first.wait(30)
        order.append("alice 1")
        return "alice 1"

    def job(name: str) -> str:
        order.append(name)
        return name

    async def scenario() -> list[str]:
        one = asyncio.create_task(workers.run("alice", first))
        await asyncio.to_thread(first_started.wait, 30)
        two = asyncio.create_task(workers.run("alice", lambda: job("alice 2")))
        bob = await workers.run("bob", lambda: job("bob"))  # while alice's first one runs
        order.append(f"{bob} answered")
        release_first.set()
        return [await one, await two]

    try:
        assert asyncio.run(scenario()) == ["alice 1", "alice 2"]
    finally:
        release_first.set()
        workers.close()
    # alice's second job waited for her first; bob's did not.
    assert order == ["bob", "bob answered", "alice 1", "alice 2"]


def test_a_cancelled_job_still_holds_its_analysts_turn_until_it_ends() -> None:
    workers = Workers(2, "test-workers")
    started, release = threading.Event(), threading.Event()
    order: list[str] = []

    def slow() -> None:
        started.set()
        release.wait(30)
        order.append("slow ended")

    async def scenario() -> None:
        waiting = asyncio.create_task(workers.run("alice", slow))
        await asyncio.to_thread(started.wait, 30)
        waiting.cancel()  # whoever awaited it has gone; the thread cannot be stopped
        with pytest.raises(asyncio.CancelledError):
            await waiting
        after = asyncio.create_task(workers.run("alice", lambda: order.append("next")))
        await asyncio.sleep(0)
        release.set()
        await after

    try:
        asyncio.run(scenario())
    finally:
        release.set()
        workers.close()
    assert order == ["slow ended", "next"]


def test_one_analysts_slow_catalog_queries_do_not_hold_up_another(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """alice loops pg_sleep (a catalog query, free) on as many connections as asyncio's
    default thread pool has threads; bob's new catalog query and his DP query are
    answered before any of alice's sleeps ends."""
    sessions = min(32, (os.cpu_count() or 1) + 4)
    with duckdb_server(tmp_path_factory, "fair") as running:
        sleepers = [connect(running, "alice") for _ in range(sessions)]
        bob = connect(running, "bob")
        slept: list[int] = []
        stop = threading.Event()

        def sleep(conn: psycopg.Connection[tuple[object, ...]]) -> None:
            try:
                while not stop.is_set():
                    conn.execute("SELECT pg_sleep(4)").fetchall()
                    slept.append(1)
            except psycopg.Error:
                return  # the server stopped

        threads = [threading.Thread(target=sleep, args=(c,), daemon=True) for c in sleepers]
        for thread in threads:
            thread.start()
        time.sleep(0.5)  # setup: let alice's sleeps reach the server (not a measurement)
        try:
            catalog = bob.execute("SELECT 'bob' AS who, 17 AS fresh").fetchall()
            slept_before_catalog = len(slept)
            counted = bob.execute("SELECT COUNT(*) FROM visits").fetchall()
            slept_before_count = len(slept)
        finally:
            stop.set()
            bob.close()
            running.stop()  # ends alice's sessions (57P01) while her sleeps wait their turn
            for thread in threads:
                thread.join(30)
            for conn in sleepers:
                conn.close()
    assert catalog == [("bob", 17)] and len(counted) == 1
    assert (slept_before_catalog, slept_before_count) == (0, 0)


# --- 5. a state store locked by another process ---


def test_a_locked_state_store_is_a_clear_error_and_charges_nothing(
    server: RunningServer,
) -> None:
    state = server.config.parent / "state.sqlite"
    with connect(server, "bob") as conn:
        before = _charged(state, "bob")
        lock = sqlite3.connect(state, isolation_level=None)
        try:
            lock.execute("BEGIN EXCLUSIVE")
            with pytest.raises(psycopg.errors.LockNotAvailable) as busy:
                conn.execute("SELECT COUNT(*) FROM visits")  # waits for the store's timeout
        finally:
            lock.execute("ROLLBACK")
            lock.close()
        message = str(busy.value)
        assert "budget ledger is busy" in message and "nothing was charged" in message
        assert busy.value.diag.message_hint is not None
        assert "try again" in busy.value.diag.message_hint
        assert _charged(state, "bob") == before
        # Once the store is free again, the same query is answered and charged once.
        assert len(conn.execute("SELECT COUNT(*) FROM visits").fetchall()) == 1
    assert _charged(state, "bob") == before + 1


# --- helpers ---


def _catalog() -> Catalog:
    columns = {
        "visits": {"visit_id": ColumnType.INTEGER, "patient_id": ColumnType.INTEGER},
        "patients": {"patient_id": ColumnType.INTEGER, "sex": ColumnType.TEXT},
    }
    policies = {
        "visits": TablePolicy(privacy_unit="patient_id"),
        "patients": TablePolicy(privacy_unit="patient_id"),
    }
    return build_catalog(columns, policies, schema="main")


def _context(ledger: AsyncLedger, analyst: str) -> SessionContext:
    budget = AnalystBudget(total=Epsilon(3), default_per_query=Epsilon("0.5"))
    asker = Asker(analyst=analyst, budget=budget, address="127.0.0.1")
    return SessionContext(asker, "demo", {}, catalog=_catalog(), ledger=ledger)


def _charged(state: Path, analyst: str) -> int:
    """How many of the analyst's queries were charged (accepted or failed after charge)."""
    with StateStore.open(state) as store:
        records = store.audit_records(analyst=analyst)
    return sum(r.decision in (Decision.ACCEPTED, Decision.FAILED) for r in records)
