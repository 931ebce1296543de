"""Result formats, and the other refusals of the extended protocol, against a real
`dpproxy serve`: whatever a client asks for, a charged answer reaches it, and what
cannot be answered as asked is refused before anything is charged.

Raw protocol messages play the clients that Execute without a Describe (pgJDBC after
five executions of a statement, asyncpg); psycopg plays libpq's clients.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import json
import os
import socket
import struct
from collections.abc import Iterator

import pytest

from tests.integration.server import PASSWORDS, RunningServer, dpproxy_in_process

pytestmark = pytest.mark.integration

PATIENTS = 500
DIRECTORY_PREFIX = "formats-"
BY_YEAR = "SELECT date_trunc('year', visit_date) y, COUNT(*) FROM visits GROUP BY 1 ORDER BY 1"
COUNT = "SELECT COUNT(*) FROM visits"
TEXT, BINARY = 0, 1
TIMESTAMP, INT8 = 1114, 20
EPOCH = dt.datetime(2000, 1, 1)  # noqa: DTZ001 (PostgreSQL's epoch, naive)


def message(kind: bytes, body: bytes) -> bytes:
    return kind + struct.pack("!i", len(body) + 4) + body


def parse(sql: str, name: str = "") -> bytes:
    return message(b"P", name.encode() + b"\x00" + sql.encode() + b"\x00\x00\x00")


def bind(statement: str = "", formats: tuple[int, ...] = (), portal: str = "") -> bytes:
    body = portal.encode() + b"\x00" + statement.encode() + b"\x00" + struct.pack("!hh", 0, 0)
    body += struct.pack(f"!h{len(formats)}h", len(formats), *formats)
    return message(b"B", body)


def describe(kind: bytes, name: str = "") -> bytes:
    return message(b"D", kind + name.encode() + b"\x00")


def execute(portal: str = "") -> bytes:
    return message(b"E", portal.encode() + b"\x00" + struct.pack("!i", 0))


SYNC = message(b"S", b"")


def query(sql: str) -> bytes:
    return message(b"Q", sql.encode() + b"\x00")


class Client:
    """A blocking protocol client logged in as alice with SCRAM-SHA-256."""

    def __init__(self, server: RunningServer) -> None:
        self.sock = socket.create_connection(("127.0.0.1", server.port), timeout=60)
        self.buf = b""
        params = b"user\x00alice\x00database\x00demo\x00\x00"
        self.sock.sendall(struct.pack("!ii", len(params) + 8, 3 << 16) + params)
        self.message()  # AuthenticationSASL
        bare = f"n=,r={base64.b64encode(os.urandom(18)).decode()}"
        first = f"n,,{bare}".encode()
        self.send(message(b"p", b"SCRAM-SHA-256\x00" + struct.pack("!i", len(first)) + first))
        server_first = self.message()[1][4:].decode()
        attrs = dict(p.split("=", 1) for p in server_first.split(","))
        salted = hashlib.pbkdf2_hmac(
            "sha256", PASSWORDS["alice"].encode(), base64.b64decode(attrs["s"]), int(attrs["i"])
        )
        key = hmac.digest(salted, b"Client Key", "sha256")
        final = f"c=biws,r={attrs['r']}"
        auth = f"{bare},{server_first},{final}".encode()
        signature = hmac.digest(hashlib.sha256(key).digest(), auth, "sha256")
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(key, signature, strict=True)))
        self.send(message(b"p", f"{final},p={proof.decode()}".encode()))
        assert self.until_ready()[-1] == (b"Z", b"I")

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def message(self) -> tuple[bytes, bytes]:
        while len(self.buf) < 5 or len(self.buf) < 1 + struct.unpack("!i", self.buf[1:5])[0]:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError
            self.buf += chunk
        length = struct.unpack("!i", self.buf[1:5])[0]
        kind, body, self.buf = self.buf[:1], self.buf[5 : 1 + length], self.buf[1 + length :]
        return kind, body

    def until_ready(self) -> list[tuple[bytes, bytes]]:
        out = [self.message()]
        while out[-1][0] != b"Z":
            out.append(self.message())
        return out

    def exchange(self, data: bytes) -> list[tuple[bytes, bytes]]:
        """Send ``data`` (ending with Sync) and return the answers, notices left out."""
        self.send(data)
        return [m for m in self.until_ready() if m[0] != b"N"]

    def close(self) -> None:
        self.sock.close()


def fields(body: bytes) -> dict[str, str]:
    return {chr(p[0]): p[1:].decode() for p in body.split(b"\x00") if p}


def row_description(body: bytes) -> list[tuple[str, int, int]]:
    """(name, type OID, format) of each column."""
    count, position, out = struct.unpack("!h", body[:2])[0], 2, []
    for _ in range(count):
        end = body.index(b"\x00", position)
        oid = struct.unpack("!i", body[end + 7 : end + 11])[0]
        fmt = struct.unpack("!h", body[end + 17 : end + 19])[0]
        out.append((body[position:end].decode(), oid, fmt))
        position = end + 19
    return out


def data_row(body: bytes) -> list[bytes | None]:
    count, position, out = struct.unpack("!h", body[:2])[0], 2, []
    for _ in range(count):
        length = struct.unpack("!i", body[position : position + 4])[0]
        position += 4
        out.append(None if length < 0 else body[position : position + length])
        position += max(length, 0)
    return out


def audit(server: RunningServer) -> list[str]:
    """alice's audit decisions, oldest first."""
    done = dpproxy_in_process(
        "audit", "list", "--analyst", "alice", "--limit", "100000", "--json",
        "--config", str(server.config),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    return [str(r["decision"]) for r in records if r["decision"] != "admin"]


@pytest.fixture
def client(server: RunningServer) -> Iterator[Client]:
    connected = Client(server)
    yield connected
    connected.close()


def test_binary_timestamp_without_describe_is_answered_once_per_run(
    server: RunningServer, client: Client
) -> None:
    # As pgJDBC after five executions: the statement was described once (its columns in
    # text), then Bind asks for binary (pgJDBC reads timestamps in binary) and Executes
    # without a Describe. The timestamp comes in PostgreSQL's binary form (microseconds
    # since 2000-01-01), each run charged once.
    described = client.exchange(parse(BY_YEAR, "S_1") + describe(b"S", "S_1") + SYNC)
    assert [k for k, _ in described] == [b"1", b"t", b"T", b"Z"]
    assert row_description(described[2][1]) == [("y", TIMESTAMP, TEXT), ("count", INT8, TEXT)]
    before = audit(server)
    for _ in range(3):
        answer = client.exchange(bind("S_1", (BINARY, BINARY)) + execute() + SYNC)
        rows = [data_row(body) for kind, body in answer if kind == b"D"]
        assert rows and answer[-2][1].startswith(b"SELECT")
        for year, count in rows:
            assert year is not None and count is not None and len(year) == len(count) == 8
            micros = struct.unpack("!q", year)[0]
            assert EPOCH + dt.timedelta(microseconds=micros) > EPOCH
    assert audit(server) == [*before, "accepted", "accepted", "accepted"]


def test_catalog_arrays_json_and_bytea_are_sent_in_binary(client: Client) -> None:
    # Every type a catalog answer has now has a binary form (float8[] was refused when asked
    # for in binary without a Describe; json, bytea and int2[], which asyncpg asks for in
    # binary, too): sent as PostgreSQL sends them, with or without a Describe.
    sql = "SELECT ARRAY[0.5::float8], '{}'::json"
    expected = [struct.pack("!iiIiiid", 1, 0, 701, 1, 1, 8, 0.5), b"{}"]
    answer = client.exchange(parse(sql) + bind("", (BINARY,)) + execute() + SYNC)
    assert [k for k, _ in answer] == [b"1", b"2", b"D", b"C", b"Z"]
    assert data_row(answer[2][1]) == expected
    answer = client.exchange(parse(sql) + bind("", (BINARY,)) + describe(b"P") + execute() + SYNC)
    assert [c[1:] for c in row_description(answer[2][1])] == [(1022, BINARY), (114, BINARY)]
    assert data_row(answer[3][1]) == expected


def test_a_described_statement_refuses_new_columns_before_the_charge(
    server: RunningServer, client: Client
) -> None:
    described = client.exchange(parse(COUNT, "st") + describe(b"S", "st") + SYNC)
    assert row_description(described[2][1]) == [("count", INT8, TEXT)]
    assert client.exchange(query("SET dpproxy.report = columns"))[-1] == (b"Z", b"I")
    before = audit(server)
    answer = client.exchange(bind("st") + execute() + SYNC)
    assert [k for k, _ in answer] == [b"2", b"E", b"Z"]
    error = fields(answer[1][1])
    assert error["C"] == "0A000" and error["M"] == "cached plan must not change result type"
    assert "3 columns" in error["D"]
    assert audit(server) == before
    again = client.exchange(describe(b"S", "st") + bind("st") + execute() + SYNC)
    assert len(row_description(again[1][1])) == 3
    assert [len(data_row(body)) for kind, body in again if kind == b"D"] == [3]
    assert audit(server) == [*before, "accepted"]


def test_parse_of_a_deeply_nested_statement(server: RunningServer, client: Client) -> None:
    deep = "SELECT COUNT(*) FROM visits WHERE " + "(" * 3000 + "cost > $1" + ")" * 3000
    answer = client.exchange(parse(deep) + SYNC)
    assert [k for k, _ in answer] == [b"E", b"Z"]
    assert fields(answer[0][1])["C"] == "54001"  # as the same SQL in a simple Query
    assert fields(client.exchange(query(deep.replace("$1", "1")))[0][1])["C"] == "54001"
    # (the server's log is checked for tracebacks when it stops)


def test_parse_of_a_long_statement(server: RunningServer, client: Client) -> None:
    long = COUNT + " WHERE cost > $1" + " AND cost > 1" * 10_000
    answer = client.exchange(parse(long, "long") + SYNC)
    error = fields(answer[0][1])
    assert error["C"] == "54000" and "at most 100000" in error["M"]
    assert fields(client.exchange(query(long))[0][1])["C"] == "54000"  # as a simple Query
