"""Before a query is charged, the engine is made ready (Backend.ready), so that analysts
do not pay ε for queries the engine could not run.

Review: a DuckDB file copied over in place (or replaced by a rename) while dpproxy ran
made every later query fail after its charge ("Corrupted ALP segment"), or answer from a
mix of old and new pages, until a restart; a PostgreSQL database that was down, or a
pooled connection that had died, failed each query after its charge. Now the DuckDB file
is opened again when it changed (and refused, free, when it cannot be read or no longer
declares what dpproxy was started with), and a live PostgreSQL connection is at hand
before the charge (else the query is refused, free, with 08006). Real components only:
DuckDB files, the PostgreSQL test server, the SQLite state store.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import psycopg
import pytest

from accountant import AnalystBudget, Decision, Epsilon
from proxy.asker import Asker
from proxy.backends import BackendError, CancelToken, KeyCheck, NotReady, QueryCanceled
from proxy.backends import postgres as postgres_backend
from proxy.backends.duckdb import DuckDBBackend
from proxy.backends.postgres import PostgresBackend
from proxy.ledger import AsyncLedger
from proxy.pipeline import Pipeline
from proxy.postprocess import PostProcessor
from proxy.seam import QueryError
from rewriter import OpenDPNoise
from tests.rewriter.tables import catalog, duckdb_file, load_postgres

BUDGET = AnalystBudget(total=Epsilon(100), default_per_query=Epsilon(1))
ALICE = Asker("alice", BUDGET, "127.0.0.1")
COUNT = "SELECT COUNT(*) FROM visits"
#: PostgreSQL's "nothing was charged" refusal for a database that cannot be used.
CONNECTION_FAILURE = "08006"


def many_rows(n: int) -> list[tuple[int, int, str, float | None, int | None]]:
    return [(i, i, "A", 1.0, 1) for i in range(1, n + 1)]


def copy_in_place(source: Path, target: Path) -> None:
    """As `cp source target`: the same inode, rewritten."""
    inode = target.stat().st_ino
    shutil.copyfile(source, target)
    assert target.stat().st_ino == inode


def count(backend: DuckDBBackend) -> object:
    async def run() -> object:
        await backend.ready(CancelToken())
        return (await backend.fetch_all(COUNT, CancelToken()))[0][0]

    return asyncio.run(run())


# --- DuckDB: the backend ------------------------------------------------------------


@pytest.mark.parametrize("name", ["data.duckdb", "memory.duckdb", "it's.duckdb"])
def test_each_opening_is_read_only_and_alone(tmp_path: Path, name: str) -> None:
    """Opened in an in-memory DuckDB of its own (not through duckdb.connect(path), whose
    instance cache would serve the old file again), whatever its name: as locked down
    as the first opening was, and so is the next one."""
    data = duckdb_file(tmp_path / name)
    outside = duckdb_file(tmp_path / "outside.duckdb")
    (tmp_path / "x.csv").write_text("a\n1\n")
    backend = DuckDBBackend(data, timeout_seconds=10, settle_seconds=0)

    async def run() -> None:
        assert await backend.fetch_all(COUNT, CancelToken()) == [(8,)]
        copy_in_place(duckdb_file(tmp_path / "new.duckdb", many_rows(5)), data)
        await backend.ready(CancelToken())
        assert await backend.fetch_all(COUNT, CancelToken()) == [(5,)]
        assert await backend.fetch_all(
            "SELECT COUNT(*) FROM duckdb_databases() WHERE NOT internal", CancelToken()
        ) == [(1,)]
        for sql in (
            "CREATE TABLE u (x INTEGER)",
            "INSERT INTO visits SELECT * FROM visits",
            f"ATTACH '{outside}' AS outside",
            f"SELECT * FROM read_csv('{tmp_path / 'x.csv'}')",
            "SET enable_external_access = true",
        ):
            with pytest.raises(BackendError):
                await backend.fetch_all(sql, CancelToken())

    try:
        asyncio.run(run())
    finally:
        asyncio.run(backend.close())


def test_a_file_copied_over_in_place_is_opened_again(tmp_path: Path) -> None:
    data = duckdb_file(tmp_path / "data.duckdb")
    other = duckdb_file(tmp_path / "other.duckdb", many_rows(3000))
    backend = DuckDBBackend(data, timeout_seconds=10, settle_seconds=0)
    try:
        asyncio.run(backend.schema_declared("main"))
        assert count(backend) == 8
        copy_in_place(other, data)
        assert count(backend) == 3000  # the new file, read whole (no old cached pages)
        copy_in_place(tmp_path / "other.duckdb", data)  # the same bytes again: still fine
        assert count(backend) == 3000
    finally:
        asyncio.run(backend.close())


def test_a_file_replaced_by_a_rename_is_opened_again(tmp_path: Path) -> None:
    data = duckdb_file(tmp_path / "data.duckdb")
    backend = DuckDBBackend(data, timeout_seconds=10, settle_seconds=0)
    try:
        asyncio.run(backend.schema_declared("main"))
        assert count(backend) == 8
        os.replace(duckdb_file(tmp_path / "new.duckdb", many_rows(50)), data)
        assert count(backend) == 50
    finally:
        asyncio.run(backend.close())


def test_a_copy_that_keeps_size_and_modification_time_is_seen(tmp_path: Path) -> None:
    """`cp -p` of a file of the same size: only the change time tells (it cannot be set)."""
    data = duckdb_file(tmp_path / "data.duckdb", many_rows(100))
    other = duckdb_file(tmp_path / "other.duckdb", [(i, i, "B", 2.0, 2) for i in range(1, 41)])
    backend = DuckDBBackend(data, timeout_seconds=10, settle_seconds=0)
    try:
        asyncio.run(backend.schema_declared("main"))
        assert count(backend) == 100
        before = data.stat()
        if other.stat().st_size != before.st_size:
            pytest.skip("the two files differ in size on this DuckDB version")
        copy_in_place(other, data)
        os.utime(data, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert count(backend) == 40
    finally:
        asyncio.run(backend.close())


def test_a_file_modified_a_moment_ago_is_not_opened_yet(tmp_path: Path) -> None:
    """A copy over the file may still be writing it: wait until it has been quiet."""
    data = duckdb_file(tmp_path / "data.duckdb")
    other = duckdb_file(tmp_path / "other.duckdb", many_rows(10))
    backend = DuckDBBackend(data, timeout_seconds=10, settle_seconds=0.5)

    async def run() -> None:
        await backend.schema_declared("main")
        copy_in_place(other, data)
        with pytest.raises(NotReady, match="may still be being written") as caught:
            await backend.ready(CancelToken())
        assert not caught.value.needs_restart
        await asyncio.sleep(0.6)
        await backend.ready(CancelToken())
        assert await backend.fetch_all(COUNT, CancelToken()) == [(10,)]
        # A modification time set in the future (cp -p of such a file) is not a copy
        # going on: opened at once.
        copy_in_place(duckdb_file(tmp_path / "third.duckdb", many_rows(11)), data)
        future = time.time_ns() + 3600 * 10**9
        os.utime(data, ns=(future, future))
        await backend.ready(CancelToken())
        assert await backend.fetch_all(COUNT, CancelToken()) == [(11,)]

    try:
        asyncio.run(run())
    finally:
        asyncio.run(backend.close())


def test_a_file_that_cannot_be_read_refuses_until_a_good_one_is_back(tmp_path: Path) -> None:
    data = duckdb_file(tmp_path / "data.duckdb")
    backup = tmp_path / "backup.duckdb"
    shutil.copyfile(data, backup)
    backend = DuckDBBackend(data, timeout_seconds=10, settle_seconds=0)

    async def run() -> None:
        await backend.schema_declared("main")
        await backend.ready(CancelToken())
        data.write_bytes(b"not a DuckDB file at all" * 1000)  # in place
        for _ in range(2):  # the second time from what was found the first time
            with pytest.raises(NotReady, match="cannot open as a DuckDB database") as caught:
                await backend.ready(CancelToken())
            assert not caught.value.needs_restart
        data.unlink()
        with pytest.raises(NotReady, match="cannot read the DuckDB file"):
            await backend.ready(CancelToken())
        shutil.copyfile(backup, data)
        await backend.ready(CancelToken())
        assert await backend.fetch_all(COUNT, CancelToken()) == [(8,)]

    try:
        asyncio.run(run())
    finally:
        asyncio.run(backend.close())


def test_a_file_with_other_tables_or_columns_needs_a_restart(tmp_path: Path) -> None:
    data = duckdb_file(tmp_path / "data.duckdb")
    backup = tmp_path / "backup.duckdb"
    shutil.copyfile(data, backup)
    changed = duckdb_file(tmp_path / "changed.duckdb")
    with duckdb.connect(str(changed)) as conn:
        conn.execute("ALTER TABLE visits ALTER COLUMN stay TYPE BIGINT")
    extra = duckdb_file(tmp_path / "extra.duckdb")
    with duckdb.connect(str(extra)) as conn:
        conn.execute("CREATE TABLE secrets (x INTEGER)")
    wider = duckdb_file(tmp_path / "wider.duckdb")
    with duckdb.connect(str(wider)) as conn:
        conn.execute("ALTER TABLE visits ADD COLUMN extra INTEGER")
    backend = DuckDBBackend(data, timeout_seconds=10, settle_seconds=0)

    async def run() -> None:
        await backend.schema_declared("main")
        copy_in_place(changed, data)
        with pytest.raises(NotReady, match=r"column visits\.stay is BIGINT, was INTEGER") as caught:
            await backend.ready(CancelToken())
        assert caught.value.needs_restart and "restart dpproxy" in str(caught.value)
        copy_in_place(extra, data)
        with pytest.raises(NotReady, match="table secrets is new"):
            await backend.ready(CancelToken())
        copy_in_place(wider, data)
        with pytest.raises(NotReady, match=r"column visits\.extra is new"):
            await backend.ready(CancelToken())
        copy_in_place(backup, data)  # the file dpproxy started with, back: answered again
        await backend.ready(CancelToken())
        assert await backend.fetch_all(COUNT, CancelToken()) == [(8,)]

    try:
        asyncio.run(run())
    finally:
        asyncio.run(backend.close())


def test_keys_found_unique_by_their_rows_need_a_restart_declared_keys_do_not(
    tmp_path: Path,
) -> None:
    """A key checked by its rows at start proves nothing about a new file (the check is
    not redone at query time: its outcome would depend on the data); a declared key is
    checked to be still declared."""
    data = duckdb_file(tmp_path / "data.duckdb")
    with duckdb.connect(str(data)) as conn:
        conn.execute("CREATE TABLE keyed (k INTEGER PRIMARY KEY)")
    same = tmp_path / "same.duckdb"
    shutil.copyfile(data, same)
    backend = DuckDBBackend(data, timeout_seconds=10, settle_seconds=0)

    async def run() -> None:
        await backend.schema_declared("main")
        assert await backend.key_check("main", "keyed", "k") is KeyCheck.DECLARED
        copy_in_place(same, data)
        await backend.ready(CancelToken())  # declared key still declared: fine
        assert await backend.key_check("main", "visits", "visit_id") is KeyCheck.VERIFIED
        copy_in_place(same, data)
        with pytest.raises(NotReady, match=r"visits\.visit_id.*found unique") as caught:
            await backend.ready(CancelToken())
        assert caught.value.needs_restart

    try:
        asyncio.run(run())
    finally:
        asyncio.run(backend.close())


def test_a_query_running_on_the_old_file_ends_there_new_ones_read_the_new(
    tmp_path: Path,
) -> None:
    data = duckdb_file(tmp_path / "data.duckdb")
    # About 2 s here: every row of visits (8 of them) 30 million times.
    slow = "SELECT COUNT(*), SUM(hash(r.range) % 3) >= 0 FROM visits, range(30000000) r"

    async def run() -> None:
        backend = DuckDBBackend(data, timeout_seconds=60, settle_seconds=0)
        try:
            await backend.schema_declared("main")
            first = backend._opening.connection
            running = asyncio.ensure_future(backend.fetch_all(slow, CancelToken()))
            await asyncio.sleep(0.2)
            assert not running.done()
            os.replace(duckdb_file(tmp_path / "new.duckdb", many_rows(20)), data)
            await backend.ready(CancelToken())
            assert await backend.fetch_all(COUNT, CancelToken()) == [(20,)]
            assert not running.done()  # still running on the previous opening
            assert await running == [(8 * 30000000, True)]
            with pytest.raises(duckdb.ConnectionException):  # closed once it was done
                first.execute("SELECT 1")
            # Several sessions making it ready at once: one opening, all answered.
            os.replace(duckdb_file(tmp_path / "third.duckdb", many_rows(30)), data)
            await asyncio.gather(*(backend.ready(CancelToken()) for _ in range(8)))
            answers = await asyncio.gather(
                *(backend.fetch_all(COUNT, CancelToken()) for _ in range(8))
            )
            assert answers == [[(30,)]] * 8
        finally:
            await backend.close()

    asyncio.run(run())


def test_the_check_of_an_unchanged_file_is_cheap(tmp_path: Path) -> None:
    data = duckdb_file(tmp_path / "data.duckdb")
    backend = DuckDBBackend(data, timeout_seconds=10, settle_seconds=0)
    rounds = 20000

    async def run() -> float:
        token = CancelToken()
        await backend.ready(token)
        started = time.perf_counter()
        for _ in range(rounds):
            await backend.ready(token)
        return (time.perf_counter() - started) / rounds

    try:
        each = asyncio.run(run())
    finally:
        asyncio.run(backend.close())
    print(f"DuckDB ready() on an unchanged file: {each * 1e6:.2f} µs")
    assert each < 0.001  # one os.stat; a generous bound for slow machines


# --- DuckDB: the pipeline charges nothing for a file it cannot use ------------------


@pytest.fixture
def duck_pipeline(tmp_path: Path) -> Iterator[tuple[Pipeline, Path]]:
    data = duckdb_file(tmp_path / "data.duckdb")
    backend = DuckDBBackend(data, timeout_seconds=10, settle_seconds=0)
    asyncio.run(backend.schema_declared("main"))  # as the server does at start
    ledger = AsyncLedger(tmp_path / "state.sqlite")
    made = Pipeline(catalog("main"), backend, ledger, OpenDPNoise(), PostProcessor())
    try:
        yield made, data
    finally:
        ledger.close()
        asyncio.run(backend.close())


def answer(pipeline: Pipeline, sql: str = COUNT, epsilon: str = "1") -> float:
    async def run() -> float:
        result = await pipeline.answer(ALICE, sql, Epsilon(epsilon), CancelToken())
        value = result.rows[0][0]
        assert value is not None
        return float(value)

    return asyncio.run(run())


def refused(pipeline: Pipeline) -> QueryError:
    with pytest.raises(QueryError) as caught:
        answer(pipeline)
    return caught.value


def decisions(pipeline: Pipeline) -> list[tuple[Decision, str]]:
    records = asyncio.run(pipeline.ledger.records("alice", tuple(Decision)))
    return [(r.decision, r.epsilon.plain) for r in records]


def test_the_pipeline_answers_from_a_file_copied_over_in_place(
    duck_pipeline: tuple[Pipeline, Path], tmp_path: Path
) -> None:
    pipeline, data = duck_pipeline
    assert answer(pipeline, epsilon="10") < 100  # 8 rows (noise at ε=10: a few units)
    copy_in_place(duckdb_file(tmp_path / "other.duckdb", many_rows(3000)), data)
    assert answer(pipeline, epsilon="10") > 2000  # the new file's 3000 rows
    assert decisions(pipeline) == [(Decision.ACCEPTED, "10"), (Decision.ACCEPTED, "10")]


def test_the_pipeline_charges_nothing_for_a_file_it_cannot_use(
    duck_pipeline: tuple[Pipeline, Path], tmp_path: Path
) -> None:
    pipeline, data = duck_pipeline
    backup = tmp_path / "backup.duckdb"
    shutil.copyfile(data, backup)
    answer(pipeline)
    data.write_bytes(b"\0garbage" * 4096)
    error = refused(pipeline)
    assert error.sqlstate == CONNECTION_FAILURE
    assert error.message == "the database cannot be used now; nothing was charged"
    assert "garbage" not in str(error.hint) and str(data) not in error.message
    changed = duckdb_file(tmp_path / "changed.duckdb")
    with duckdb.connect(str(changed)) as conn:
        conn.execute("ALTER TABLE visits DROP COLUMN stay")
    copy_in_place(changed, data)
    error = refused(pipeline)
    assert error.sqlstate == CONNECTION_FAILURE
    assert "changed since dpproxy started" in error.message
    assert error.message.endswith("nothing was charged")
    assert error.hint == "ask an admin to restart dpproxy"
    copy_in_place(backup, data)
    answer(pipeline)
    assert decisions(pipeline) == [
        (Decision.ACCEPTED, "1"),
        (Decision.ERROR, "0"),
        (Decision.ERROR, "0"),
        (Decision.ACCEPTED, "1"),
    ]


# --- PostgreSQL ---------------------------------------------------------------------


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def terminate(pg_dsn: str, pids: set[object]) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        for pid in pids:
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            alive = admin.execute(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE pid = ANY(%s)", [list(pids)]
            ).fetchone()
            if alive == (0,):
                return
            time.sleep(0.05)


@pytest.mark.postgres
def test_dead_pooled_connections_are_replaced_before_the_query(pg_dsn: str) -> None:
    async def run() -> None:
        backend = PostgresBackend(pg_dsn, pool_size=3, timeout_seconds=30)
        try:
            rows = await asyncio.gather(
                *(
                    backend.fetch_all("SELECT pg_backend_pid(), pg_sleep(0.2)", CancelToken())
                    for _ in range(3)
                )
            )
            pids = {r[0][0] for r in rows}
            assert len(pids) == 3
            await asyncio.to_thread(terminate, pg_dsn, pids)
            await backend.ready(CancelToken())
            # The first query after the check runs: no dead connection is left on top.
            (pid,) = await backend.fetch_all("SELECT pg_backend_pid()", CancelToken())
            assert pid[0] not in pids
        finally:
            await backend.close()

    asyncio.run(run())


@pytest.mark.postgres
def test_the_checked_connection_is_the_one_the_query_uses(pg_dsn: str) -> None:
    async def run() -> None:
        backend = PostgresBackend(pg_dsn, pool_size=4, timeout_seconds=30)
        try:

            async def statement() -> tuple[object, object]:
                await backend.ready(CancelToken())
                checked = asyncio.current_task()
                assert checked is not None
                marked = backend._checked.get(checked)
                assert marked is not None
                await asyncio.sleep(0.01)  # others check and run meanwhile
                (row,) = await backend.fetch_all("SELECT pg_backend_pid()", CancelToken())
                return marked.info.backend_pid, row[0]

            # As many statements at once as the pool has connections: each one its own.
            pairs = await asyncio.gather(*(statement() for _ in range(4)))
            assert all(marked == used for marked, used in pairs)
            assert len({marked for marked, _ in pairs}) == 4
            assert len(backend._all) == 4
        finally:
            await backend.close()

    asyncio.run(run())


def test_an_unreachable_database_is_not_ready() -> None:
    async def run() -> None:
        backend = PostgresBackend(
            f"postgresql://postgres@127.0.0.1:{closed_port()}/postgres",
            pool_size=2,
            timeout_seconds=30,
        )
        try:
            with pytest.raises(NotReady, match="cannot connect to PostgreSQL"):
                await backend.ready(CancelToken())
        finally:
            await backend.close()

    asyncio.run(run())


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A port that accepts connections and never says a word (a hung server)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stop.set()
        thread.join()
        for conn in accepted:
            conn.close()
        listener.close()


def test_a_silent_database_is_not_ready_after_the_check_timeout(
    silent_server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres_backend, "READY_TIMEOUT_SECONDS", 0.5)

    async def run() -> float:
        backend = PostgresBackend(
            f"postgresql://postgres@127.0.0.1:{silent_server}/postgres?sslmode=disable",
            pool_size=2,
            timeout_seconds=30,
        )
        started = time.monotonic()
        try:
            with pytest.raises(NotReady, match="did not answer within 0.5 seconds"):
                await backend.ready(CancelToken())
            return time.monotonic() - started
        finally:
            await backend.close()

    assert asyncio.run(run()) < 5


def test_a_cancel_stops_the_check(silent_server: int) -> None:
    async def run() -> float:
        backend = PostgresBackend(
            f"postgresql://postgres@127.0.0.1:{silent_server}/postgres?sslmode=disable",
            pool_size=2,
            timeout_seconds=30,
        )
        token = CancelToken()
        asyncio.get_running_loop().call_later(0.3, token.cancel)
        started = time.monotonic()
        try:
            with pytest.raises(QueryCanceled):
                await backend.ready(token)
            return time.monotonic() - started
        finally:
            await backend.close()

    assert asyncio.run(run()) < 3


@pytest.fixture
def pg_pipeline(pg_dsn: str, pg_schema: str, tmp_path: Path) -> Iterator[Pipeline]:
    load_postgres(pg_dsn, pg_schema, many_rows(20))
    backend = PostgresBackend(pg_dsn, pool_size=2, timeout_seconds=30)
    ledger = AsyncLedger(tmp_path / "state.sqlite")
    made = Pipeline(catalog(pg_schema), backend, ledger, OpenDPNoise(), PostProcessor())
    try:
        yield made
    finally:
        ledger.close()
        asyncio.run(backend.close())


@pytest.mark.postgres
def test_the_pipeline_charges_nothing_when_postgres_cannot_be_reached(
    pg_pipeline: Pipeline, pg_dsn: str
) -> None:
    answer(pg_pipeline)
    backend = pg_pipeline.backend
    assert isinstance(backend, PostgresBackend)
    # Every pooled connection dies (a restart of PostgreSQL, an idle timeout): the next
    # query is answered on a new connection, charged once.
    pids = {c.info.backend_pid for c in backend._all}
    terminate(pg_dsn, pids)
    answer(pg_pipeline)
    # The database cannot be reached: refused, free, with the words of such refusals.
    backend._dsn = f"postgresql://postgres@127.0.0.1:{closed_port()}/postgres"
    terminate(pg_dsn, {c.info.backend_pid for c in backend._all})
    error = refused(pg_pipeline)
    assert error.sqlstate == CONNECTION_FAILURE
    assert error.message == "the database cannot be used now; nothing was charged"
    assert "127.0.0.1" not in error.message + str(error.hint)
    assert decisions(pg_pipeline) == [
        (Decision.ACCEPTED, "1"),
        (Decision.ACCEPTED, "1"),
        (Decision.ERROR, "0"),
    ]
