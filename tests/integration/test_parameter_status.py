"""ParameterStatus as PostgreSQL 15 sends it: once per reported parameter whose value
changed, with its last value, just before ReadyForQuery (ReportChangedGUCOptions), in the
order of PostgreSQL's parameter table.

Each case goes to a real dpproxy server and to the PostgreSQL test server over the wire,
and every message must be the same. Before, dpproxy sent one ParameterStatus per SET
(before its CommandComplete), also for a SET to the value it had, and for a value that a
ROLLBACK or a failed Query then undid (with a second one for the undoing).
"""

from __future__ import annotations

import socket
import struct

import pytest

from tests.integration.server import RunningServer
from tests.integration.test_transaction_statements import (
    Message,
    answers,
    fields,
    query,
    read_message,
    wire,
)

pytestmark = pytest.mark.integration

CASES = [
    # Two SETs of one parameter in a Query: one message, the last value.
    "SET TimeZone = 'Europe/Paris'; SET TimeZone = 'Asia/Tokyo'",
    # A SET to the value it has: none.
    "SET TimeZone = 'UTC'",
    "SET TIME ZONE 'Europe/Paris';; SET TIME ZONE 'Europe/Paris';; RESET TimeZone",
    "SET application_name = 'a'; RESET application_name",
    # Several parameters: PostgreSQL's order, whatever the order of the SETs.
    "SET TimeZone = 'Europe/Paris'; SET application_name = 'x'; SET DateStyle = 'ISO, DMY'; "
    "SET default_transaction_read_only = off; SET client_encoding = 'UTF8'",
    # Undone before ReadyForQuery: none; undone by a later Query: reported again.
    "BEGIN; SET TimeZone = 'Europe/Paris'; ROLLBACK",
    "BEGIN;; SET TimeZone = 'Europe/Paris';; ROLLBACK",
    "SET TimeZone = 'Europe/Paris'; SELECT 1/0",
    "BEGIN;; SET DateStyle = 'ISO, DMY';; SELECT 1/0;; ROLLBACK",
    "BEGIN;; SAVEPOINT s;; SET DateStyle = 'ISO, YMD';; ROLLBACK TO s;; COMMIT",
    # An error undoes at once what the innermost savepoint (else the block) changed.
    "BEGIN;; SET DateStyle = 'ISO, DMY';; SAVEPOINT s;; SET DateStyle = 'ISO, YMD';; "
    "SELECT 1/0;; ROLLBACK TO s;; SHOW DateStyle;; ROLLBACK",
    "BEGIN;; SET LOCAL TimeZone = 'Europe/Paris';; COMMIT",
    "SET LOCAL TimeZone = 'Europe/Paris'",
    "SET TimeZone = 'Europe/Paris';; DISCARD ALL",
    "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE; "
    "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY",
]


@pytest.fixture(scope="module")
def server(duckdb_server: RunningServer) -> RunningServer:
    return duckdb_server  # the package's: these tests leave nothing the others could see


def test_parameter_status_is_sent_as_postgresql_sends_it(
    server: RunningServer, pg_dsn: str
) -> None:
    differences = []
    with (
        wire(pg_dsn, options="-c default_transaction_read_only=on -c TimeZone=UTC") as postgresql,
        wire(server.dsn("alice")) as dpproxy,
    ):
        for case in CASES:
            expected, got = answers(postgresql, case), answers(dpproxy, case)
            if got != expected:
                differences.append(f"{case}\n    PostgreSQL: {expected}\n    dpproxy: {got}")
    assert not differences, "\n".join(differences)


# --- The extended protocol: reported at Sync, before ReadyForQuery -----------------------


def _message(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def _run_set(sql: str) -> bytes:
    """Parse, Bind and Execute of ``sql`` (unnamed), then Flush: no Sync yet."""
    parse = _message(b"P", b"\0" + sql.encode() + b"\0" + struct.pack("!h", 0))
    bind = _message(b"B", b"\0\0" + struct.pack("!hhh", 0, 0, 0))
    execute = _message(b"E", b"\0" + struct.pack("!i", 0))
    return parse + bind + execute + _message(b"H", b"")


def _read(sock: socket.socket, buffer: bytearray, count: int) -> list[Message]:
    replies: list[Message] = []
    for _ in range(count):
        kind, body = read_message(sock, buffer)
        if kind == b"S":
            name, value, _ = body.split(b"\0")
            replies.append(("S", name.decode(), value.decode()))
        elif kind in (b"E", b"N"):
            replies.append((kind.decode(), fields(body)["C"]))
        else:
            replies.append((kind.decode(),))
    return replies


def extended(sock: socket.socket) -> list[list[Message]]:
    """Two SETs of TimeZone run by Execute (each answered before Sync), then Sync."""
    buffer = bytearray()
    seen = []
    for sql in ("SET TimeZone = 'Europe/Paris'", "SET TimeZone = 'Asia/Tokyo'"):
        sock.sendall(_run_set(sql))
        seen.append(_read(sock, buffer, 3))  # ParseComplete, BindComplete, CommandComplete
    sock.sendall(_message(b"S", b""))
    seen.append(_read(sock, buffer, 2))
    return seen


def test_the_extended_protocol_reports_at_sync(server: RunningServer, pg_dsn: str) -> None:
    with (
        wire(pg_dsn, options="-c TimeZone=UTC") as postgresql,
        wire(server.dsn("alice")) as dpproxy,
    ):
        expected, got = extended(postgresql), extended(dpproxy)
        query(dpproxy, "RESET ALL")
    assert expected[-1] == [("S", "TimeZone", "Asia/Tokyo"), ("Z",)]
    assert got == expected
