"""A client that goes away in the middle of a DP query: the audit log says what it got.

A real `dpproxy serve` over the demo data, its state in SQLite or in PostgreSQL, and real
clients: psycopg, whose socket is also used raw, to send a Query message and vanish (with
psycopg's own goodbye, a bare end of stream, or a reset). The answer cache is on.

- Gone while the database runs the charged query: the query is stopped, the charge
  stands, and the audit record says failed, "the client disconnected before the answer
  was sent", with 0 rows (never accepted, with a row count, as before).
- Gone while the charge is being written: charged, never run, recorded so too.
- Gone before the charge (a new query, or a repeat the answer cache would answer): free,
  recorded as an error, as a cancel request before the charge is.
- Gone while an answer's accepted record is being written: the append-only audit keeps
  "accepted"; the server's log names the record whose answer did not reach its client.
- Gone behind data it sent that the server has not read yet (a Query, then more
  pipelined messages than the server buffers, so that it pauses reading the socket): the
  end of the stream waits behind that data, and the server sees it by looking at the
  socket while the statement runs and once more before the record. The same records as
  above; before, the query ran to its end and was recorded accepted, its answer (or a
  cached one) written into a connection the client had closed, without a warning.
- A pipelined client that stays (many Syncs, psycopg's pipeline mode) is answered.

Every case: one record per query, and `dpproxy audit verify` finds the chain intact.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import socket
import struct
import termios
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest

from accountant import PostgresState, StateLocation
from proxy.demo_data import DemoSize, generate, load_postgres, write_duckdb
from proxy.failures import CLIENT_LEFT_REASON
from tests.accountant.backends import query, write_lock_held
from tests.integration.server import RunningServer, dpproxy_in_process, start, write_config

pytestmark = pytest.mark.integration

PATIENTS = 200
STORES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
#: ``visits`` repeats each row this often: a DP query over it runs for about ten seconds.
SLOW_REPEAT = 1_000_000
#: The PostgreSQL engine's ``visits`` sleeps this long (the case of an answer recorded
#: while its client leaves needs a query that ends on its own, at a known moment).
ENGINE_SLEEP_SECONDS = 2
#: A query stopped because its client went ends within this of its start.
STOPPED_WITHIN_MS = 5000.0
#: The charge of one query (alice's default ε).
EPSILON = Decimal(1)
#: How long a record or a state is waited for before the test fails.
WAIT_SECONDS = 60.0
#: Setup waits (not measurements): long enough for the server to get where it waits.
SETTLE_SECONDS = 1.0
GONE_BEFORE_THE_CHARGE = "canceled due to client disconnect before the charge"
#: Sync messages a client pipelines after its Query (225 KB): more than the 64 KiB the
#: server reads at once and its stream's 128 KiB buffer, so that it pauses reading the
#: socket while the statement runs; little enough that the server's kernel takes the rest
#: at once, and the end of the stream right after it.
PIPELINED_SYNCS = 45_000
SYNC = b"S\x00\x00\x00\x04"

Connection = psycopg.Connection[tuple[object, ...]]


@dataclass
class Setup:
    server: RunningServer
    location: StateLocation


def state_in_postgres(config: Path, dsn: str, schema: str) -> None:
    """Keep the state of the server of ``config`` in PostgreSQL (``[state] dsn``)."""
    text = config.read_text()
    start_at = text.index("[state]\n")
    end = text.index("\n", start_at + len("[state]\n"))
    config.write_text(f'{text[:start_at]}[state]\ndsn = "{dsn}"\nschema = "{schema}"{text[end:]}')


def drop_schema(dsn: str, schema: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextlib.contextmanager
def server_with_state(
    store: str, directory: Path, backend: str, request: pytest.FixtureRequest
) -> Iterator[Setup]:
    """`dpproxy serve` with the answer cache on, its state in ``store``."""
    config = write_config(directory, backend=backend)
    text = config.read_text().replace("answer_cache_seconds = 0", "answer_cache_seconds = 3600")
    config.write_text(text)
    location: StateLocation = directory / "state.sqlite"
    schema = None
    if store == "postgres":
        dsn = request.getfixturevalue("pg_dsn")
        schema = f"dpproxy_gone_{uuid.uuid4().hex[:10]}"
        state_in_postgres(config, dsn, schema)
        location = PostgresState(dsn, schema)
    running = start(config)
    try:
        yield Setup(running, location)
    finally:
        log = running.stop()
        if isinstance(location, PostgresState):
            drop_schema(location.dsn, location.schema)
    assert "Traceback" not in log, log


@pytest.fixture(scope="module", params=STORES)
def setup(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Setup]:
    directory = tmp_path_factory.mktemp(f"gone-{request.param}")
    write_duckdb(generate(DemoSize(patients=PATIENTS)), directory / "demo.duckdb")
    with duckdb.connect(str(directory / "demo.duckdb")) as conn:
        conn.execute("ALTER TABLE visits RENAME TO visits_data")
        conn.execute(
            f"CREATE VIEW visits AS SELECT v.* FROM visits_data v, range({SLOW_REPEAT}) AS r(i)"
        )
    with server_with_state(request.param, directory, "", request) as running:
        yield running


# --- the client ---------------------------------------------------------------------


def connect(server: RunningServer) -> Connection:
    return psycopg.connect(server.dsn("alice"), autocommit=True, connect_timeout=10)


def send_query(conn: Connection, sql: str) -> socket.socket:
    """Send a Query message on ``conn``'s socket, past psycopg; returns that socket."""
    sock = socket.socket(fileno=os.dup(conn.fileno()))
    body = sql.encode() + b"\0"
    sock.sendall(b"Q" + struct.pack("!i", len(body) + 4) + body)
    return sock


def query_message(sql: str) -> bytes:
    body = sql.encode() + b"\0"
    return b"Q" + struct.pack("!i", len(body) + 4) + body


def send_pipelined(conn: Connection, *sqls: str) -> socket.socket:
    """Send a Query message for each of ``sqls``, then PIPELINED_SYNCS Sync messages, on
    ``conn``'s socket, past psycopg; return once the server's kernel has taken them all."""
    sock = socket.socket(fileno=os.dup(conn.fileno()))
    sock.sendall(b"".join(map(query_message, sqls)) + SYNC * PIPELINED_SYNCS)

    def unsent() -> int:
        return int(struct.unpack("i", fcntl.ioctl(sock, termios.TIOCOUTQ, b"\0" * 4))[0])

    wait_until(lambda: unsent() == 0, "the server's kernel to take the pipelined messages")
    return sock


def read_messages(sock: socket.socket, ready: int) -> list[tuple[bytes, bytes]]:
    """The server's messages on ``sock`` up to the ``ready``-th ReadyForQuery."""
    sock.settimeout(WAIT_SECONDS)
    data = bytearray()
    at = 0
    out: list[tuple[bytes, bytes]] = []
    while ready > 0:
        while len(data) - at < 5 or len(data) - at < 1 + struct.unpack_from("!i", data, at + 1)[0]:
            chunk = sock.recv(1 << 16)
            assert chunk, f"the server ended the connection after {out[-3:]}"
            data += chunk
        size = struct.unpack_from("!i", data, at + 1)[0]
        out.append((bytes(data[at : at + 1]), bytes(data[at + 5 : at + 1 + size])))
        ready -= data[at : at + 1] == b"Z"
        at += 1 + size
    return out


def ask_and_vanish(conn: Connection, sql: str) -> None:
    """Send a Query message and the end of the stream in one TCP segment (corked): the
    server reads both before it can start on the query."""
    sock = socket.socket(fileno=os.dup(conn.fileno()))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
    body = sql.encode() + b"\0"
    sock.sendall(b"Q" + struct.pack("!i", len(body) + 4) + body)
    vanish(conn, sock, "eof")


def vanish(conn: Connection, sock: socket.socket | None, how: str) -> None:
    """The client goes: ``terminate`` (psycopg's close: Terminate, then the end of the
    stream), ``eof`` (the end of the stream, nothing said), ``reset`` (a TCP reset)."""
    if sock is None:
        sock = socket.socket(fileno=os.dup(conn.fileno()))
    if how == "eof":
        sock.shutdown(socket.SHUT_RDWR)
    elif how == "reset":
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
    conn.close()


# --- what the store and the admin commands say ----------------------------------------


def quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {WAIT_SECONDS} s for {what}")
        time.sleep(0.05)


def charged(location: StateLocation, sql: str) -> list[tuple[Any, ...]]:
    """The reservations of ``sql``: (status, ε in nano, audit record id)."""
    return query(
        location,
        f"SELECT status, epsilon_nano, audit_id FROM reservations WHERE sql = {quoted(sql)}",
    )


def recorded(location: StateLocation, sql: str) -> int:
    rows = query(location, f"SELECT count(*) FROM audit_log WHERE sql = {quoted(sql)}")
    return int(rows[0][0])


def admin(setup: Setup, *args: str) -> str:
    result = dpproxy_in_process(*args, "--config", str(setup.server.config))
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def records(setup: Setup, sql: str) -> list[dict[str, Any]]:
    """The audit records of ``sql``, as `dpproxy audit export` gives them."""
    out = admin(setup, "audit", "export", "--analyst", "alice", "--format", "jsonl")
    return [r for r in map(json.loads, out.splitlines()) if r["sql"] == sql]


def the_record(setup: Setup, sql: str) -> dict[str, Any]:
    """The one audit record of ``sql``, once written, and the chain verified."""
    wait_until(lambda: recorded(setup.location, sql) > 0, f"the audit record of {sql!r}")
    found = records(setup, sql)
    assert len(found) == 1, found
    assert "intact" in admin(setup, "audit", "verify")
    return found[0]


def spent(setup: Setup) -> Decimal:
    rows = json.loads(admin(setup, "budget", "show", "alice", "--json"))
    return Decimal(rows[0]["spent"])


def unique(table: str) -> str:
    """A COUNT over ``table`` new to the server: never planned, and not answered from the
    answer cache (which shares an answer between statements of the same plan)."""
    column = {"patients": "birth_year", "visits": "cost"}[table]
    below = secrets.randbelow(10**9) + 1
    return f"SELECT COUNT(*) AS n FROM {table} WHERE {column} > -{below}"


def assert_failed_and_charged(setup: Setup, sql: str, record: dict[str, Any]) -> None:
    assert record["decision"] == "failed", record
    assert record["reason"] == CLIENT_LEFT_REASON
    assert record["rows"] == 0
    assert Decimal(record["epsilon"]) == EPSILON
    # The ledger keeps the charge: finished by this record.
    assert charged(setup.location, sql) == [("finished", 1_000_000_000, record["id"])]


# --- the tests -----------------------------------------------------------------------


@pytest.mark.parametrize("how", ["terminate", "eof", "reset"])
def test_gone_while_the_database_runs_the_query(setup: Setup, how: str) -> None:
    sql = unique("visits")
    before = spent(setup)
    conn = connect(setup.server)
    sock = send_query(conn, sql)
    # Charged, and running in the database (for about ten seconds): the client goes.
    wait_until(lambda: bool(charged(setup.location, sql)), "the charge")
    vanish(conn, sock, how)
    record = the_record(setup, sql)
    assert_failed_and_charged(setup, sql, record)
    assert spent(setup) == before + EPSILON
    # Stopped when the client went, not run to its end (about ten seconds).
    assert record["duration_ms"] < STOPPED_WITHIN_MS, record


def test_gone_while_the_charge_is_written(setup: Setup) -> None:
    sql = unique("patients")
    before = spent(setup)
    conn = connect(setup.server)
    with write_lock_held(setup.location):
        sock = send_query(conn, sql)
        waiting_for_the_lock(setup.location)
        vanish(conn, sock, "eof")
        time.sleep(SETTLE_SECONDS)  # the server sees it go
    record = the_record(setup, sql)  # charged (the charge was on its way), never run
    assert_failed_and_charged(setup, sql, record)
    assert spent(setup) == before + EPSILON


def waiting_for_the_lock(location: StateLocation) -> None:
    """Return once the server waits for the store's write lock (PostgreSQL shows it;
    SQLite does not: a pause)."""
    if not isinstance(location, PostgresState):
        time.sleep(2 * SETTLE_SECONDS)
        return

    def waiting() -> bool:
        rows = query(
            location,
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
        )
        return int(rows[0][0]) > 0

    wait_until(waiting, "the server to wait for the state store's lock")


def test_gone_before_the_charge_costs_nothing(setup: Setup) -> None:
    sql = unique("patients")
    before = spent(setup)
    conn = connect(setup.server)
    ask_and_vanish(conn, sql)
    record = the_record(setup, sql)
    assert (record["decision"], record["reason"]) == ("error", GONE_BEFORE_THE_CHARGE)
    assert Decimal(record["epsilon"]) == 0
    assert record["rows"] is None
    assert charged(setup.location, sql) == []
    assert spent(setup) == before


def test_gone_before_a_cached_answer_is_sent(setup: Setup) -> None:
    sql = unique("patients")
    with connect(setup.server) as conn:
        first = conn.execute(sql).fetchall()  # charged; then the cache answers it
        assert conn.execute(sql).fetchall() == first
    before = spent(setup)
    conn = connect(setup.server)
    ask_and_vanish(conn, sql)
    wait_until(lambda: recorded(setup.location, sql) == 3, "the third record")
    decisions = [(r["decision"], r["reason"], r["rows"]) for r in records(setup, sql)]
    assert [d[0] for d in decisions[:2]] == ["accepted", "cached"]
    assert decisions[2] == ("error", GONE_BEFORE_THE_CHARGE, None)
    assert spent(setup) == before
    assert "intact" in admin(setup, "audit", "verify")


# --- a client gone behind data the server has not read yet ---------------------------


@pytest.mark.parametrize("how", ["terminate", "eof", "reset"])
def test_gone_behind_unread_data_while_the_database_runs_the_query(setup: Setup, how: str) -> None:
    sql = unique("visits")
    before = spent(setup)
    conn = connect(setup.server)
    sock = send_pipelined(conn, sql)
    wait_until(lambda: bool(charged(setup.location, sql)), "the charge")
    vanish(conn, sock, how)  # its end of the stream (or reset) is behind the Syncs
    record = the_record(setup, sql)
    assert_failed_and_charged(setup, sql, record)
    assert spent(setup) == before + EPSILON
    assert record["duration_ms"] < STOPPED_WITHIN_MS, record


def test_gone_behind_unread_data_before_a_cached_answer(setup: Setup) -> None:
    sql = unique("patients")
    with connect(setup.server) as conn:
        conn.execute(sql).fetchall()  # charged; the answer cache has it now
    # A statement the rewriter rejects first: its record waits for the store's lock,
    # while the client sends the cached one behind it, and goes.
    rejected = unique("patients").replace("COUNT(*) AS n", "*")
    before = spent(setup)
    conn = connect(setup.server)
    with write_lock_held(setup.location):
        sock = send_pipelined(conn, rejected, sql)
        time.sleep(SETTLE_SECONDS)  # the server waits for the lock
        vanish(conn, sock, "eof")
        time.sleep(2 * SETTLE_SECONDS)  # the server sees it go
    assert the_record(setup, rejected)["decision"] == "rejected"
    wait_until(lambda: recorded(setup.location, sql) == 2, "the second record")
    decisions = [(r["decision"], r["reason"], r["rows"]) for r in records(setup, sql)]
    assert decisions[0][0] == "accepted"
    assert decisions[1] == ("error", GONE_BEFORE_THE_CHARGE, None)  # never "cached"
    assert spent(setup) == before
    assert "intact" in admin(setup, "audit", "verify")


def test_a_pipelined_client_that_stays_is_answered(setup: Setup) -> None:
    sql = unique("visits")  # about ten seconds: its connection is looked at meanwhile
    before = spent(setup)
    with connect(setup.server) as conn:
        sock = send_pipelined(conn, sql)
        messages = read_messages(sock, ready=1 + PIPELINED_SYNCS)
        sock.close()
        answer = [kind for kind, _ in messages if kind in (b"T", b"D", b"C", b"E")]
        assert answer[:3] == [b"T", b"D", b"C"], messages[:5]
        assert sum(kind == b"Z" for kind, _ in messages) == 1 + PIPELINED_SYNCS
        assert conn.execute("SELECT 1").fetchall() == [(1,)]
    record = the_record(setup, sql)
    assert (record["decision"], record["rows"]) == ("accepted", 1), record
    assert charged(setup.location, sql) == [("finished", 1_000_000_000, record["id"])]
    assert spent(setup) == before + EPSILON


def test_psycopg_pipeline_mode_is_answered(setup: Setup) -> None:
    sqls = [unique("patients") for _ in range(5)]
    with connect(setup.server) as conn:
        with conn.pipeline():
            cursors = [conn.execute(sql) for sql in sqls]
        answers = [cursor.fetchall() for cursor in cursors]
    assert [len(rows) for rows in answers] == [1] * len(sqls)
    for sql in sqls:
        wait_until(lambda sql=sql: recorded(setup.location, sql) == 1, f"the record of {sql}")
    out = admin(setup, "audit", "export", "--analyst", "alice", "--format", "jsonl")
    found = {r["sql"]: r for r in map(json.loads, out.splitlines()) if r["sql"] in sqls}
    assert {sql: (r["decision"], r["rows"]) for sql, r in found.items()} == {
        sql: ("accepted", 1) for sql in sqls
    }


# --- an answer whose accepted record was written while its client left ----------------


@pytest.fixture(params=STORES)
def engine_setup(
    request: pytest.FixtureRequest, tmp_path: Path, pg_dsn: str
) -> Iterator[tuple[Setup, str]]:
    """A server on the PostgreSQL engine, whose ``visits`` sleeps ENGINE_SLEEP_SECONDS
    (a query ends on its own, at a moment pg_stat_activity shows)."""
    schema = f"dpproxy_gone_engine_{uuid.uuid4().hex[:8]}"
    load_postgres(generate(DemoSize(patients=PATIENTS)), pg_dsn, schema=schema)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE {schema}.visits RENAME TO visits_data")
        conn.execute(
            f"CREATE VIEW {schema}.visits AS SELECT v.* FROM {schema}.visits_data v "
            f"CROSS JOIN (SELECT pg_sleep({ENGINE_SLEEP_SECONDS})) AS s"
        )
    (tmp_path / "demo.duckdb").touch()  # the configuration names one; the engine is PostgreSQL
    backend = f'engine = "postgres"\ndsn = "{pg_dsn}"\nschema = "{schema}"\n#'
    try:
        with server_with_state(request.param, tmp_path, backend, request) as running:
            yield running, schema
    finally:
        drop_schema(pg_dsn, schema)


def engine_running(dsn: str, schema: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
            "AND application_name = 'dpproxy' AND query LIKE %s",
            [f"%{schema}%"],
        ).fetchone()
    return row is not None and int(row[0]) > 0


@pytest.mark.postgres  # the engine
def test_gone_while_the_accepted_record_is_written(
    engine_setup: tuple[Setup, str], pg_dsn: str
) -> None:
    setup, schema = engine_setup
    sql = unique("visits")
    conn = connect(setup.server)
    sock = send_query(conn, sql)
    wait_until(lambda: bool(charged(setup.location, sql)), "the charge")
    with write_lock_held(setup.location):
        wait_until(lambda: engine_running(pg_dsn, schema), "the query in the database")
        wait_until(lambda: not engine_running(pg_dsn, schema), "the end of the query")
        time.sleep(SETTLE_SECONDS)  # the answer is made; its record waits for the lock
        vanish(conn, sock, "eof")
        time.sleep(SETTLE_SECONDS)  # the server sees it go
    # The client was there when its answer was recorded: the record (append-only) says
    # accepted; the server's log tells the admin that the answer did not reach it.
    record = the_record(setup, sql)
    assert (record["decision"], record["rows"]) == ("accepted", 1), record
    assert Decimal(record["epsilon"]) == EPSILON
    log = setup.server.stop()
    assert f"audit record {record['id']} says accepted" in log, log
    assert "its answer did not reach the client" in log
    assert "Traceback" not in log, log


@pytest.mark.postgres  # the engine
def test_gone_behind_unread_data_while_the_accepted_record_is_written(
    engine_setup: tuple[Setup, str], pg_dsn: str
) -> None:
    setup, schema = engine_setup
    sql = unique("visits")
    conn = connect(setup.server)
    sock = send_pipelined(conn, sql)
    wait_until(lambda: bool(charged(setup.location, sql)), "the charge")
    with write_lock_held(setup.location):
        wait_until(lambda: engine_running(pg_dsn, schema), "the query in the database")
        wait_until(lambda: not engine_running(pg_dsn, schema), "the end of the query")
        time.sleep(SETTLE_SECONDS)  # the answer is made; its record waits for the lock
        vanish(conn, sock, "eof")  # behind the Syncs the server has not read
        time.sleep(2 * SETTLE_SECONDS)  # the server sees it go
    record = the_record(setup, sql)
    assert (record["decision"], record["rows"]) == ("accepted", 1), record
    log = setup.server.stop()
    assert f"audit record {record['id']} says accepted" in log, log
    assert "its answer did not reach the client" in log
    assert "Traceback" not in log, log
