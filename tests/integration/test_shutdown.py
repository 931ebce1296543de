"""SIGTERM as PostgreSQL does it: new connections refused, idle sessions told (FATAL
57P01 admin_shutdown), a statement under way finished and answered within the grace
period, so that an answer already charged is never lost; past the grace period it is
recorded as failed and its client told too.

The statement is held up in PostgreSQL by a table lock the test takes, so the order of
events (query under way, SIGTERM, lock released) is the test's own, not a matter of time.
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from accountant import AuditRecord, Decision, StateStore
from proxy.server import SHUTDOWN_MESSAGE
from tests.integration.server import (
    PASSWORDS,
    RunningServer,
    fresh_demo_server,
)
from tests.proxy.test_server import Raw, error_fields, query

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

PATIENTS = 300
QUERY = "SELECT COUNT(*) FROM visits"


@pytest.fixture
def running(tmp_path_factory: pytest.TempPathFactory, pg_dsn: str) -> Iterator[RunningServer]:
    """A `dpproxy serve` over the demo data in PostgreSQL, for one test (it is stopped)."""
    with fresh_demo_server(
        tmp_path_factory, "shutdown", "postgres", patients=PATIENTS, pg_dsn=pg_dsn
    ) as server:
        yield server


class Ask(threading.Thread):
    """QUERY on ``conn`` in a thread of its own: its rows, or the error it got."""

    def __init__(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        super().__init__(daemon=True)
        self.conn = conn
        self.rows: list[tuple[object, ...]] | None = None
        self.error: psycopg.Error | None = None

    def run(self) -> None:
        try:
            self.rows = self.conn.execute(QUERY).fetchall()
        except psycopg.Error as error:
            self.error = error


def test_a_busy_query_is_answered_and_idle_sessions_are_told(
    running: RunningServer, pg_dsn: str
) -> None:
    idle = connect(running)
    idle.execute("SELECT 1")
    busy = RawAsk(running.port)
    schema = _schema(running.config)
    with psycopg.connect(pg_dsn) as locker:
        locker.execute(f'LOCK TABLE "{schema}".visits IN ACCESS EXCLUSIVE MODE')
        busy.start()
        _wait_for_lock_wait(pg_dsn, schema)  # charged, and now waiting in PostgreSQL
        log = _stop(running)
        locker.rollback()  # the query goes on, within the grace period
    busy.join(60)
    assert busy.error is None
    # The answer, whole: its row, CommandComplete and ReadyForQuery ...
    assert [kind for kind, _ in busy.answer] == [b"N", b"T", b"D", b"C", b"Z"]
    # ... then the session ends, as the idle one did, with PostgreSQL's admin_shutdown.
    assert busy.goodbye is not None and busy.closed
    _assert_shutdown_error(*busy.goodbye)
    _assert_told(idle)
    assert running.process.wait(60) == 0
    with pytest.raises(psycopg.OperationalError):
        connect(running)
    last = _records(running)[-1]
    assert (last.decision, last.sql, last.rows) == (Decision.ACCEPTED, QUERY, 1)
    assert "Traceback" not in log


def test_a_query_busy_past_the_grace_period_is_recorded_and_its_client_told(
    running: RunningServer, pg_dsn: str
) -> None:
    busy = connect(running)
    schema = _schema(running.config)
    with psycopg.connect(pg_dsn) as locker:
        locker.execute(f'LOCK TABLE "{schema}".visits IN ACCESS EXCLUSIVE MODE')
        ask = Ask(busy)
        ask.start()
        _wait_for_lock_wait(pg_dsn, schema)
        log = _stop(running)
        ask.join(60)  # the lock is held past the grace period
        locker.rollback()
    assert isinstance(ask.error, psycopg.errors.AdminShutdown)
    assert SHUTDOWN_MESSAGE in str(ask.error)
    busy.close()
    assert running.process.wait(60) == 0
    last = _records(running)[-1]
    assert (last.decision, last.sql) == (Decision.FAILED, QUERY)
    assert last.reason is not None and "dpproxy was stopped" in last.reason
    assert last.epsilon is not None and not last.epsilon.is_zero()  # the charge stands
    assert "Traceback" not in log


class RawAsk(threading.Thread):
    """QUERY from a protocol client of the test's own (every byte the server sends is
    seen, in order): the answer's messages, the message after it, and whether the
    server then closed the connection."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.client = Raw(port)
        self.client.sock.settimeout(60)
        self.client.login("alice", PASSWORDS["alice"])
        self.answer: list[tuple[bytes, bytes]] = []
        self.goodbye: tuple[bytes, bytes] | None = None
        self.closed = False
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            self.client.send(query(QUERY))
            self.answer = self.client.until_ready()
            self.goodbye = self.client.message()
            self.closed = self.client.closed()
        except (OSError, EOFError) as error:
            self.error = error
        finally:
            self.client.close()


def connect(server: RunningServer) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(server.dsn("alice"), autocommit=True, connect_timeout=10)


def _assert_told(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """What the server sent on the idle connection: a FATAL 57P01 ErrorResponse, then the
    end of the stream. Read from the socket itself: a client that sends a query after the
    server closed its end may get a reset before it reads the error (libpq then reports
    only "server closed the connection unexpectedly")."""
    with socket.socket(fileno=os.dup(conn.fileno())) as raw:
        raw.settimeout(30)
        received = b""
        while chunk := raw.recv(65536):
            received += chunk
    conn.close()
    _assert_shutdown_error(received[:1], received[5:])


def _assert_shutdown_error(kind: bytes, body: bytes) -> None:
    assert kind == b"E"
    fields = error_fields(body)
    assert (fields["S"], fields["C"], fields["M"]) == ("FATAL", "57P01", SHUTDOWN_MESSAGE)


def _schema(config: Path) -> str:
    backend = tomllib.loads(config.read_text())["backend"]
    return str(backend["schema"])


def _wait_for_lock_wait(pg_dsn: str, schema: str) -> None:
    """Until dpproxy's query (it names the schema) waits for the test's lock."""
    deadline = time.monotonic() + 60
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            found = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND position(%s in query) > 0",
                (schema,),
            ).fetchone()
            if found is not None and found[0]:
                return
            time.sleep(0.05)
    raise AssertionError("dpproxy's query never reached PostgreSQL")


def _stop(server: RunningServer) -> str:
    """SIGTERM, and the server's log up to its "stopping" line (it is shutting down)."""
    server.process.send_signal(signal.SIGTERM)
    assert server.process.stderr is not None
    lines: list[str] = []
    while not lines or "stopping" not in lines[-1]:
        line = server.process.stderr.readline()
        if not line:
            raise AssertionError("dpproxy ended without stopping:\n" + "".join(lines))
        lines.append(line)
    return "".join(lines)


def _records(server: RunningServer) -> list[AuditRecord]:
    with StateStore.open(server.config.parent / "state.sqlite") as store:
        return store.audit_records(analyst="alice")
