"""The wire server with real clients (psycopg 3, psql) and with raw sockets."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import os
import shutil
import socket
import ssl
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.protocol.scram import make_verifier
from proxy.runner import ssl_context
from proxy.seam import (
    ClientInfo,
    ColumnDescription,
    Notice,
    QueryError,
    StatementResult,
    TransactionStatus,
)
from proxy.server import INTERNAL_ERROR_MESSAGE, Server
from proxy.settings import ConfigError, ServerSettings
from proxy.tls import server_context

pytestmark = pytest.mark.integration

PASSWORD = "secret"
INT4 = 23
TEXT = 25

# --- the test application ---


class FakeSession:
    def __init__(self, app: FakeApp, client: ClientInfo) -> None:
        self.app = app
        self.client = client
        self.status = TransactionStatus.IDLE
        self.cancel_event = asyncio.Event()
        self.loop = asyncio.get_running_loop()
        self.application_name = client.parameters.get("application_name", "")

    @property
    def transaction_status(self) -> TransactionStatus:
        return self.status

    @property
    def transactions_ended(self) -> int:
        return 0

    def reported_parameters(self) -> dict[str, str]:
        return {"application_name": self.application_name}

    def abort_transaction(self) -> None:
        if self.status is TransactionStatus.IN_TRANSACTION:
            self.status = TransactionStatus.FAILED

    def query_prepared(self) -> None:
        """Nothing to fix: this session has no transaction modes."""

    async def execute(self, sql: str) -> StatementResult:
        self.app.queries.append(sql)
        s = sql.strip().rstrip(";").strip().upper()
        if not s:
            return StatementResult(tag="", empty=True)
        if s.startswith("BEGIN"):
            self.status = TransactionStatus.IN_TRANSACTION
            return StatementResult("BEGIN")
        if s in ("COMMIT", "ROLLBACK"):
            self.status = TransactionStatus.IDLE
            return StatementResult(s)
        if s == "SELECT 1":
            return StatementResult(
                "SELECT 1",
                columns=(ColumnDescription("one", INT4, 4),),
                rows=(("1",),),
                notices=(Notice("dp: epsilon charged 0.1", detail="remaining 0.9"),),
            )
        if s == "SELECT ROWS":
            return StatementResult(
                "SELECT 3",
                columns=(ColumnDescription("n", INT4, 4), ColumnDescription("t", TEXT)),
                rows=(("1", "héllo"), (None, None), ("3", "")),
            )
        if s.startswith("SET APPLICATION_NAME"):
            self.application_name = "renamed"
            return StatementResult("SET")
        if s == "SLEEP":
            self.cancel_event.clear()
            self.app.sleeping.set()
            try:
                await asyncio.wait_for(self.cancel_event.wait(), 10)
            except TimeoutError:
                return StatementResult("SLEEP")
            raise QueryError("57014", "canceling statement due to user request")
        if s == "BOOM":
            raise RuntimeError("a bug in the pipeline")
        if s == "BYE":
            raise QueryError("57P01", "terminating connection", severity="FATAL")
        raise QueryError(
            "42601",
            f"dpproxy cannot answer: {sql}",
            hint="only SELECT 1 works here",
            notices=(Notice("about to fail", severity="WARNING", code="01000"),),
        )

    def parameter_columns(self) -> dict[str, dict[str, int | None]]:
        return {}  # no tables: every undeclared parameter is text

    async def describe(self, sql: str) -> tuple[ColumnDescription, ...] | None:
        self.app.described.append(sql)
        s = sql.strip().rstrip(";").strip().upper()
        if s == "SELECT 1":
            return (ColumnDescription("one", INT4, 4),)
        if s == "SELECT ROWS":
            return (ColumnDescription("n", INT4, 4), ColumnDescription("t", TEXT))
        if s.startswith(("BEGIN", "COMMIT", "ROLLBACK", "SET")) or not s:
            return None
        raise QueryError("42601", f"dpproxy cannot answer: {sql}")

    def cancel(self) -> None:
        self.app.cancels += 1
        self.loop.call_soon_threadsafe(self.cancel_event.set)

    async def close(self) -> None:
        self.app.closed += 1


class FakeApp:
    def __init__(self) -> None:
        self.verifiers = {"alice": make_verifier(PASSWORD), "refused": make_verifier(PASSWORD)}
        self.failures: list[tuple[str, str]] = []
        self.described: list[str] = []
        self.queries: list[str] = []
        self.clients: list[ClientInfo] = []
        self.cancels = 0
        self.closed = 0
        self.sleeping = threading.Event()

    async def scram_verifier(self, user: str) -> str | None:
        return self.verifiers.get(user)

    def server_parameters(self) -> dict[str, str]:
        return {
            "server_version": "15.0 (dpproxy)",
            "server_encoding": "UTF8",
            "client_encoding": "UTF8",
            "DateStyle": "ISO, MDY",
            "TimeZone": "UTC",
            "integer_datetimes": "on",
            "standard_conforming_strings": "on",
        }

    async def open_session(self, client: ClientInfo) -> FakeSession:
        self.clients.append(client)
        if client.user == "refused":
            raise QueryError("28000", "analyst refused has no budget left")
        return FakeSession(self, client)

    def log_authentication_failure(self, client: ClientInfo, reason: str) -> None:
        self.failures.append((client.user, reason))


# --- a server in a background thread ---


class Running:
    def __init__(
        self,
        max_message_size: int = 1 << 20,
        *,
        ssl_context: ssl.SSLContext | None = None,
        require_tls: bool = False,
    ) -> None:
        self.app = FakeApp()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = Server(
            self.app,
            "127.0.0.1",
            0,
            max_message_size=max_message_size,
            ssl_context=ssl_context,
            require_tls=require_tls,
        )
        self.port = asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(10)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    def dsn(self, user: str = "alice", password: str = PASSWORD) -> str:
        return (
            f"host=127.0.0.1 port={self.port} user={user} password={password} "
            "dbname=demo sslmode=prefer connect_timeout=5"
        )


@pytest.fixture
def srv() -> Iterator[Running]:
    running = Running(max_message_size=64 * 1024)
    try:
        yield running
    finally:
        running.stop()


# --- psycopg ---


def test_psycopg_autocommit_rows_and_notices(srv: Running) -> None:
    notices: list[tuple[str | None, str | None, str | None]] = []
    with psycopg.connect(srv.dsn(), autocommit=True) as conn:
        conn.add_notice_handler(
            lambda d: notices.append((d.severity, d.message_primary, d.message_detail))
        )
        assert conn.execute("SELECT 1").fetchall() == [(1,)]
        rows = conn.execute("select rows").fetchall()
        assert rows == [(1, "héllo"), (None, None), (3, "")]
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert conn.info.parameter_status("server_version") == "15.0 (dpproxy)"
        conn.execute("SET application_name = 'x'")
        assert conn.info.parameter_status("application_name") == "renamed"
    assert notices == [("NOTICE", "dp: epsilon charged 0.1", "remaining 0.9")]
    client = srv.app.clients[0]
    assert (client.user, client.database, client.address) == ("alice", "demo", "127.0.0.1")
    assert "BEGIN" not in srv.app.queries


def test_psycopg_transaction(srv: Running) -> None:
    with psycopg.connect(srv.dsn()) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        conn.commit()
        assert conn.info.transaction_status.name == "IDLE"
    assert srv.app.queries[:3] == ["BEGIN", "SELECT 1", "COMMIT"]


def test_psycopg_errors_keep_the_connection(srv: Running) -> None:
    notices: list[str | None] = []
    with psycopg.connect(srv.dsn(), autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary))
        with pytest.raises(psycopg.errors.SyntaxError) as info:
            conn.execute("SELECT secrets FROM patients")
        assert "dpproxy cannot answer" in str(info.value)
        assert info.value.diag.message_hint == "only SELECT 1 works here"
        assert notices == ["about to fail"]
        with pytest.raises(psycopg.errors.InternalError_) as internal:
            conn.execute("BOOM")
        assert internal.value.diag.sqlstate == "XX000"
        assert INTERNAL_ERROR_MESSAGE in str(internal.value)
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_psycopg_parameters_are_bound_into_the_sql(srv: Running) -> None:
    with psycopg.connect(srv.dsn(), autocommit=True) as conn:
        assert conn.execute("SELECT %s", [1]).fetchone() == (1,)  # binary int
        with pytest.raises(psycopg.errors.SyntaxError):
            conn.execute("SELECT %s", ["x'; DROP TABLE t; --"])  # text, OID 0
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert srv.app.queries == ["SELECT 1", "SELECT 1"]
    assert "SELECT 'x''; DROP TABLE t; --'" in srv.app.described  # quoted, never pasted


def test_psycopg_prepared_statements(srv: Running) -> None:
    # psycopg prepares (extended protocol, named statement) a query run 5 times.
    with psycopg.connect(srv.dsn(), autocommit=True) as conn:
        for _ in range(10):
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert conn.execute("SELECT ROWS", prepare=True).fetchall() == [
            (1, "héllo"),
            (None, None),
            (3, ""),
        ]
    assert srv.app.queries.count("SELECT 1") == 10  # executed once per call, never on Describe


def test_wrong_password_and_unknown_user(srv: Running) -> None:
    messages = []
    for user, password in (("alice", "wrong"), ("nobody", PASSWORD)):
        with pytest.raises(psycopg.OperationalError) as info:
            psycopg.connect(srv.dsn(user, password))
        messages.append(str(info.value).replace(user, "USER"))
        assert f'password authentication failed for user "{user}"' in str(info.value)
    assert messages[0] == messages[1]
    assert srv.app.failures == [("alice", "wrong password"), ("nobody", "unknown user")]
    assert srv.app.clients == []


def test_open_session_refusal(srv: Running) -> None:
    with pytest.raises(psycopg.OperationalError, match="no budget left"):
        psycopg.connect(srv.dsn("refused"))


def test_fatal_query_error_closes_the_connection(srv: Running) -> None:
    with psycopg.connect(srv.dsn(), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.AdminShutdown):
            conn.execute("BYE")
        assert conn.closed or conn.broken


def test_cancel_request_reaches_the_session(srv: Running) -> None:
    with psycopg.connect(srv.dsn(), autocommit=True) as conn, ThreadPoolExecutor(1) as pool:
        future = pool.submit(conn.execute, "SLEEP")
        assert srv.app.sleeping.wait(5)
        # cancel_safe (libpq >= 17) does not hold the GIL while waiting, unlike cancel(),
        # which would deadlock against a server running in this process.
        conn.cancel_safe(timeout=5)
        with pytest.raises(psycopg.errors.QueryCanceled):
            future.result(10)
        assert srv.app.cancels == 1
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_sessions_are_closed(srv: Running) -> None:
    with psycopg.connect(srv.dsn(), autocommit=True) as conn:
        conn.execute("SELECT 1")
    deadline = time.monotonic() + 5
    while srv.app.closed < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert srv.app.closed == 1


# --- psql ---

PSQL = shutil.which("psql") or "/usr/bin/psql"


def run_psql(srv: Running, sql: str, password: str = PASSWORD) -> subprocess.CompletedProcess[str]:
    if not os.path.exists(PSQL):
        pytest.skip("psql is not installed")
    env = {**os.environ, "PGPASSWORD": password, "PGCONNECT_TIMEOUT": "5"}
    cmd = [PSQL, "-h", "127.0.0.1", "-p", str(srv.port), "-U", "alice", "-d", "demo"]
    return subprocess.run(
        [*cmd, "-X", "-A", "-t", "-c", sql],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=20,
    )


def test_psql_query_notice_and_error(srv: Running) -> None:
    ok = run_psql(srv, "SELECT 1")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == "1"
    assert "NOTICE:  dp: epsilon charged 0.1" in ok.stderr

    bad = run_psql(srv, "SELECT nope")
    assert bad.returncode == 1
    assert "ERROR:  dpproxy cannot answer: SELECT nope" in bad.stderr
    assert "HINT:  only SELECT 1 works here" in bad.stderr

    denied = run_psql(srv, "SELECT 1", password="wrong")
    assert denied.returncode == 2
    assert 'password authentication failed for user "alice"' in denied.stderr


# --- raw sockets ---


def _hmac(key: bytes, msg: bytes) -> bytes:
    return hmac.digest(key, msg, "sha256")


class Raw:
    """A minimal blocking protocol client."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def message(self) -> tuple[bytes, bytes]:
        header = self.recv_exact(5)
        (length,) = struct.unpack("!i", header[1:])
        return header[:1], self.recv_exact(length - 4)

    def until_ready(self) -> list[tuple[bytes, bytes]]:
        out = []
        while True:
            msg = self.message()
            out.append(msg)
            if msg[0] == b"Z":
                return out

    def closed(self) -> bool:
        try:
            self.recv_exact(len(self.buf) + 1)
        except (EOFError, ConnectionError):
            return True
        return False

    def login(self, user: str = "alice", password: str = PASSWORD) -> list[tuple[bytes, bytes]]:
        params = f"user\x00{user}\x00database\x00demo\x00\x00".encode()
        self.send(struct.pack("!ii", len(params) + 8, 3 << 16) + params)
        kind, body = self.message()
        assert kind == b"R" and body[:4] == struct.pack("!i", 10)
        nonce = base64.b64encode(os.urandom(18)).decode()
        bare = f"n=,r={nonce}"
        first = f"n,,{bare}".encode()
        payload = b"SCRAM-SHA-256\x00" + struct.pack("!i", len(first)) + first
        self.send(typed(b"p", payload))
        kind, body = self.message()
        assert kind == b"R" and body[:4] == struct.pack("!i", 11)
        server_first = body[4:].decode()
        attrs = dict(p.split("=", 1) for p in server_first.split(","))
        salted = hashlib.pbkdf2_hmac(
            "sha256", password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"])
        )
        client_key = _hmac(salted, b"Client Key")
        without_proof = f"c=biws,r={attrs['r']}"
        auth = f"{bare},{server_first},{without_proof}".encode()
        sig = _hmac(hashlib.sha256(client_key).digest(), auth)
        proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, sig, strict=True)))
        self.send(typed(b"p", f"{without_proof},p={proof.decode()}".encode()))
        return self.until_ready()

    def close(self) -> None:
        self.sock.close()


def typed(t: bytes, body: bytes) -> bytes:
    return t + struct.pack("!i", len(body) + 4) + body


def query(sql: str) -> bytes:
    return typed(b"Q", sql.encode() + b"\x00")


def error_fields(body: bytes) -> dict[str, str]:
    return {chr(p[0]): p[1:].decode() for p in body.split(b"\x00") if p}


@pytest.fixture
def raw(srv: Running) -> Iterator[Raw]:
    client = Raw(srv.port)
    try:
        yield client
    finally:
        client.close()


def test_raw_login_sequence(raw: Raw) -> None:
    msgs = raw.login()
    kinds = [k for k, _ in msgs]
    assert kinds[0] == b"R"  # SASLFinal
    assert msgs[0][1][:4] == struct.pack("!i", 12)
    assert msgs[1] == (b"R", struct.pack("!i", 0))
    # The app's 7 parameters and the session's application_name, as PostgreSQL reports.
    assert kinds[2:-2] == [b"S"] * 8
    assert kinds[-2:] == [b"K", b"Z"]
    assert msgs[-1] == (b"Z", b"I")


def parse(name: bytes, sql: bytes) -> bytes:
    return typed(b"P", name + b"\x00" + sql + b"\x00\x00\x00")


def bind(portal: bytes, statement: bytes, params: tuple[bytes, ...] = ()) -> bytes:
    body = portal + b"\x00" + statement + b"\x00" + struct.pack("!h", 0)
    body += struct.pack("!h", len(params))
    for p in params:
        body += struct.pack("!i", len(p)) + p
    return typed(b"B", body + struct.pack("!h", 0))


def execute(portal: bytes, max_rows: int) -> bytes:
    return typed(b"E", portal + b"\x00" + struct.pack("!i", max_rows))


def test_extended_protocol_with_row_limit(srv: Running, raw: Raw) -> None:
    raw.login()
    describe_statement = typed(b"D", b"Sst\x00")
    raw.send(parse(b"st", b"SELECT ROWS") + describe_statement + typed(b"S", b""))
    msgs = raw.until_ready()
    assert [k for k, _ in msgs] == [b"1", b"t", b"T", b"Z"]
    assert srv.app.queries == []  # Describe never runs the statement
    raw.send(bind(b"p1", b"st") + typed(b"D", b"Pp1\x00") + execute(b"p1", 2) + typed(b"H", b""))
    msgs = []
    while len(msgs) < 5:
        msgs.append(raw.message())
    assert [k for k, _ in msgs] == [b"2", b"T", b"D", b"D", b"s"]
    raw.send(
        execute(b"p1", 0) + typed(b"C", b"Pp1\x00") + typed(b"C", b"Sst\x00") + typed(b"S", b"")
    )
    assert [k for k, _ in raw.until_ready()] == [b"D", b"C", b"3", b"3", b"Z"]
    assert srv.app.queries == ["SELECT ROWS"]


def test_extended_protocol_error_and_recovery(raw: Raw) -> None:
    raw.login()
    describe = typed(b"D", b"P\x00")
    raw.send(
        parse(b"", b"SELECT $1, $2")
        + bind(b"", b"", (b"1",))
        + describe
        + execute(b"", 0)
        + query("SELECT 1")
        + typed(b"S", b"")
    )
    msgs = raw.until_ready()
    assert [k for k, _ in msgs] == [b"1", b"E", b"Z"]  # the rest is skipped until Sync
    fields = error_fields(msgs[1][1])
    assert fields["C"] == "08P01"
    assert "supplies 1 parameters" in fields["M"] and "requires 2" in fields["M"]
    raw.send(execute(b"nope", 0) + typed(b"S", b""))
    msgs = raw.until_ready()
    assert error_fields(msgs[0][1])["C"] == "34000"
    raw.send(query("SELECT 1"))
    msgs = raw.until_ready()
    assert [k for k, _ in msgs] == [b"N", b"T", b"D", b"C", b"Z"]
    assert msgs[2][1] == struct.pack("!hi", 1, 1) + b"1"


def test_pipelined_queries_and_empty_query(raw: Raw) -> None:
    raw.login()
    raw.send(query("") + query("BEGIN") + query("SELECT 1") + typed(b"S", b""))
    assert raw.until_ready() == [(b"I", b""), (b"Z", b"I")]
    assert raw.until_ready() == [(b"C", b"BEGIN\x00"), (b"Z", b"T")]
    assert [k for k, _ in raw.until_ready()] == [b"N", b"T", b"D", b"C", b"Z"]
    assert raw.until_ready() == [(b"Z", b"T")]  # a lone Sync


def parse_typed(name: bytes, sql: bytes, types: tuple[int, ...]) -> bytes:
    body = name + b"\x00" + sql + b"\x00" + struct.pack("!h", len(types))
    return typed(b"P", body + b"".join(struct.pack("!i", t) for t in types))


SYNC = typed(b"S", b"")


@pytest.mark.parametrize(
    ("sql", "params", "bound"),
    [
        (b"SELECT COUNT(*) FROM visits WHERE cost IN ($1,$2)", (b"1", b"2"),
         "SELECT COUNT(*) FROM visits WHERE cost IN ('1', '2')"),
        (b"SELECT COUNT(*) FROM visits WHERE cost IN ($1)", (b"1",),
         "SELECT COUNT(*) FROM visits WHERE cost IN ('1')"),
        (b"SELECT $1::int,$2::int", (b"1", b"2"), "SELECT CAST(1 AS INT), CAST(2 AS INT)"),
        (b"SELECT x FROM t WHERE x=$1", (b"a",), "SELECT x FROM t WHERE x = 'a'"),
        (b"SELECT '$1,$2',$1", (b"a",), "SELECT '$1,$2', 'a'"),
    ],
)  # fmt: skip
def test_raw_placeholders_without_spaces(
    srv: Running, raw: Raw, sql: bytes, params: tuple[bytes, ...], bound: str
) -> None:
    raw.login()
    raw.send(parse(b"", sql) + bind(b"", b"", params) + execute(b"", 0) + SYNC)
    msgs = raw.until_ready()
    assert [k for k, _ in msgs] == [b"1", b"2", b"N", b"E", b"Z"]  # the fake's notice
    assert error_fields(msgs[3][1])["M"] == f"dpproxy cannot answer: {bound}"  # ran, bound
    assert srv.app.queries == [bound]


def test_psycopg_placeholders_without_spaces(srv: Running) -> None:
    # psycopg writes "%s,%s" as "$1,$2" and binds on the server (the default).
    sql = "SELECT COUNT(*) FROM visits WHERE cost IN (%s,%s)"
    with psycopg.connect(srv.dsn(), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.SyntaxError, match="dpproxy cannot answer"):
            conn.execute(sql, (1, 2))  # binary int2, declared
        with pytest.raises(psycopg.errors.SyntaxError, match="dpproxy cannot answer"):
            conn.execute(sql, ("1", "2"))  # text, undeclared (OID 0)
        with pytest.raises(psycopg.errors.SyntaxError, match="dpproxy cannot answer"):
            conn.execute("SELECT COUNT(*) FROM visits WHERE note = '$1,$2' OR cost=%s", [3])
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert srv.app.described == [
        "SELECT COUNT(*) FROM visits WHERE cost IN (1, 2)",
        "SELECT COUNT(*) FROM visits WHERE cost IN ('1', '2')",
        "SELECT COUNT(*) FROM visits WHERE note = '$1,$2' OR cost = 3",
    ]


def test_raw_parse_errors_as_postgresql(srv: Running, raw: Raw) -> None:
    raw.login()
    for message, code, words in [
        (parse(b"", b"SELECT 1; SELECT 2"), "42601",
         "cannot insert multiple commands into a prepared statement"),
        (parse_typed(b"", b"SELECT $1", (-1,)), "42704", "type with OID 4294967295 does not exist"),
        (parse_typed(b"", b"SELECT 1", (-5,)), "42704", "type with OID 4294967291 does not exist"),
    ]:  # fmt: skip
        raw.send(message + bind(b"", b"") + execute(b"", 0) + SYNC)
        msgs = raw.until_ready()
        assert [k for k, _ in msgs] == [b"E", b"Z"]
        fields = error_fields(msgs[0][1])
        assert (fields["S"], fields["C"], fields["M"]) == ("ERROR", code, words)
    raw.send(parse(b"", b"SELECT 1;") + bind(b"", b"") + execute(b"", 0) + SYNC)
    assert [k for k, _ in raw.until_ready()] == [b"1", b"2", b"N", b"D", b"C", b"Z"]
    assert srv.app.queries == ["SELECT 1;"]


def test_invalid_utf8_is_an_error_not_the_end_of_the_session(srv: Running, raw: Raw) -> None:
    raw.login()
    bad = 'invalid byte sequence for encoding "UTF8": '
    # A simple Query: ERROR and ReadyForQuery, as PostgreSQL does.
    raw.send(typed(b"Q", b"SELECT '\xc3\x28'\x00"))
    msgs = raw.until_ready()
    assert [k for k, _ in msgs] == [b"E", b"Z"]
    fields = error_fields(msgs[0][1])
    assert (fields["S"], fields["C"], fields["M"]) == ("ERROR", "22021", bad + "0xc3 0x28")
    # Parse (SQL or name), Bind (name or text value), Describe, Execute, Close: ERROR, then
    # the messages up to Sync are skipped.
    cases = [
        parse(b"", b"SELECT '\xff'"),
        parse(b"\xff", b"SELECT 1"),
        parse(b"", b"SELECT $1") + bind(b"", b"", (b"\xff",)),
        parse(b"", b"SELECT 1") + bind(b"\xff", b""),
        typed(b"D", b"S\xff\x00"),
        typed(b"C", b"S\xff\x00"),
        execute(b"\xff", 0),
    ]
    for messages in cases:
        raw.send(messages + execute(b"", 0) + query("SELECT 1") + SYNC)
        msgs = raw.until_ready()
        assert [k for k, _ in msgs if k not in b"12"] == [b"E", b"Z"]
        fields = error_fields(msgs[-2][1])
        assert (fields["S"], fields["C"]) == ("ERROR", "22021")
        assert fields["M"].endswith(bad + "0xff")  # Bind's says "parameter $1: " first
    raw.send(query("SELECT 1"))
    assert [k for k, _ in raw.until_ready()] == [b"N", b"T", b"D", b"C", b"Z"]
    assert srv.app.queries == ["SELECT 1"]


def test_garbage_closes_only_that_connection(srv: Running, raw: Raw) -> None:
    with psycopg.connect(srv.dsn(), autocommit=True) as conn:
        raw.send(b"\x00\x00\x00\x05garbage garbage garbage")
        kind, body = raw.message()
        assert kind == b"E"
        assert error_fields(body)["C"] == "08P01"
        assert raw.closed()
        assert conn.execute("SELECT 1").fetchone() == (1,)

        other = Raw(srv.port)
        other.login()
        other.send(b"z\x00\x00\x00\x04")
        kind, body = other.message()
        assert error_fields(body)["C"] == "08P01"
        assert "invalid frontend message type" in error_fields(body)["M"]
        assert other.closed()
        other.close()
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_oversized_message(srv: Running, raw: Raw) -> None:
    raw.login()
    raw.send(b"Q" + struct.pack("!i", 10 * 1024 * 1024))
    kind, body = raw.message()
    assert kind == b"E"
    fields = error_fields(body)
    assert (fields["S"], fields["C"]) == ("FATAL", "08P01")
    assert "exceeds the maximum" in fields["M"]
    assert raw.closed()


def test_ssl_request_then_startup_without_user(raw: Raw) -> None:
    raw.send(struct.pack("!ii", 8, 80877103))
    assert raw.recv_exact(1) == b"N"
    raw.send(struct.pack("!ii", 8, 80877104))
    assert raw.recv_exact(1) == b"N"
    params = b"database\x00demo\x00\x00"
    raw.send(struct.pack("!ii", len(params) + 8, 3 << 16) + params)
    kind, body = raw.message()
    assert kind == b"E"
    assert error_fields(body)["C"] == "28000"
    assert raw.closed()


def test_data_sent_with_ssl_request_is_refused(raw: Raw) -> None:
    params = b"user\x00alice\x00\x00"
    startup = struct.pack("!ii", len(params) + 8, 3 << 16) + params
    raw.send(struct.pack("!ii", 8, 80877103) + startup)
    kind, body = raw.message()
    assert kind == b"E"
    assert "unencrypted data after SSL request" in error_fields(body)["M"]


def test_protocol_minor_version_is_negotiated(raw: Raw) -> None:
    params = b"user\x00alice\x00_pq_.future\x00on\x00\x00"
    raw.send(struct.pack("!ii", len(params) + 8, (3 << 16) | 2) + params)
    kind, body = raw.message()
    assert kind == b"v"
    assert body == struct.pack("!ii", 0, 1) + b"_pq_.future\x00"
    kind, body = raw.message()
    assert kind == b"R"


def test_raw_cancel_request(srv: Running, raw: Raw) -> None:
    key = dict(raw.login())[b"K"]
    raw.send(query("SLEEP"))
    assert srv.app.sleeping.wait(5)
    wrong = Raw(srv.port)
    pid, secret = struct.unpack("!iI", key)
    wrong.send(struct.pack("!iiiI", 16, 80877102, pid, secret ^ 1))
    assert wrong.closed()
    assert srv.app.cancels == 0
    canceller = Raw(srv.port)
    canceller.send(struct.pack("!iii", 16, 80877102, pid) + struct.pack("!I", secret))
    assert canceller.closed()
    msgs = raw.until_ready()
    assert error_fields(msgs[0][1])["C"] == "57014"
    assert srv.app.cancels == 1
    wrong.close()
    canceller.close()


def test_unknown_cancel_key_is_harmless(srv: Running, raw: Raw) -> None:
    raw.send(struct.pack("!iiiI", 16, 80877102, 12345, 678))
    assert raw.closed()
    assert srv.app.cancels == 0


def test_terminate(srv: Running, raw: Raw) -> None:
    raw.login()
    raw.send(typed(b"X", b""))
    assert raw.closed()
    deadline = time.monotonic() + 5
    while srv.app.closed < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert srv.app.closed == 1


def test_server_close_ends_connections() -> None:
    running = Running()
    conn = psycopg.connect(running.dsn(), autocommit=True)
    try:
        conn.execute("SELECT 1")
        running.stop()
        assert running.app.closed == 1
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")
    finally:
        conn.close()


# --- TLS ---


@pytest.fixture(params=[False, True], ids=["tls", "require_tls"])
def tls_srv(request: pytest.FixtureRequest, certificate: tuple[Path, Path]) -> Iterator[Running]:
    running = Running(ssl_context=server_context(*certificate), require_tls=request.param)
    try:
        yield running
    finally:
        running.stop()


def test_psycopg_and_psql_over_tls_with_scram(tls_srv: Running) -> None:
    dsn = tls_srv.dsn().replace("sslmode=prefer", "sslmode=require")
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.pgconn.ssl_in_use
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert conn.execute("SELECT %s", [1]).fetchone() == (1,)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(tls_srv.dsn(password="wrong").replace("prefer", "require"))
    if not os.path.exists(PSQL):
        pytest.skip("psql is not installed")
    env = {**os.environ, "PGPASSWORD": PASSWORD, "PGSSLMODE": "require"}
    done = subprocess.run(
        [PSQL, "-h", "127.0.0.1", "-p", str(tls_srv.port), "-U", "alice", "-d", "demo", "-X",
         "-A", "-t", "-c", "SELECT 1", "-c", "\\conninfo"],
        env=env, capture_output=True, text=True, timeout=20, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "SSL connection" in done.stdout


def test_unencrypted_clients_with_tls_configured(tls_srv: Running) -> None:
    dsn = tls_srv.dsn().replace("sslmode=prefer", "sslmode=disable")
    if not tls_srv.server.require_tls:
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert not conn.pgconn.ssl_in_use
            assert conn.execute("SELECT 1").fetchone() == (1,)
        return
    with pytest.raises(psycopg.OperationalError) as caught:
        psycopg.connect(dsn)
    assert "sslmode=require" in str(caught.value)


def test_without_tls_ssl_is_refused_and_require_fails(srv: Running) -> None:
    with pytest.raises(psycopg.OperationalError, match="(?i)server does not support SSL"):
        psycopg.connect(srv.dsn().replace("sslmode=prefer", "sslmode=require"))
    with psycopg.connect(srv.dsn(), autocommit=True) as conn:  # prefer falls back
        assert not conn.pgconn.ssl_in_use


def test_tls_settings(tmp_path: Path, certificate: tuple[Path, Path]) -> None:
    with pytest.raises(ValueError, match="tls_cert and tls_key go together"):
        ServerSettings(tls_cert=Path("cert.pem"))
    with pytest.raises(ValueError, match="require_tls = true needs"):
        ServerSettings(require_tls=True)
    relative = ServerSettings(tls_cert=Path("c.pem"), tls_key=Path("k.pem"), require_tls=True)
    resolved = relative.resolve_paths(tmp_path)
    assert resolved.tls_cert == tmp_path / "c.pem" and resolved.tls_key == tmp_path / "k.pem"
    with pytest.raises(ConfigError, match="does not exist"):
        ssl_context(resolved)
    cert, key = certificate
    with pytest.raises(ConfigError, match="cannot be used together"):
        ssl_context(ServerSettings(tls_cert=cert, tls_key=cert))
    assert ssl_context(ServerSettings(tls_cert=cert, tls_key=key)) is not None
    with pytest.raises(ValueError, match="require_tls needs"):
        Server(FakeApp(), require_tls=True)


# --- fuzz: random bytes at a live socket never disturb another session ---


@pytest.fixture(scope="module")
def fuzz_srv() -> Iterator[Running]:
    running = Running(max_message_size=64 * 1024)
    try:
        yield running
    finally:
        running.stop()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    login=st.booleans(),
    chunks=st.lists(
        st.one_of(
            st.binary(max_size=64),
            st.sampled_from([b"Q", b"P", b"B", b"E", b"D", b"S", b"X", b"p", b"\x00\x00\x00\x08"]),
            st.builds(lambda t, n: t + struct.pack("!i", n), st.sampled_from([b"Q", b"B", b"P"]),
                      st.integers(min_value=-10, max_value=1 << 24)),
        ),
        max_size=8,
    ),
)  # fmt: skip
def test_random_bytes_end_only_their_connection(
    fuzz_srv: Running, login: bool, chunks: list[bytes]
) -> None:
    with psycopg.connect(fuzz_srv.dsn(), autocommit=True) as witness:
        raw = Raw(fuzz_srv.port)
        try:
            if login:
                raw.login()
            with contextlib.suppress(OSError):  # the server may hang up at any point
                for chunk in chunks:
                    raw.sock.sendall(chunk)
                raw.sock.shutdown(socket.SHUT_WR)  # abrupt end of the stream
                while raw.sock.recv(65536):
                    pass
        finally:
            raw.close()
        assert witness.execute("SELECT 1").fetchone() == (1,)
