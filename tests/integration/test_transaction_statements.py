"""Transaction statements answered as PostgreSQL 15 answers them, message by message.

Each case's Query messages go to a real dpproxy server and to the PostgreSQL test server
(whose session starts, as dpproxy's, with default_transaction_read_only = on) over the
wire, after libpq's login: the command tags, ParameterStatus messages, data rows,
notices and errors (SQLSTATE, and message but for syntax errors) and ReadyForQuery's
transaction status must be the same. Before, COMMIT AND CHAIN ended the block (status I),
START TRANSACTION's tag was BEGIN, SET SESSION CHARACTERISTICS changed nothing, and BEGIN
ISOLATION LEVEL SERIALIZABLE left transaction_isolation at read committed.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

from tests.integration.server import PASSWORDS, RunningServer

pytestmark = pytest.mark.integration

Message = tuple[str, ...]

CASES = [
    # 1. AND CHAIN: a new block at once, with the same modes; outside a block, an error.
    "COMMIT AND CHAIN",
    "ROLLBACK AND CHAIN",
    "END AND CHAIN",
    "ABORT AND CHAIN",
    "COMMIT AND NO CHAIN",
    "ROLLBACK WORK AND NO CHAIN",
    "BEGIN;; COMMIT AND CHAIN;; SHOW transaction_isolation;; COMMIT",
    "BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY;; COMMIT AND CHAIN;; "
    "SHOW transaction_isolation;; SHOW transaction_read_only;; ROLLBACK AND CHAIN;; "
    "SHOW transaction_isolation;; END;; SHOW transaction_isolation",
    "BEGIN ISOLATION LEVEL REPEATABLE READ;; SAVEPOINT s;; COMMIT TRANSACTION AND CHAIN;; "
    "SHOW transaction_isolation;; ROLLBACK TO s;; ABORT AND CHAIN;; RELEASE s;; ROLLBACK",
    "BEGIN;; SELECT 1/0;; COMMIT AND CHAIN;; SHOW transaction_isolation;; ROLLBACK",
    "BEGIN;; SET TRANSACTION ISOLATION LEVEL SERIALIZABLE;; "
    "SET default_transaction_isolation = 'read committed';; COMMIT AND CHAIN;; "
    "SHOW transaction_isolation;; COMMIT;; SHOW transaction_isolation",
    "BEGIN;; SET LOCAL TIME ZONE 'Europe/Paris';; COMMIT AND CHAIN;; SHOW TimeZone;; "
    "SET TIME ZONE 'Asia/Tokyo';; ROLLBACK AND CHAIN;; SHOW TimeZone;; COMMIT",
    "SELECT 1; COMMIT AND CHAIN",
    "SELECT 1; ROLLBACK AND CHAIN; SELECT 2",
    "BEGIN; SELECT 1; COMMIT AND CHAIN;; SHOW transaction_isolation;; ROLLBACK",
    "BEGIN ISOLATION LEVEL SERIALIZABLE; COMMIT AND CHAIN; SHOW transaction_isolation;; ROLLBACK",
    "COMMIT AND;; COMMIT AND CHAIN CHAIN;; COMMIT foo;; END WORK AND NO CHAIN",
    "COMMIT PREPARED 'x';; ROLLBACK PREPARED 'x';; BEGIN;; COMMIT PREPARED 'x';; ROLLBACK",
    # 2. START TRANSACTION's tag; BEGIN's modes and forms.
    "START TRANSACTION;; START TRANSACTION ISOLATION LEVEL SERIALIZABLE;; "
    "SHOW transaction_isolation;; COMMIT",
    "START TRANSACTION READ ONLY, ISOLATION LEVEL REPEATABLE READ;; "
    "SHOW transaction_isolation;; COMMIT",
    "BEGIN WORK;; ROLLBACK WORK;; BEGIN TRANSACTION ISOLATION LEVEL READ UNCOMMITTED;; "
    "SHOW transaction_isolation;; ROLLBACK TRANSACTION",
    "BEGIN ISOLATION LEVEL SERIALIZABLE ISOLATION LEVEL READ COMMITTED;; "
    "SHOW transaction_isolation;; ROLLBACK",
    "BEGIN,;; BEGIN READ ONLY,;; BEGIN , READ ONLY;; START;; START TRANSACTION,READ ONLY;; "
    "BEGIN ISOLATION LEVEL SNAPSHOT;; SHOW transaction_isolation",
    "BEGIN;; SELECT 1;; BEGIN ISOLATION LEVEL SERIALIZABLE;; ROLLBACK",
    "SELECT 1; BEGIN ISOLATION LEVEL SERIALIZABLE; SHOW transaction_isolation",
    "SELECT 1; START TRANSACTION ISOLATION LEVEL SERIALIZABLE; SELECT 2;; COMMIT",
    # 3. SET SESSION CHARACTERISTICS: the session's default_transaction_* (ParameterStatus
    # for default_transaction_read_only when it changes).
    "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY;; "
    "SHOW default_transaction_isolation;; SHOW default_transaction_read_only;; "
    "SHOW transaction_isolation;; SHOW transaction_read_only;; BEGIN;; "
    "SHOW transaction_isolation;; COMMIT",
    "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE;; "
    "SHOW default_transaction_read_only;; SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY;; "
    "SHOW default_transaction_read_only",
    "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED READ WRITE;; "
    "RESET ALL;; SHOW default_transaction_read_only",
    "BEGIN;; SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE;; "
    "SHOW transaction_isolation;; SHOW default_transaction_isolation;; ROLLBACK;; "
    "SHOW default_transaction_isolation",
    "BEGIN;; SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE;; COMMIT;; "
    "SHOW default_transaction_read_only",
    "BEGIN;; SET LOCAL SESSION CHARACTERISTICS AS TRANSACTION READ WRITE;; "
    "SHOW default_transaction_read_only;; COMMIT;; SHOW default_transaction_read_only",
    "SET LOCAL SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE;; "
    "SHOW default_transaction_isolation",
    "SET SESSION SESSION CHARACTERISTICS AS TRANSACTION NOT DEFERRABLE;; "
    "SHOW default_transaction_deferrable",
    "SET SESSION CHARACTERISTICS AS TRANSACTION;; "
    "SET SESSION CHARACTERISTICS TRANSACTION READ ONLY;; "
    "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY, ISOLATION LEVEL BOGUS",
    "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE;; "
    "SELECT current_setting('transaction_isolation'), "
    "current_setting('default_transaction_isolation')",
    # transaction_isolation and transaction_read_only in and out of blocks.
    "BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY;; SHOW transaction_isolation;; "
    "SHOW transaction_read_only;; SHOW transaction_deferrable;; "
    "SELECT current_setting('transaction_isolation'), current_setting('transaction_read_only');; "
    "COMMIT;; SHOW transaction_isolation;; SHOW transaction_read_only;; "
    "SELECT current_setting('transaction_isolation')",
    "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE;; SHOW transaction_isolation;; "
    "SET SESSION TRANSACTION READ ONLY;; SET LOCAL TRANSACTION ISOLATION LEVEL SERIALIZABLE;; "
    "SET TRANSACTION;; SET TRANSACTION ISOLATION LEVEL SERIALIZABLE, READ ONLY,",
    "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE; SHOW transaction_isolation;; "
    "SHOW transaction_isolation",
    "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE; SELECT 1; "
    "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
    "BEGIN;; SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;; SHOW transaction_isolation;; "
    "SELECT 1;; SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;; "
    "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE;; SHOW transaction_isolation;; ROLLBACK",
    "BEGIN;; SAVEPOINT a;; SET TRANSACTION ISOLATION LEVEL READ COMMITTED;; "
    "SET TRANSACTION READ ONLY;; SET TRANSACTION ISOLATION LEVEL SERIALIZABLE;; ROLLBACK",
    "BEGIN;; SAVEPOINT a;; RELEASE a;; SET TRANSACTION ISOLATION LEVEL REPEATABLE READ;; "
    "SHOW transaction_isolation;; ROLLBACK",
    "BEGIN;; SAVEPOINT a;; SET TRANSACTION NOT DEFERRABLE;; ROLLBACK;; "
    "BEGIN;; SELECT 1;; SET TRANSACTION NOT DEFERRABLE;; ROLLBACK;; "
    "BEGIN;; SAVEPOINT a;; SET TRANSACTION READ WRITE;; ROLLBACK;; "
    "BEGIN READ ONLY;; SELECT 1;; SET TRANSACTION READ WRITE;; ROLLBACK;; "
    "BEGIN READ ONLY;; SELECT 1;; BEGIN READ WRITE;; ROLLBACK",
    # A block that asked for READ WRITE is checked as one (PostgreSQL's XactReadOnly).
    "BEGIN READ WRITE;; SAVEPOINT s;; SET TRANSACTION READ WRITE;; ROLLBACK",
    "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE;; BEGIN;; SELECT 1;; "
    "SET TRANSACTION READ WRITE;; ROLLBACK",
    "BEGIN;; SELECT 1;; BEGIN READ WRITE;; ROLLBACK",
    "BEGIN READ WRITE;; SELECT 1;; SET TRANSACTION READ ONLY;; SET TRANSACTION READ WRITE;; "
    "ROLLBACK",
    "BEGIN READ WRITE;; SELECT 1;; COMMIT AND CHAIN;; SELECT 1;; SET TRANSACTION READ WRITE;; "
    "ROLLBACK",
    "SET transaction_isolation = 'serializable';; SHOW transaction_isolation;; "
    "SET transaction_read_only = on;; SHOW transaction_read_only;; "
    "SET transaction_deferrable = off;; SHOW transaction_deferrable;; "
    "SET transaction_isolation = bogus;; SET transaction_read_only = maybe;; "
    "SET transaction_deferrable = maybe;; RESET transaction_isolation;; "
    "SET transaction_isolation TO DEFAULT;; SET LOCAL transaction_isolation = 'serializable'",
    "SET default_transaction_isolation = 'serializable';; BEGIN;; SHOW transaction_isolation;; "
    "RESET transaction_isolation;; SHOW transaction_isolation;; "
    "SET LOCAL transaction_isolation = 'repeatable read';; SHOW transaction_isolation;; "
    "SET transaction_isolation TO DEFAULT;; SHOW transaction_isolation;; ROLLBACK",
    "SET TRANSACTION SNAPSHOT '00000003-0000001B-1';; "
    "BEGIN ISOLATION LEVEL SERIALIZABLE;; SET TRANSACTION SNAPSHOT 'zz';; ROLLBACK;; "
    "BEGIN ISOLATION LEVEL REPEATABLE READ;; SAVEPOINT a;; SET TRANSACTION SNAPSHOT 'a';; "
    "ROLLBACK;; BEGIN;; SET TRANSACTION SNAPSHOT 'a';; ROLLBACK;; "
    "SELECT 1; SET TRANSACTION SNAPSHOT 'x'",
]

#: dpproxy's transactions are not deferrable: asking for DEFERRABLE is refused (0A000)
#: where PostgreSQL on a primary takes it.
REFUSED = [
    "BEGIN DEFERRABLE",
    "BEGIN ISOLATION LEVEL SERIALIZABLE, READ ONLY, DEFERRABLE",
    "SET SESSION CHARACTERISTICS AS TRANSACTION DEFERRABLE",
    "SET transaction_deferrable = on",
]
#: Asking for READ WRITE is taken as PostgreSQL takes it, and the transaction stays read
#: only: (statements, their tags, the status after them).
READ_WRITE_TAKEN = [
    ("BEGIN READ WRITE", ["BEGIN"], "T"),
    ("START TRANSACTION ISOLATION LEVEL SERIALIZABLE, READ WRITE", ["START TRANSACTION"], "T"),
    ("BEGIN; SET TRANSACTION READ WRITE", ["BEGIN", "SET"], "T"),
    ("BEGIN; SET transaction_read_only = off", ["BEGIN", "SET"], "T"),
]


def read_message(sock: socket.socket, buffer: bytearray) -> tuple[bytes, bytes]:
    while len(buffer) < 5 or len(buffer) < 1 + struct.unpack("!i", buffer[1:5])[0]:
        chunk = sock.recv(65536)
        if not chunk:
            raise EOFError("the server closed the connection")
        buffer += chunk
    length = struct.unpack("!i", buffer[1:5])[0]
    kind, body = bytes(buffer[:1]), bytes(buffer[5 : 1 + length])
    del buffer[: 1 + length]
    return kind, body


def fields(body: bytes) -> dict[str, str]:
    return {chr(part[0]): part[1:].decode() for part in body.split(b"\0") if part}


def data_row(body: bytes) -> Message:
    count, position, values = struct.unpack("!h", body[:2])[0], 2, ["D"]
    for _ in range(count):
        length = struct.unpack("!i", body[position : position + 4])[0]
        position += 4
        values.append("NULL" if length < 0 else body[position : position + length].decode())
        position += max(length, 0)
    return tuple(values)


def query(sock: socket.socket, sql: str) -> list[Message]:
    """What the server answers to a Query message of ``sql``, up to ReadyForQuery."""
    text = sql.encode() + b"\0"
    sock.sendall(b"Q" + struct.pack("!i", len(text) + 4) + text)
    buffer = bytearray()
    answer: list[Message] = []
    while True:
        kind, body = read_message(sock, buffer)
        if kind == b"Z":
            answer.append(("Z", body.decode()))
            return answer
        if kind == b"C":
            answer.append(("C", body[:-1].decode()))
        elif kind == b"S":
            name, value, _ = body.split(b"\0")
            answer.append(("S", name.decode(), value.decode()))
        elif kind == b"D":
            answer.append(data_row(body))
        elif kind in (b"E", b"N"):
            got = fields(body)
            # A syntax error's message quotes the token as written (dpproxy: in lower case).
            message = "" if got["C"] == "42601" else got["M"]
            answer.append((kind.decode(), got["C"], message))


@contextmanager
def wire(dsn: str, options: str = "") -> Iterator[socket.socket]:
    """A connection logged in by libpq, then spoken to directly over its socket."""
    with psycopg.connect(dsn, autocommit=True, sslmode="disable", options=options) as conn:
        blocking = os.get_blocking(conn.pgconn.socket)
        sock = socket.socket(fileno=conn.pgconn.socket)
        try:
            sock.setblocking(True)
            sock.settimeout(30)
            yield sock
        finally:
            sock.detach()  # the socket stays libpq's, which closes it
            os.set_blocking(conn.pgconn.socket, blocking)


@pytest.fixture(scope="module")
def server(duckdb_server: RunningServer) -> RunningServer:
    return duckdb_server  # the package's: these tests leave nothing the others could see


def answers(sock: socket.socket, case: str) -> list[list[Message]]:
    try:
        return [query(sock, sql) for sql in case.split(";; ")]
    finally:  # the next case starts outside a block, with the session's first settings
        query(sock, "ROLLBACK")
        query(sock, "RESET ALL")


def test_transaction_statements_answer_as_postgresql(server: RunningServer, pg_dsn: str) -> None:
    differences = []
    with (
        wire(pg_dsn, options="-c default_transaction_read_only=on -c TimeZone=UTC") as postgresql,
        wire(server.dsn("alice")) as dpproxy,
    ):
        for case in CASES:
            expected, got = answers(postgresql, case), answers(dpproxy, case)
            for sql, wanted, answered in zip(case.split(";; "), expected, got, strict=True):
                if answered != wanted:
                    differences.append(
                        f"{case}\n  {sql}\n    PostgreSQL: {wanted}\n    dpproxy: {answered}"
                    )
                    break
    assert not differences, "\n".join(differences)


@pytest.mark.parametrize("sql", REFUSED)
def test_deferrable_transactions_are_refused(server: RunningServer, pg_dsn: str, sql: str) -> None:
    with wire(server.dsn("alice")) as dpproxy:
        [(_, code, message), ready] = answers(dpproxy, sql)[0]
        assert (code, ready) == ("0A000", ("Z", "I")), message
        assert "dpproxy" in message
        # The session goes on, read only.
        assert query(dpproxy, "SHOW transaction_read_only")[0] == ("D", "on")


def test_startup_transaction_parameters_are_checked_as_postgresql_checks_them(
    server: RunningServer, pg_dsn: str
) -> None:
    """As PostgreSQL, which sets them after its first query: another isolation level or
    any deferrable setting ends the connection (25001); the same level is taken."""
    for options, fails in [
        ("-c transaction_isolation=serializable", True),
        ("-c transaction_deferrable=off", True),
        ("-c transaction_isolation=read\\ committed", False),
        # Before, dpproxy ended these connections (25001): clients and poolers send them.
        ("-c transaction_read_only=off", False),
        ("-c default_transaction_read_only=on -c transaction_read_only=off", False),
        ("-c transaction_read_only=on", False),
    ]:
        outcomes: list[object] = []
        for dsn in (pg_dsn, server.dsn("alice")):
            try:
                with psycopg.connect(dsn, options=options, sslmode="disable") as conn:
                    outcomes.append(conn.execute("SHOW transaction_isolation").fetchone())
            except psycopg.OperationalError as error:
                outcomes.append(str(error).rsplit("FATAL:", 1)[-1].strip())
        assert outcomes[0] == outcomes[1], (options, outcomes)
        assert isinstance(outcomes[0], str) is fails, outcomes


def test_transaction_modes_are_what_the_catalog_shows(server: RunningServer) -> None:
    """pg_settings and current_setting() read the transaction's modes, as SHOW does."""
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        row = conn.execute(
            "SELECT setting FROM pg_settings WHERE name = 'transaction_isolation'"
        ).fetchone()
        assert row == ("repeatable read",)
        conn.execute("COMMIT AND CHAIN")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        row = conn.execute("SELECT current_setting('transaction_isolation')").fetchone()
        assert row == ("repeatable read",)
        conn.execute("ROLLBACK")
        assert conn.execute("SHOW transaction_isolation").fetchone() == ("read committed",)


def test_psycopg_transaction_settings_as_on_postgresql(server: RunningServer, pg_dsn: str) -> None:
    """psycopg's isolation_level and read_only begin each transaction with BEGIN
    ISOLATION LEVEL ... READ ONLY; read_only = False (BEGIN READ WRITE) is taken."""
    seen: list[list[object]] = []
    for dsn in (pg_dsn, server.dsn("alice")):
        with psycopg.connect(dsn, options="-c default_transaction_read_only=on") as conn:
            conn.isolation_level = psycopg.IsolationLevel.SERIALIZABLE
            conn.read_only = True
            shown: list[object] = [conn.execute("SHOW transaction_isolation").fetchone()]
            shown.append(conn.execute("SHOW transaction_read_only").fetchone())
            conn.execute("COMMIT AND CHAIN")
            shown.append(conn.execute("SHOW transaction_isolation").fetchone())
            shown.append(conn.info.transaction_status.name)
            conn.rollback()
            conn.autocommit = True
            shown.append(conn.execute("SHOW transaction_isolation").fetchone())
            seen.append(shown)
    assert (
        seen[0]
        == seen[1]
        == [
            ("serializable",),
            ("on",),
            ("serializable",),
            "INTRANS",
            ("read committed",),
        ]
    )
    with psycopg.connect(server.dsn("alice")) as conn:
        conn.read_only = False  # BEGIN READ WRITE: taken, and nothing can write anyway
        assert conn.execute("SELECT COUNT(*) FROM patients").fetchall()
        assert conn.execute("SHOW transaction_read_only").fetchone() == ("on",)


@pytest.mark.parametrize(("sql", "tags", "status"), READ_WRITE_TAKEN)
def test_read_write_is_taken_and_the_transaction_stays_read_only(
    server: RunningServer, sql: str, tags: list[str], status: str
) -> None:
    with wire(server.dsn("alice")) as dpproxy:
        replies = query(dpproxy, sql)
        assert [r[1] for r in replies if r[0] == "C"] == tags, replies
        assert replies[-1] == ("Z", status), replies
        assert query(dpproxy, "SHOW transaction_read_only")[:2] == [("D", "on"), ("C", "SHOW")]
        assert query(dpproxy, "ROLLBACK")[-1] == ("Z", "I")


def test_portals_end_with_a_chained_transaction(server: RunningServer, pg_dsn: str) -> None:
    """An asyncpg cursor of a transaction that COMMIT AND CHAIN ended is gone (34000), as in
    PostgreSQL; before, dpproxy kept its portal and gave the next row."""
    asyncpg = pytest.importorskip("asyncpg")  # a test dependency (pyproject's test extra)

    async def go(dsn: str) -> tuple[object, ...]:
        conn = await asyncpg.connect(dsn)
        try:
            block = conn.transaction()
            await block.start()
            cursor = await conn.cursor(
                "SELECT typname FROM pg_type WHERE typname IN ('int4', 'int8', 'text') ORDER BY 1"
            )
            first = await cursor.fetch(1)
            await conn.execute("COMMIT AND CHAIN")
            try:
                outcome: object = await cursor.fetch(1)
            except asyncpg.PostgresError as error:
                outcome = error.sqlstate
            await block.rollback()
            return tuple(first[0]), outcome
        finally:
            await conn.close()

    dpproxy = f"postgresql://alice:{PASSWORDS['alice']}@127.0.0.1:{server.port}/demo"
    answers = [asyncio.run(go(dsn)) for dsn in (pg_dsn, dpproxy)]
    assert answers[0] == answers[1] == (("int4",), "34000")
