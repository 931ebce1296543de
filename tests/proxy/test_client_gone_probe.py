"""The server notices a client that went away while its statement runs, even behind data
the client sent that the server has not read yet, and says an answer on record was
written only once the kernel holds all of it.

The real server on a real TCP connection from a raw socket (the application is the test
one of test_server, plus a statement that waits for its client to go). The client sends
a Query and then far more than the server buffers (pipelined Sync messages): the server's
stream pauses reading the socket, so the end of the stream waits behind data no one
reads, and only a look at the socket (poll with POLLRDHUP, as PostgreSQL's
client_connection_check_interval) can see it. Before, such a client was never seen to go.
"""

from __future__ import annotations

import asyncio
import fcntl
import socket
import ssl
import struct
import termios
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from proxy.protocol import delivery
from proxy.seam import ClientInfo, ColumnDescription, StatementResult
from proxy.server import Server
from proxy.tls import server_context
from tests.proxy.test_server import TEXT, FakeApp, FakeSession, Raw, query

pytestmark = pytest.mark.integration

#: The server looks at the client's connection this often while a statement runs (s).
INTERVAL = 0.1
#: How long WAIT waits for its client to go (seconds); a client seen gone ends it sooner.
HOLD_SECONDS = 1.5
#: Sync messages sent after the Query (225 KB): more than the 64 KiB the server reads at
#: once and its stream's 128 KiB buffer, so that reading pauses; little enough that the
#: server's kernel takes the rest at once, and the end of the stream right after it.
SYNCS = 45_000
SYNC = b"S\x00\x00\x00\x04"
SSL_REQUEST = struct.pack("!ii", 8, 80877103)
#: Rows of 1 KiB in the answer of BIG: more than the kernel's buffers on the way hold
#: (SEND_BUFFER, RECEIVE_BUFFER), less than that and 64 KiB more.
BIG_ROWS = 48
#: The client's receive buffer and the server's send buffer while BIG is answered.
RECEIVE_BUFFER = 4096
SEND_BUFFER = 4096
#: Setup waits (not measurements).
SETTLE_SECONDS = 0.5
WAIT_SECONDS = 20.0


class WatchingSession(FakeSession):
    """WAIT: waits until its client is seen gone (or HOLD_SECONDS), and says which.
    BIG: a large answer on record (as the pipeline's accepted answers are)."""

    async def execute(self, sql: str) -> StatementResult:
        app = self.app
        if not isinstance(app, WatchingApp):
            raise TypeError("WatchingSession needs a WatchingApp")
        command = sql.strip().upper()
        link = delivery.current()
        if link is None:
            raise RuntimeError("no client link in the server's task")
        if command == "WAIT":
            gone = asyncio.Event()
            stop = link.when_gone(gone.set)
            started = time.monotonic()
            try:
                await asyncio.wait_for(gone.wait(), HOLD_SECONDS)
            except TimeoutError:
                pass
            finally:
                stop()
            app.waits.append((link.gone, time.monotonic() - started))
            return StatementResult(
                "SELECT 1",
                columns=(ColumnDescription("client", TEXT),),
                rows=(("gone" if link.gone else "there",),),
            )
        if command == "BIG":
            app.small_send_buffer()
            link.expect_answer(app.answer_written)
            return StatementResult(
                f"SELECT {BIG_ROWS}",
                columns=(ColumnDescription("filler", TEXT),),
                rows=tuple(("x" * 1024,) for _ in range(BIG_ROWS)),
            )
        return await super().execute(sql)


class WatchingApp(FakeApp):
    def __init__(self) -> None:
        super().__init__()
        self.waits: list[tuple[bool, float]] = []
        #: For each answer on record: whether the server said it was written, and how many
        #: bytes of it its transports still held then.
        self.written: list[tuple[bool, int]] = []
        self.server: Server | None = None

    async def open_session(self, client: ClientInfo) -> FakeSession:
        self.clients.append(client)
        return WatchingSession(self, client)

    def connection_writers(self) -> list[asyncio.StreamWriter]:
        if self.server is None:
            raise RuntimeError("no server")
        return [conn.writer for conn in self.server._connections]  # the test's one

    def transports(self) -> list[asyncio.WriteTransport]:
        """The connection's transports: TLS (if any), and TCP below it."""
        if self.server is None:
            raise RuntimeError("no server")
        found: list[asyncio.WriteTransport] = []
        for conn in self.server._connections:
            found.append(conn.writer.transport)
            tcp = getattr(conn, "tcp", conn.writer.transport)
            if tcp is not conn.writer.transport:
                found.append(tcp)
        return found

    def small_send_buffer(self) -> None:
        """The kernel of the server's side holds little of an answer: the rest waits in
        the server's own buffers until the client reads."""
        for writer in self.connection_writers():
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)

    def answer_written(self, written: bool) -> None:
        held = sum(t.get_write_buffer_size() for t in self.transports())
        self.written.append((written, held))


class Running:
    """The server in a thread of its own, looking at its clients every INTERVAL."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self.app = WatchingApp()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = Server(self.app, "127.0.0.1", 0, ssl_context=ssl_context)
        self.server.client_check_interval = INTERVAL
        self.app.server = self.server
        self.port = asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(10)

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def srv() -> Iterator[Running]:
    running = Running()
    try:
        yield running
    finally:
        running.stop()


def logged_in(srv: Running) -> Raw:
    client = Raw(srv.port)
    client.sock.settimeout(WAIT_SECONDS)
    client.login()
    return client


class SmallWindowRaw(Raw):
    """A client whose receive buffer is RECEIVE_BUFFER from the start; over TLS if asked
    (SSLRequest, then the handshake)."""

    def __init__(self, port: int, *, tls: bool = False) -> None:
        plain = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        plain.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
        plain.settimeout(WAIT_SECONDS)
        plain.connect(("127.0.0.1", port))
        self.sock = plain
        self.buf = b""
        if tls:
            plain.sendall(SSL_REQUEST)
            assert plain.recv(1) == b"S"
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE  # the test's own certificate
            self.sock = context.wrap_socket(plain)


def all_taken(sock: socket.socket) -> None:
    """Wait until the server's kernel acknowledged every byte sent on ``sock``: nothing
    waits in this side's send queue, so the end of the stream goes out at once."""
    deadline = time.monotonic() + WAIT_SECONDS
    while struct.unpack("i", fcntl.ioctl(sock, termios.TIOCOUTQ, b"\0" * 4))[0]:
        if time.monotonic() > deadline:
            raise AssertionError("the server's kernel did not take the pipelined data")
        time.sleep(0.01)


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {WAIT_SECONDS} s for {what}")
        time.sleep(0.02)


def until_ready(client: Raw, count: int) -> list[tuple[bytes, bytes]]:
    """The server's messages up to the ``count``-th ReadyForQuery."""
    return [message for _ in range(count) for message in client.until_ready()]


@pytest.mark.parametrize("how", ["eof", "reset"])
def test_a_client_gone_behind_unread_data_is_seen_while_its_statement_runs(
    srv: Running, how: str
) -> None:
    client = logged_in(srv)
    client.send(query("WAIT") + SYNC * SYNCS)
    all_taken(client.sock)
    time.sleep(SETTLE_SECONDS)  # the statement runs; the server reads no more
    if how == "eof":
        client.sock.shutdown(socket.SHUT_WR)  # the end of the stream, behind the Syncs
    else:
        client.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()
    wait_for(lambda: bool(srv.app.waits), "the statement's end")
    ((gone, waited),) = srv.app.waits
    assert gone, "the client that went was taken as still there"
    assert waited < HOLD_SECONDS


def test_a_pipelined_client_that_stays_is_not_taken_as_gone(srv: Running) -> None:
    client = logged_in(srv)
    try:
        client.send(query("WAIT") + SYNC * SYNCS)
        all_taken(client.sock)
        # The server looks at the connection every INTERVAL while WAIT runs: data waits
        # to be read all that time, and is not an end of the stream.
        messages = until_ready(client, 1 + SYNCS)
        ((gone, waited),) = srv.app.waits
        assert not gone and waited >= HOLD_SECONDS
        rows = [body for kind, body in messages if kind == b"D"]
        assert rows == [struct.pack("!hi", 1, 5) + b"there"]
        client.send(query("SELECT 1"))
        assert any(kind == b"D" for kind, _ in client.until_ready())
    finally:
        client.close()


@pytest.fixture
def tls_srv(certificate: tuple[Path, Path]) -> Iterator[Running]:
    running = Running(ssl_context=server_context(*certificate))
    try:
        yield running
    finally:
        running.stop()


@pytest.mark.parametrize("tls", [False, True], ids=["tcp", "tls"])
def test_an_answer_on_record_is_written_once_the_kernel_holds_all_of_it(
    tls: bool, request: pytest.FixtureRequest
) -> None:
    running: Running = request.getfixturevalue("tls_srv" if tls else "srv")
    client = SmallWindowRaw(running.port, tls=tls)
    try:
        client.login()
        client.send(query("BIG"))
        # The kernel took what its small buffers hold; the rest (less than a stream's
        # 64 KiB high-water mark, so writing it did not wait) is still the server's: not
        # yet written, while the client reads nothing.
        time.sleep(SETTLE_SECONDS)
        assert running.app.written == []
        messages = client.until_ready()
        assert sum(kind == b"D" for kind, _ in messages) == BIG_ROWS
        wait_for(lambda: bool(running.app.written), "the answer to be written")
        assert running.app.written == [(True, 0)]
    finally:
        client.close()
