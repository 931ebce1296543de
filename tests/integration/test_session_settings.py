"""Session settings through the real server, as clients send them.

Extra startup-packet parameters (asyncpg's server_settings) are settings, as in
PostgreSQL: before, ``dpproxy.epsilon=0.2`` was dropped and the query cost ε=1. Settings
dpproxy cannot honour are refused instead of reported and ignored; ParameterStatus says
what PostgreSQL would say; a NUL byte inside a Query gets an ERROR and the session goes
on; and a failed login whose audit record the locked state store cannot take is logged
in one line, without a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import sqlite3
import struct
import time
from pathlib import Path

import psycopg
import pytest

from tests.integration.server import (
    PASSWORDS,
    RunningServer,
    demo_database,
    start,
    write_config,
)

asyncpg = pytest.importorskip("asyncpg")  # a test dependency (pyproject's test extra)

pytestmark = pytest.mark.integration
PATIENTS = 200
DIRECTORY_PREFIX = "settings-"


def asyncpg_dsn(server: RunningServer) -> str:
    return f"postgresql://alice:{PASSWORDS['alice']}@127.0.0.1:{server.port}/demo"


def test_asyncpg_server_settings_set_the_session(server: RunningServer) -> None:
    async def go() -> tuple[list[object], list[str]]:
        notices: list[str] = []
        conn = await asyncpg.connect(
            asyncpg_dsn(server),
            server_settings={"dpproxy.epsilon": "0.2", "TimeZone": "europe/berlin"},
        )
        try:
            conn.add_log_listener(lambda _conn, message: notices.append(message.message))
            shown = [
                await conn.fetchval("SHOW dpproxy.epsilon"),
                await conn.fetchval("SHOW TimeZone"),
            ]
            await conn.fetch("SELECT COUNT(*) FROM visits WHERE length_of_stay > 3")
            await conn.execute("SET dpproxy.epsilon = 0.5")
            await conn.execute("RESET dpproxy.epsilon")  # back to the startup value
            shown.append(await conn.fetchval("SHOW dpproxy.epsilon"))
            await asyncio.sleep(0.1)  # notices arrive through the event loop
        finally:
            await conn.close()
        return shown, notices

    shown, notices = asyncio.run(go())
    assert shown == ["0.2", "Europe/Berlin", "0.2"]
    assert any("this answer cost ε=0.2" in notice for notice in notices), notices


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"dpproxy.epsilon": "lots"}, "invalid value for dpproxy.epsilon"),
        ({"DateStyle": "German"}, "ISO style only"),
        ({"TimeZone": "Mars/Olympus"}, '"TimeZone": "Mars/Olympus"'),
        ({"no_such_setting": "on"}, '"no_such_setting"'),
    ],
)
def test_a_bad_startup_setting_ends_the_connection(
    server: RunningServer, settings: dict[str, str], words: str
) -> None:
    async def go() -> None:
        conn = await asyncpg.connect(asyncpg_dsn(server), server_settings=settings)
        await conn.close()

    with pytest.raises(asyncpg.PostgresError, match=words):
        asyncio.run(go())


def test_a_replication_connection_is_refused(server: RunningServer) -> None:
    with pytest.raises(psycopg.OperationalError, match="does not serve replication"):
        psycopg.connect(server.dsn("alice"), replication="database")
    with psycopg.connect(server.dsn("alice"), replication="false") as conn:
        assert conn.execute("SHOW dpproxy.epsilon").fetchone() == ("1",)


def test_psycopg_is_told_what_postgresql_would_tell_it(server: RunningServer) -> None:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="ISO style only"):
            conn.execute("SET datestyle = 'German'")
        assert conn.info.parameter_status("DateStyle") == "ISO, MDY"
        assert conn.execute("SHOW DateStyle").fetchone() == ("ISO, MDY",)
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="Mars/Olympus"):
            conn.execute("SET timezone = 'Mars/Olympus'")
        conn.execute("SET TIME ZONE INTERVAL '+02:00' HOUR TO MINUTE")
        assert conn.info.parameter_status("TimeZone") == "<+02>-02"
        conn.execute("SET application_name = E'a\\nb'")
        assert conn.info.parameter_status("application_name") == "a?b"
        # The session goes on, and answers are charged as usual.
        assert conn.execute("SELECT COUNT(*) FROM visits").fetchone() is not None


def test_settings_from_the_startup_packet_are_reported_at_start(server: RunningServer) -> None:
    """ParameterStatus at start carries what the startup packet set, as in PostgreSQL (the
    defaults were reported, then SHOW disagreed)."""
    with psycopg.connect(
        server.dsn("alice"),
        options="-c TimeZone=Europe/Berlin -c DateStyle=ISO,DMY",
        application_name="report",
        autocommit=True,
    ) as conn:
        assert conn.info.parameter_status("TimeZone") == "Europe/Berlin"
        assert conn.info.parameter_status("DateStyle") == "ISO, DMY"
        assert conn.info.parameter_status("application_name") == "report"
        assert conn.info.parameter_status("server_version") is not None
        assert conn.execute("SHOW TimeZone").fetchone() == ("Europe/Berlin",)


def read_until_ready(sock: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"Z\x00\x00\x00\x05I"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def test_a_nul_inside_a_query_gets_an_error_and_the_session_goes_on(
    server: RunningServer,
) -> None:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        blocking = os.get_blocking(conn.pgconn.socket)
        sock = socket.socket(fileno=conn.pgconn.socket)
        try:
            sock.settimeout(10)
            body = b"SELECT COUNT(*) FROM visits\x00 WHERE 1 = 0\x00"
            sock.sendall(b"Q" + struct.pack("!i", len(body) + 4) + body)
            answer = read_until_ready(sock)
        finally:
            sock.detach()  # the socket stays psycopg's, as it was
            os.set_blocking(conn.pgconn.socket, blocking)
        assert answer.startswith(b"E") and b"VERROR\x00C08P01\x00" in answer, answer
        assert b"NUL byte" in answer
        assert answer.endswith(b"Z\x00\x00\x00\x05I")
        assert conn.execute("SHOW dpproxy.epsilon").fetchone() == ("1",)


def test_a_failed_login_the_locked_state_store_cannot_record_is_audited_later(
    tmp_path: Path,
) -> None:
    demo_database(tmp_path, PATIENTS)
    running = start(write_config(tmp_path, backend="", lock_timeout_seconds=2))
    lock = sqlite3.connect(tmp_path / "state.sqlite", isolation_level=None)

    def failed_logins() -> list[tuple[str, str]]:
        with contextlib.closing(sqlite3.connect(tmp_path / "state.sqlite")) as reader:
            rows = reader.execute(
                "SELECT analyst, reason FROM audit_log WHERE decision = 'auth_failed'"
            ).fetchall()
        return [(str(r[0]), str(r[1])) for r in rows]

    try:
        lock.execute("BEGIN IMMEDIATE")  # as another process writing for too long
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(running.dsn("alice", "wrong"), connect_timeout=10)
        time.sleep(5)  # the state store waits 2 s for its lock (lock_timeout_seconds)
        lock.execute("ROLLBACK")  # the other process lets go: the record is written
        deadline = time.monotonic() + 15
        while not failed_logins() and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        if lock.in_transaction:
            lock.execute("ROLLBACK")
        lock.close()
        log = running.stop()
    assert [analyst for analyst, _ in failed_logins()] == ["alice"]
    assert "now that the state store can be written again" in log
    assert "Traceback" not in log and "never retrieved" not in log, log
