"""In a transaction block, the extended protocol's Parse or Bind of a query takes the
transaction's snapshot, as in PostgreSQL 15 (its parse analysis needs one): SET
TRANSACTION ISOLATION LEVEL, READ WRITE or SNAPSHOT is then 25001. A Describe of a
prepared statement takes none. Before, dpproxy counted only Execute and Describe, so it
took SET TRANSACTION after a Parse and refused it after a Describe of a statement.

Each sequence of messages goes to a real dpproxy server and to the PostgreSQL test server
over the wire; every reply must be the same.
"""

from __future__ import annotations

import socket
import struct

import pytest

from tests.integration.server import RunningServer
from tests.integration.test_transaction_statements import Message, fields, read_message, wire

pytestmark = pytest.mark.integration


def _message(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def _text(text: str) -> bytes:
    return text.encode() + b"\0"


def parse(sql: str, name: str = "") -> bytes:
    return _message(b"P", _text(name) + _text(sql) + struct.pack("!h", 0))


def bind(name: str = "") -> bytes:
    return _message(b"B", _text("") + _text(name) + struct.pack("!hhh", 0, 0, 0))


def describe_statement(name: str) -> bytes:
    return _message(b"D", b"S" + _text(name))


SYNC = _message(b"S", b"")


def query(sql: str) -> bytes:
    return _message(b"Q", _text(sql))


SERIALIZABLE = query("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE")
ISOLATION = query("SHOW transaction_isolation")

# Each case: the messages sent, in groups that each end with Sync or a Query (one
# ReadyForQuery each). Statements are prepared under names unique to their case.
CASES = [
    [query("BEGIN"), parse("SELECT 1") + SYNC, SERIALIZABLE],
    [query("BEGIN"), parse("SELECT 1", "a1") + SYNC, query("SET TRANSACTION READ WRITE")],
    [
        query("BEGIN ISOLATION LEVEL REPEATABLE READ"),
        parse("SELECT 1") + SYNC,
        query("SET TRANSACTION SNAPSHOT '00000003-00000002-1'"),
    ],
    [parse("SELECT 2", "a2") + SYNC, query("BEGIN"), bind("a2") + SYNC, SERIALIZABLE],
    # Not queries, or no snapshot: SET TRANSACTION is still taken.
    [query("BEGIN"), parse("SHOW TimeZone") + SYNC, SERIALIZABLE, ISOLATION],
    [
        parse("SELECT 3", "a3") + SYNC,
        query("BEGIN"),
        describe_statement("a3") + SYNC,
        SERIALIZABLE,
        ISOLATION,
    ],
    [parse("SELECT 4", "a4") + SYNC, query("BEGIN"), SERIALIZABLE, ISOLATION],
]


def replies(sock: socket.socket, groups: list[bytes]) -> list[list[Message]]:
    """What the server answers to each group, up to its ReadyForQuery; then the block
    is rolled back and the case's statements closed."""
    buffer = bytearray()
    answered: list[list[Message]] = []
    for group in [*groups, query("ROLLBACK"), query("DEALLOCATE ALL")]:
        sock.sendall(group)
        answer: list[Message] = []
        while True:
            kind, body = read_message(sock, buffer)
            if kind in (b"E", b"N"):
                answer.append((kind.decode(), fields(body)["C"]))
            elif kind == b"D":
                answer.append(("D",))
            else:
                answer.append((kind.decode(),))
            if kind == b"Z":
                answer.append(("status", body.decode()))
                break
        answered.append(answer)
    return answered


@pytest.fixture(scope="module")
def server(duckdb_server: RunningServer) -> RunningServer:
    return duckdb_server  # the package's: these tests leave nothing the others could see


def test_parse_and_bind_of_a_query_take_the_snapshot_as_in_postgresql(
    server: RunningServer, pg_dsn: str
) -> None:
    differences = []
    with (
        wire(pg_dsn, options="-c default_transaction_read_only=on") as postgresql,
        wire(server.dsn("alice")) as dpproxy,
    ):
        for groups in CASES:
            expected, got = replies(postgresql, groups), replies(dpproxy, groups)
            if got != expected:
                differences.append(f"{groups}\n    PostgreSQL: {expected}\n    dpproxy: {got}")
    assert not differences, "\n".join(differences)
