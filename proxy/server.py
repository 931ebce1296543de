"""The asyncio PostgreSQL wire-protocol server.

Speaks protocol 3.0, with TLS when the server has a certificate (SSLRequest is answered
``S`` and the stream upgraded; else ``N``; GSSENCRequest is always ``N``; ``require_tls``
refuses unencrypted startups), authenticates with SCRAM-SHA-256, and hands every
simple-protocol Query to the application's :class:`~proxy.seam.Session`; the extended
protocol's statements and portals are kept by :mod:`proxy.extended`; a Query of several
statements runs them one by one (:mod:`proxy.several_statements`). Responses are
buffered and written when every message the client has sent so far is answered (one
write per round trip, however many messages it carried), or sooner past 64 KiB; an
answer the audit log records as given is written at once, until the kernel holds all of
it, and a client that goes away is noticed even while its statement runs, even behind
data it sent that is not read yet (:mod:`proxy.protocol.delivery`, :class:`_ClosedProbe`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import importlib
import logging
import secrets
import select
import ssl
import struct
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any

from proxy.copy_out import copy_messages
from proxy.extended import ExtendedQueries
from proxy.protocol import codec, delivery
from proxy.protocol.codec import DEFAULT_MAX_MESSAGE_SIZE, ProtocolViolation
from proxy.protocol.delivery import ClientLink
from proxy.protocol.messages import (
    AuthStage,
    Bind,
    CancelRequest,
    Close,
    Describe,
    Execute,
    Flush,
    FrontendMessage,
    GSSENCRequest,
    InvalidEncoding,
    OtherMessage,
    Parse,
    Query,
    SASLInitialResponse,
    SASLResponse,
    SSLRequest,
    StartupMessage,
    Sync,
    Terminate,
)
from proxy.protocol.scram import (
    MECHANISM,
    InvalidVerifier,
    ScramAuthenticationFailed,
    ScramExchange,
    ScramProtocolError,
)
from proxy.protocol.states import ConnectionState, transition
from proxy.seam import (
    Application,
    ClientInfo,
    QueryError,
    Session,
    StatementResult,
    TransactionStatus,
)
from proxy.several_statements import Statement, run_statements, split_statements

logger = logging.getLogger(__name__)

INTERNAL_ERROR_MESSAGE = "internal error in dpproxy; the statement was not answered"
ADMIN_SHUTDOWN = "57P01"
SHUTDOWN_MESSAGE = "terminating connection due to administrator command"
FUNCTION_CALL_MESSAGE = "dpproxy does not support the function call protocol"
TLS_REQUIRED_MESSAGE = (
    "dpproxy accepts only encrypted connections; connect with sslmode=require "
    "(or verify-ca / verify-full)"
)
DEFAULT_STARTUP_TIMEOUT = 60.0
_READ_SIZE = 1 << 16
_FLUSH_SIZE = 1 << 16
_EXTENDED = (Parse, Bind, Describe, Execute, Close)
# While the server shuts down: the messages still handled (they finish what the client
# already asked for); any other ends the connection with SHUTDOWN_MESSAGE.
_FINISHING = (Sync, Flush, Close, Terminate)
# After the grace period and the cancellation of busy handlers: how long their goodbyes
# may take before their sockets are cut.
_ABORT_AFTER = 1.0
_CANCEL_KEY = struct.Struct("!iI")
#: A Query text longer than this (characters) is split into statements on a thread of its
#: own, not on the event loop that serves every session (its lexer takes about 3 µs a
#: lexeme: a megabyte of ";" or "/**/" is seconds).
_SPLIT_ON_THE_LOOP = 65536
#: While a statement runs, the client's connection is looked at this often (seconds) for a
#: client that went away (PostgreSQL's client_connection_check_interval); 0: never.
CLIENT_CHECK_INTERVAL = 1.0
# poll(2) events of a client gone: its end of the stream (Linux's POLLRDHUP, which is set
# once the FIN arrived, even behind data not read yet), and those poll reports whether
# asked or not: a hang-up, an error (a reset), a socket no longer open. Data waiting to be
# read (POLLIN) is none of them, and is not asked for.
_POLLRDHUP: int = getattr(select, "POLLRDHUP", 0)
# While the TLS layer's buffer is being handed to the TCP connection below it: how long
# the waits between looks at the buffers are at first and at most (seconds).
_TLS_SENT_FIRST_WAIT = 0.001
_TLS_SENT_LONGEST_WAIT = 0.05


class _Closed(Exception):
    """Internal: the connection must end now (the answer, if any, is already queued)."""


class _ShuttingDown(Exception):
    """Internal: the server is shutting down; the connection ends with a FATAL 57P01."""


class _ClientReader(asyncio.StreamReader):
    """The stream from one client, which tells its connection's link when the client
    goes (the end of the stream, or the connection lost), whether or not a statement is
    reading it then."""

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self.link = ClientLink()

    def feed_eof(self) -> None:
        super().feed_eof()
        self.link.lost()

    def set_exception(self, exc: Exception) -> None:
        super().set_exception(exc)
        self.link.lost()


class _ClosedProbe:
    """Whether a client closed its end of the connection (or it was reset), seen without
    reading from it or waiting: poll(2) on the socket with POLLRDHUP, as PostgreSQL's
    ``client_connection_check_interval`` does on Linux. The kernel sets POLLRDHUP once the
    client's FIN arrived, even behind data the server has not read yet (its reading is
    paused while the stream reader's buffer is full): what the end of the stream, which
    comes after that data, cannot tell until it is read. Data alone (a pipelined client)
    never sets it. True also where it cannot tell (the poll fails), and once a transport of
    the connection is closing (nothing more reaches the client; its socket may be closed,
    its number taken by another)."""

    def __init__(self, fd: int, writer: asyncio.StreamWriter, tcp: asyncio.BaseTransport) -> None:
        self._poll = select.poll()
        self._poll.register(fd, _POLLRDHUP)  # POLLHUP, POLLERR and POLLNVAL always come
        self._writer = writer
        self._tcp = tcp

    @classmethod
    def of(cls, writer: asyncio.StreamWriter) -> _ClosedProbe | None:
        """The probe of ``writer``'s connection; None where poll(2) cannot see an end of
        the stream behind unread data (no POLLRDHUP: not Linux) or there is no socket."""
        sock = writer.get_extra_info("socket")
        fileno = getattr(sock, "fileno", None)
        if not _POLLRDHUP or fileno is None or not hasattr(select, "poll"):
            return None
        fd = fileno()
        return cls(fd, writer, writer.transport) if isinstance(fd, int) and fd >= 0 else None

    def __call__(self) -> bool:
        if self._tcp.is_closing() or self._writer.transport.is_closing():
            return True
        try:
            # Registered for POLLRDHUP alone: any event says the client is gone.
            return bool(self._poll.poll(0))
        except OSError:
            return True


def encode_result(result: StatementResult) -> bytes:
    """The backend messages answering one successful statement, before ReadyForQuery
    (which is preceded by the ParameterStatus of values changed: ``_Connection.ready``)."""
    parts = [
        codec.notice_response(
            n.message, severity=n.severity, code=n.code, detail=n.detail, hint=n.hint
        )
        for n in result.notices
    ]
    if result.empty:
        parts.append(codec.EMPTY_QUERY_RESPONSE)
        return b"".join(parts)
    if result.copy is not None:  # COPY … TO STDOUT: CopyOutResponse, CopyData…, CopyDone
        parts.append(copy_messages(result.copy))
    if result.columns is not None:
        parts.append(
            codec.row_description(
                (c.name, c.type_oid, c.type_size, c.type_modifier) for c in result.columns
            )
        )
        data_row = codec.data_row
        parts.extend(data_row(row) for row in result.rows)
    parts.append(codec.command_complete(result.tag))
    return b"".join(parts)


def encode_query_error(err: QueryError, *, severity: str | None = None) -> bytes:
    """The error's notices followed by its ErrorResponse."""
    parts = [
        codec.notice_response(
            n.message, severity=n.severity, code=n.code, detail=n.detail, hint=n.hint
        )
        for n in err.notices
    ]
    parts.append(
        codec.error_response(
            err.sqlstate,
            err.message,
            severity=severity or err.severity,
            detail=err.detail,
            hint=err.hint,
            routine=err.routine,
        )
    )
    return b"".join(parts)


class Server:
    """A listening dpproxy server. ``await start()`` returns the bound port."""

    def __init__(
        self,
        app: Application,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        ssl_context: ssl.SSLContext | None = None,
        require_tls: bool = False,
        client_check_interval: float = CLIENT_CHECK_INTERVAL,
    ) -> None:
        if require_tls and ssl_context is None:
            raise ValueError("require_tls needs an SSL context (tls_cert and tls_key)")
        self.app = app
        self.ssl_context = ssl_context
        self.require_tls = require_tls
        self.host = host
        self.requested_port = port
        self.max_message_size = max_message_size
        self.startup_timeout = startup_timeout
        self.client_check_interval = client_check_interval
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._connections: set[_Connection] = set()
        self._closing = False
        self._live: dict[int, _Connection] = {}
        self.port = 0

    async def start(self) -> int:
        if self._server is not None:
            raise RuntimeError("server already started")
        loop = asyncio.get_running_loop()

        def connection() -> asyncio.StreamReaderProtocol:  # as asyncio.start_server's
            reader = _ClientReader(_READ_SIZE, loop)
            return asyncio.StreamReaderProtocol(reader, self._on_connect, loop=loop)

        self._server = await loop.create_server(connection, self.host, self.requested_port)
        sockets = self._server.sockets
        self.port = int(sockets[0].getsockname()[1]) if sockets else self.requested_port
        logger.info("dpproxy listening on %s:%d", self.host, self.port)
        return self.port

    async def serve_forever(self) -> None:
        if self._server is None:
            await self.start()
        if self._server is not None:
            await self._server.serve_forever()

    @property
    def closing(self) -> bool:
        """True once close() was called: connections end as soon as they are idle."""
        return self._closing

    async def close(self, *, grace: float = 5.0) -> None:
        """Stop listening and end every open connection (their sessions are closed).

        As PostgreSQL: idle connections get a FATAL admin_shutdown (57P01) error and are
        closed at once. A connection busy with a statement finishes it and sends its
        answer (an answer already charged is not lost), then gets the same error; one
        still busy after ``grace`` seconds is cancelled (its statement is recorded as
        failed) and gets the error too.
        """
        server, self._server = self._server, None
        self._closing = True
        if server is not None:
            server.close()
        for conn in list(self._connections):
            conn.shutdown_if_idle()
        tasks = list(self._tasks)
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=grace)
            for task in pending:
                task.cancel()
            if pending:
                _, stuck = await asyncio.wait(pending, timeout=_ABORT_AFTER)
                if stuck:  # a client that reads nothing: cut its socket
                    for conn in list(self._connections):
                        conn.writer.transport.abort()
                    await asyncio.wait(stuck)
        if server is not None:
            await server.wait_closed()

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        link = reader.link if isinstance(reader, _ClientReader) else ClientLink()
        delivery.serve_in_this_task(link)  # the pipeline reads it (delivery.current)
        conn = _Connection(self, reader, writer, link)
        conn.task = task
        self._connections.add(conn)
        try:
            await conn.run()
        except asyncio.CancelledError:
            # Only close() cancels these tasks. Ending normally keeps asyncio's stream
            # callback (which calls task.exception()) from logging a spurious error.
            if not self._closing:
                raise
        finally:
            self._connections.discard(conn)
            if task is not None:
                self._tasks.discard(task)

    # --- cancel keys ---

    def register(self, conn: _Connection) -> tuple[int, int]:
        """Give ``conn`` a fresh (process id, secret key) pair."""
        while True:
            pid = secrets.randbelow(2**31 - 2) + 1
            if pid not in self._live:
                break
        self._live[pid] = conn
        return pid, secrets.randbits(32)

    def unregister(self, pid: int) -> None:
        self._live.pop(pid, None)

    def cancel(self, request: CancelRequest) -> bool:
        """Cancel the statement of the connection the key names; False if none matches."""
        conn = self._live.get(request.process_id)
        if conn is None or conn.session is None:
            return False
        expected = _CANCEL_KEY.pack(conn.process_id, conn.secret_key)
        given = _CANCEL_KEY.pack(request.process_id, request.secret_key)
        if not hmac.compare_digest(expected, given):
            return False
        try:
            conn.session.cancel()
        except Exception:
            logger.exception("Session.cancel() failed")
            return False
        return True


class _Connection:
    """One client connection, from the startup packet to the end."""

    def __init__(
        self,
        server: Server,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        link: ClientLink,
    ) -> None:
        self.server = server
        self.app = server.app
        self.reader = reader
        self.writer = writer
        self.link = link
        # The TCP connection's transport (under the TLS layer, once there is one).
        self.tcp = writer.transport
        link.probe_with(_ClosedProbe.of(writer))
        self._loop = asyncio.get_running_loop()
        self._check: asyncio.TimerHandle | None = None
        self._running = False  # a statement runs (start_checking_client)
        self.decoder = codec.FrontendDecoder(max_message_size=server.max_message_size)
        self.state = ConnectionState.AWAITING_STARTUP
        self.session: Session | None = None
        self.process_id = 0
        self.secret_key = 0
        self.out: list[bytes] = []
        self.out_size = 0
        self.extended = ExtendedQueries()
        # The value of each reported parameter the client was last told (ParameterStatus).
        self.reported: dict[str, str] = {}
        self.encrypted = False
        # False only while waiting for the client (nothing of its own under way): then a
        # shutdown ends the connection at once (shutdown_if_idle).
        self.busy = True
        self.task: asyncio.Task[None] | None = None
        peer = writer.get_extra_info("peername")
        self.address = str(peer[0]) if isinstance(peer, tuple) and peer else str(peer or "")

    # --- I/O ---

    def send(self, data: bytes) -> None:
        self.out.append(data)
        self.out_size += len(data)

    async def flush(self) -> None:
        if self.out:
            data = b"".join(self.out) if len(self.out) > 1 else self.out[0]
            self.out.clear()
            self.out_size = 0
            self.writer.write(data)
            await self.writer.drain()

    async def deliver(self) -> None:
        """Write what is queued now if it holds an answer on record as given, and tell the
        link whether it reached the client's connection: the client had not gone just
        before (its connection looked at once more: it may read nothing that comes after
        it left), and the kernel took every byte (``handed_to_kernel``)."""
        if not self.link.answer_pending:
            return
        written = False
        try:
            there = not self.link.gone
            await self.flush()
            if self.writer.transport.get_write_buffer_size() or self.tcp.get_write_buffer_size():
                await self.handed_to_kernel()
            written = there
        finally:
            self.link.answer_written(written)

    async def handed_to_kernel(self) -> None:
        """Return once everything written is in the kernel's send buffer of the socket:
        the buffers of the connection's transports (TCP, and TLS above it) are empty.
        Raise ConnectionError if the connection is lost first. As any write, it waits as
        long as the client reads nothing (a shutdown cuts such a connection)."""
        transport = self.writer.transport
        if transport is self.tcp:
            # Flow control pauses the stream while the buffer holds more than its high
            # water mark and resumes it at its low one: both 0, drain() returns once the
            # buffer is empty (or raises once the connection is lost).
            low, high = transport.get_write_buffer_limits()
            transport.set_write_buffer_limits(high=0, low=0)
            try:
                await self.writer.drain()
            finally:
                if not transport.is_closing():
                    transport.set_write_buffer_limits(high=high, low=low)
            return
        # TLS: the TCP transport's buffer below is not the TLS one's flow control; looked
        # at a few times, at growing intervals (a client slow to read its answer).
        wait = _TLS_SENT_FIRST_WAIT
        while transport.get_write_buffer_size() or self.tcp.get_write_buffer_size():
            if transport.is_closing() or self.tcp.is_closing():
                raise ConnectionResetError("the connection was lost before the answer was sent")
            await asyncio.sleep(wait)
            wait = min(2 * wait, _TLS_SENT_LONGEST_WAIT)

    def start_checking_client(self) -> None:
        """A statement starts: until ``stop_checking_client``, the client's connection is
        looked at (``link.gone`` asks the probe; a client found gone is ``lost``, which
        stops the statement) at least every client_check_interval seconds. One timer per
        connection, kept while statements follow each other: a fast statement costs no
        timer of its own."""
        self._running = True
        interval = self.server.client_check_interval
        if self._check is None and interval > 0:
            self._check = self._loop.call_later(interval, self._check_client)

    def _check_client(self) -> None:
        self._check = None
        if self._running and not self.link.gone:
            self.start_checking_client()

    def stop_checking_client(self) -> None:
        self._running = False  # the timer ends when it next fires

    async def read(self) -> FrontendMessage | None:
        """The next message, or None at end of stream. Output is written when the client
        has nothing more buffered for us (one write per batch of pipelined messages), or
        sooner once _FLUSH_SIZE bytes are waiting. While the server shuts down, raises
        _ShuttingDown instead of waiting for the client or starting anything new."""
        while True:
            if self.out_size >= _FLUSH_SIZE:
                await self.flush()
            msg = self.decoder.next_message()
            if msg is not None:
                if self.server.closing and not isinstance(msg, _FINISHING):
                    raise _ShuttingDown
                return msg
            await self.flush()
            if self.server.closing:
                raise _ShuttingDown
            self.busy = False
            try:
                data = await self.reader.read(_READ_SIZE)
            finally:
                self.busy = True
            if not data:
                return None
            self.decoder.append(data)

    def shutdown_if_idle(self) -> None:
        """The server shuts down: end this connection now if it is waiting for its client
        (its task is cancelled there, and run() says goodbye); a busy one ends when it has
        answered (read() raises _ShuttingDown)."""
        if not self.busy and self.task is not None:
            self.task.cancel()

    def move(self, target: ConnectionState) -> None:
        self.state = transition(self.state, target)

    # --- lifecycle ---

    async def run(self) -> None:
        try:
            async with asyncio.timeout(self.server.startup_timeout):
                self.session = await self.startup()
            if self.session is not None:
                await self.query_loop(self.session)
        except ProtocolViolation as exc:
            logger.warning("closing connection from %s: %s", self.address, exc)
            self.send(codec.error_response(exc.sqlstate, str(exc), severity="FATAL"))
        except TimeoutError:
            logger.warning("closing connection from %s: startup took too long", self.address)
            self.send(
                codec.error_response("08P01", "authentication took too long", severity="FATAL")
            )
        except _Closed:
            pass
        except _ShuttingDown:
            self.send(codec.error_response(ADMIN_SHUTDOWN, SHUTDOWN_MESSAGE, severity="FATAL"))
        except asyncio.CancelledError:
            # Only Server.close cancels a connection: idle, or busy past the grace period.
            if not self.server.closing:
                raise
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
            self.send(codec.error_response(ADMIN_SHUTDOWN, SHUTDOWN_MESSAGE, severity="FATAL"))
        except (ConnectionError, OSError) as exc:
            logger.debug("connection from %s lost: %s", self.address, exc)
        except Exception:
            # A bug here or in the application (outside Session.execute): end this
            # connection only, and tell the client why if the socket still works.
            logger.exception("closing connection from %s after an internal error", self.address)
            self.send(codec.error_response("XX000", INTERNAL_ERROR_MESSAGE, severity="FATAL"))
        finally:
            await self.finish()

    async def finish(self) -> None:
        self._running = False
        check, self._check = self._check, None
        if check is not None:
            check.cancel()
        if self.process_id:
            self.server.unregister(self.process_id)
        if self.state is not ConnectionState.CLOSED:
            self.move(ConnectionState.CLOSED)
        session, self.session = self.session, None
        if session is not None:
            try:
                await session.close()
            except Exception:
                logger.exception("Session.close() failed")
        try:
            with contextlib.suppress(ConnectionError, OSError):
                await self.flush()
        finally:
            self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()

    # --- startup and authentication ---

    async def startup(self) -> Session | None:
        while True:
            msg = await self.read()
            if msg is None:
                return None
            if isinstance(msg, SSLRequest | GSSENCRequest):
                if self.decoder.buffered:
                    raise ProtocolViolation("received unencrypted data after SSL request")
                if isinstance(msg, SSLRequest) and self.server.ssl_context is not None:
                    if self.encrypted:
                        raise ProtocolViolation("SSL request on an encrypted connection")
                    await self.start_tls(self.server.ssl_context)
                    continue
                self.send(codec.SSL_REFUSED)
                continue
            if isinstance(msg, CancelRequest):
                if not self.server.cancel(msg):
                    logger.info("cancel request from %s matched no connection", self.address)
                return None
            if isinstance(msg, StartupMessage):
                break
            raise ProtocolViolation("expected a startup packet")
        if self.server.require_tls and not self.encrypted:
            logger.info("refused an unencrypted connection from %s (require_tls)", self.address)
            self.send(codec.error_response("28000", TLS_REQUIRED_MESSAGE, severity="FATAL"))
            return None
        return await self.open(msg)

    async def start_tls(self, context: ssl.SSLContext) -> None:
        """Answer 'S' and run the TLS handshake; the streams are encrypted afterwards."""
        self.send(codec.SSL_ACCEPTED)
        await self.flush()
        try:
            await self.writer.start_tls(context)
        except ssl.SSLError as exc:
            logger.warning("TLS handshake with %s failed: %s", self.address, exc)
            raise _Closed from None
        self.encrypted = True

    async def open(self, startup: StartupMessage) -> Session | None:
        params = startup.params
        options = [name for name in params if name.startswith("_pq_.")]
        if startup.minor > 0 or options:
            self.send(codec.negotiate_protocol_version(0, options))
        user = params.get("user", "")
        if not user:
            self.send(
                codec.error_response(
                    "28000", "no PostgreSQL user name specified in startup packet", severity="FATAL"
                )
            )
            return None
        parameters = {k: v for k, v in params.items() if not k.startswith("_pq_.")}
        client = ClientInfo(
            user=user,
            database=params.get("database") or user,
            address=self.address,
            parameters=parameters,
        )
        if not await self.authenticate(client):
            return None
        self.send(codec.AUTHENTICATION_OK)
        try:
            session = await self.app.open_session(client)
        except QueryError as err:
            severity = "FATAL" if err.severity == "ERROR" else err.severity
            self.send(encode_query_error(err, severity=severity))
            return None
        # After the session applied the startup packet's settings: their values, as
        # PostgreSQL reports them.
        self.reported = self.app.server_parameters() | session.reported_parameters()
        for name, value in self.reported.items():
            self.send(codec.parameter_status(name, value))
        self.process_id, self.secret_key = self.server.register(self)
        self.send(codec.backend_key_data(self.process_id, self.secret_key))
        self.send(codec.ready_for_query(_status(session)))
        return session

    async def authenticate(self, client: ClientInfo) -> bool:
        verifier = await self.app.scram_verifier(client.user)
        try:
            exchange = ScramExchange(verifier, user=client.user)
        except InvalidVerifier as exc:
            logger.error("stored SCRAM verifier of user %r is unusable: %s", client.user, exc)
            exchange = ScramExchange(None, user=client.user)
        self.move(ConnectionState.AUTHENTICATING_SASL_FIRST)
        self.send(codec.authentication_sasl([MECHANISM]))
        self.decoder.auth_stage = AuthStage.SASL_INITIAL
        try:
            first = await self.read()
            if first is None or isinstance(first, Terminate):
                return False
            if not isinstance(first, SASLInitialResponse):
                raise ProtocolViolation("expected SASLInitialResponse message")
            if first.mechanism != MECHANISM:
                raise ScramProtocolError("client selected an invalid SASL authentication mechanism")
            if first.data is None:
                raise ScramProtocolError("malformed SCRAM message (empty client-first message)")
            self.send(codec.authentication_sasl_continue(exchange.server_first(first.data)))
            self.move(ConnectionState.AUTHENTICATING_SASL_FINAL)
            self.decoder.auth_stage = AuthStage.SASL_CONTINUE
            final = await self.read()
            if final is None or isinstance(final, Terminate):
                return False
            if not isinstance(final, SASLResponse):
                raise ProtocolViolation("expected SASLResponse message")
            server_final = exchange.server_final(final.data)
        except ScramAuthenticationFailed as exc:
            self.auth_failed(client, exc.reason)
            message = f'password authentication failed for user "{client.user}"'
            self.send(codec.error_response(exc.sqlstate, message, severity="FATAL"))
            return False
        except ScramProtocolError as exc:
            self.auth_failed(client, str(exc))
            self.send(codec.error_response(exc.sqlstate, str(exc), severity="FATAL"))
            return False
        self.decoder.auth_stage = AuthStage.NONE
        self.send(codec.authentication_sasl_final(server_final))
        self.move(ConnectionState.READY)
        return True

    def auth_failed(self, client: ClientInfo, reason: str) -> None:
        logger.info("authentication failed for user %r from %s", client.user, self.address)
        try:
            self.app.log_authentication_failure(client, reason)
        except Exception:
            logger.exception("log_authentication_failure failed")

    # --- queries ---

    async def query_loop(self, session: Session) -> None:
        while True:
            msg = await self.read()
            if msg is None or isinstance(msg, Terminate):
                return
            if self.state is ConnectionState.IN_EXTENDED_ERROR:
                if isinstance(msg, Sync):
                    self.move(ConnectionState.READY)
                    self.ready(session)
                continue
            if isinstance(msg, Query):
                self.extended.forget_unnamed()
                await self.query(session, msg.sql)
            elif isinstance(msg, Sync):
                self.ready(session)
            elif isinstance(msg, Flush):
                await self.flush()
            elif isinstance(msg, _EXTENDED):
                await self.extended_message(session, msg)
            elif isinstance(msg, InvalidEncoding):
                # As PostgreSQL: an ERROR, and the session goes on. In the extended
                # protocol, the messages up to Sync are skipped, as after any error there.
                self.send(codec.error_response(msg.sqlstate, msg.message))
                if msg.type == b"Q":
                    self.send(codec.ready_for_query(_status(session)))
                else:
                    self.move(ConnectionState.IN_EXTENDED_ERROR)
            elif isinstance(msg, OtherMessage):
                if msg.type == b"F":
                    self.send(codec.error_response("0A000", FUNCTION_CALL_MESSAGE))
                    self.send(codec.ready_for_query(_status(session)))
                # CopyData/CopyDone/CopyFail outside COPY are ignored, as PostgreSQL does.
            else:
                raise ProtocolViolation(f"unexpected {type(msg).__name__} message")

    def ready(self, session: Session) -> None:
        """ReadyForQuery, after the ParameterStatus of each reported value that differs
        from what the client was last told (``report_changes``). Outside a transaction
        block the (implicit) transaction has ended, and its portals with it
        (``ExtendedQueries.sync``)."""
        status = _status(session)
        self.extended.sync(TransactionStatus(status), session.transactions_ended)
        self.report_changes(session)
        self.send(codec.ready_for_query(status))

    def report_changes(self, session: Session) -> None:
        """As PostgreSQL 15 (ReportChangedGUCOptions, just before ReadyForQuery): one
        ParameterStatus per reported parameter whose value now differs from the one last
        sent, in the order of PostgreSQL's parameter table (by name, case aside). Two SETs
        of TimeZone in one Query give one message, with the last value; a SET to the value
        it had, or one a ROLLBACK (or a failed Query's implicit block) undid, none."""
        values = session.reported_parameters()
        for name in sorted(values, key=str.lower):
            value = values[name]
            if self.reported.get(name) != value:
                self.reported[name] = value
                self.send(codec.parameter_status(name, value))

    async def extended_message(
        self, session: Session, msg: Parse | Bind | Describe | Execute | Close
    ) -> None:
        fatal = False
        try:
            if isinstance(msg, Parse):
                response = self.extended.parse(msg, session.parameter_columns())
                self.extended.snapshot_taken(session, msg.statement)
            elif isinstance(msg, Bind):
                response = self.extended.bind(msg)
                self.extended.snapshot_taken(session, msg.statement)
            elif isinstance(msg, Describe):
                self.start_checking_client()  # it plans the statement
                try:
                    response = await self.extended.describe(session, msg)
                finally:
                    self.stop_checking_client()
            elif isinstance(msg, Execute):
                self.start_checking_client()
                try:
                    response = await self.extended.execute(session, msg)
                finally:
                    self.stop_checking_client()
            else:
                response = self.extended.close(msg)
        except QueryError as err:
            self.link.answer_written(False)  # an error is sent instead of any answer
            response = encode_query_error(err)
            fatal = err.severity in ("FATAL", "PANIC")
            self.move(ConnectionState.IN_EXTENDED_ERROR)
            session.abort_transaction()
        except Exception:
            self.link.answer_written(False)
            logger.exception("unexpected error in the extended query protocol")
            response = codec.error_response("XX000", INTERNAL_ERROR_MESSAGE)
            self.move(ConnectionState.IN_EXTENDED_ERROR)
            session.abort_transaction()
        self.send(response)
        if fatal:
            raise _Closed
        await self.deliver()

    async def query(self, session: Session, sql: str) -> None:
        """A simple Query: its statements, one after the other (proxy.several_statements)."""
        try:
            if len(sql) > _SPLIT_ON_THE_LOOP:  # up to seconds for a megabyte of ;;;
                statements = await asyncio.to_thread(split_statements, sql)
            else:
                statements = split_statements(sql)
        except QueryError as err:  # nothing runs; as any error, it fails a transaction block
            self.send(encode_query_error(err))
            session.abort_transaction()
        else:
            # What the end of a Query's implicit block restored is reported by ready().
            await run_statements(session, statements, partial(self.statement, session))
        self.ready(session)

    async def statement(self, session: Session, statement: Statement) -> bool:
        """Answer one statement of a simple Query; False after an error (whose position,
        if it names one, counts in the Query's whole text, as PostgreSQL's)."""
        fatal = False
        answered = False
        sql = statement.text
        self.start_checking_client()
        try:
            response = encode_result(await self.extended.run_statement(session, sql))
            answered = True
        except QueryError as err:
            self.link.answer_written(False)  # an error is sent instead of any answer
            response = encode_query_error(statement.placed(err))
            fatal = err.severity in ("FATAL", "PANIC")
            session.abort_transaction()
        except Exception:
            self.link.answer_written(False)
            logger.exception("unexpected error while executing a statement")
            response = codec.error_response("XX000", INTERNAL_ERROR_MESSAGE)
            session.abort_transaction()
        finally:
            self.stop_checking_client()
        self.send(response)
        if fatal:
            raise _Closed
        await self.deliver()
        return answered


def _status(session: Session) -> bytes:
    try:
        return session.transaction_status.value
    except Exception:
        logger.exception("Session.transaction_status failed")
        return b"I"


async def serve(
    app: Application,
    host: str,
    port: int,
    *,
    ready: Callable[[int], None] | None = None,
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    ssl_context: ssl.SSLContext | None = None,
    require_tls: bool = False,
    client_check_interval: float = CLIENT_CHECK_INTERVAL,
) -> None:
    """Run a server until cancelled; ``ready`` is called with the bound port."""
    server = Server(
        app,
        host,
        port,
        max_message_size=max_message_size,
        ssl_context=ssl_context,
        require_tls=require_tls,
        client_check_interval=client_check_interval,
    )
    bound = await server.start()
    if ready is not None:
        ready(bound)
    try:
        await server.serve_forever()
    finally:
        await server.close()


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop when it is installed (``pip install 'dpproxy[speed]'``), else
    None (asyncio's default loop)."""
    try:
        uvloop = importlib.import_module("uvloop")
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run_event_loop(main: Coroutine[Any, Any, None]) -> None:
    """Run ``main`` to completion on the fastest event loop available."""
    with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
        runner.run(main)
