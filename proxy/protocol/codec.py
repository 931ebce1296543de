"""PostgreSQL v3 wire codec: a frontend decoder and backend encoders, without I/O.

The decoder is fed raw bytes and yields complete :mod:`~proxy.protocol.messages` values.
Every malformed input raises :class:`ProtocolViolation` (and nothing else); once it has
raised, the decoder stays broken, since the byte stream can no longer be framed. The one
exception is text that is not UTF-8 in a message that is otherwise well formed (a Query,
Parse, Bind, Describe, Execute or Close): the message is framed and read to its end, and
an :class:`~proxy.protocol.messages.InvalidEncoding` takes its place, which the server
answers with an ERROR, as PostgreSQL does, and the stream stays in sync. Likewise a Query
whose SQL holds a NUL byte (or lacks its terminator) becomes a
:class:`~proxy.protocol.messages.MalformedQuery`: PostgreSQL's ERROR 08P01, not the end of
the connection.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from proxy.protocol.messages import (
    CANCEL_REQUEST_CODE,
    GSSENC_REQUEST_CODE,
    SSL_REQUEST_CODE,
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
    MalformedQuery,
    OtherMessage,
    Parse,
    PasswordMessage,
    Query,
    SASLInitialResponse,
    SASLResponse,
    SSLRequest,
    StartupMessage,
    Sync,
    Terminate,
)
from proxy.protocol.values import invalid_utf8_message

DEFAULT_MAX_MESSAGE_SIZE = 1 << 20
# PostgreSQL refuses startup packets above 10,000 bytes (MAX_STARTUP_PACKET_LENGTH).
MAX_STARTUP_PACKET_SIZE = 10_000

_INT16 = struct.Struct("!h")
_INT32 = struct.Struct("!i")
_UINT32 = struct.Struct("!I")
_HEADER = struct.Struct("!ci")
_M = TypeVar("_M", bound=FrontendMessage)


class ProtocolViolation(Exception):
    """The client sent bytes that are not a valid protocol message (SQLSTATE 08P01)."""

    sqlstate = "08P01"


# ---------------------------------------------------------------------------------------
# Payload reader


class _Reader:
    """Sequential reads from one message payload; every overrun is a ProtocolViolation.

    A string that is not UTF-8 is a ProtocolViolation too, unless ``lenient``: then the
    first such string's error is kept in :attr:`bad_text` and reading goes on, so that the
    message can be checked to the end and answered with an ERROR instead."""

    __slots__ = ("_data", "_lenient", "_pos", "_what", "bad_text")

    def __init__(self, data: bytes, what: str, *, lenient: bool = False) -> None:
        self._data = data
        self._pos = 0
        self._what = what
        self._lenient = lenient
        self.bad_text: str | None = None

    def _fail(self, reason: str) -> ProtocolViolation:
        return ProtocolViolation(f"invalid {self._what} message: {reason}")

    def int16(self) -> int:
        if self._pos + 2 > len(self._data):
            raise self._fail("truncated 16-bit integer")
        (value,) = _INT16.unpack_from(self._data, self._pos)
        self._pos += 2
        return int(value)

    def int32(self) -> int:
        if self._pos + 4 > len(self._data):
            raise self._fail("truncated 32-bit integer")
        (value,) = _INT32.unpack_from(self._data, self._pos)
        self._pos += 4
        return int(value)

    def byte(self) -> str:
        if self._pos >= len(self._data):
            raise self._fail("truncated")
        value = chr(self._data[self._pos])
        self._pos += 1
        return value

    def raw(self, n: int) -> bytes:
        if n < 0 or self._pos + n > len(self._data):
            raise self._fail("length field exceeds the message")
        value = self._data[self._pos : self._pos + n]
        self._pos += n
        return value

    def cstring(self) -> str:
        end = self._data.find(b"\x00", self._pos)
        if end < 0:
            raise self._fail("string is missing its NUL terminator")
        data = self._data[self._pos : end]
        self._pos = end + 1
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            if not self._lenient:
                raise self._fail("text is not valid UTF-8") from exc
            if self.bad_text is None:
                self.bad_text = invalid_utf8_message(data, exc.start)
            return data.decode("utf-8", "replace")

    def checked(self, message: _M, type_byte: bytes) -> _M | InvalidEncoding:
        """``message``, read to its end, or InvalidEncoding if a string was not UTF-8."""
        self.end()
        if self.bad_text is not None:
            return InvalidEncoding(type_byte, self.bad_text)
        return message

    def rest(self) -> bytes:
        value = self._data[self._pos :]
        self._pos = len(self._data)
        return value

    def at_end(self) -> bool:
        return self._pos >= len(self._data)

    def end(self) -> None:
        if self._pos != len(self._data):
            raise self._fail("unexpected trailing bytes")


# ---------------------------------------------------------------------------------------
# Frontend message parsers (payload without the type byte and length)


def _parse_query(payload: bytes) -> Query | InvalidEncoding:
    """As PostgreSQL reads a Query: the SQL up to the first NUL, checked as UTF-8 (22021),
    then nothing may follow it (08P01); either way an ERROR, and the session goes on."""
    end = payload.find(b"\x00")
    if end < 0:
        return MalformedQuery(b"Q", "invalid string in message: the query lacks its NUL terminator")
    r = _Reader(payload[: end + 1], "Query", lenient=True)
    query = r.checked(Query(r.cstring()), b"Q")
    if isinstance(query, InvalidEncoding) or end + 1 == len(payload):
        return query
    return MalformedQuery(
        b"Q",
        "invalid message format: the query contains a NUL byte (0x00), which SQL text "
        "cannot contain; remove it",
    )


def _parse_terminate(payload: bytes) -> Terminate:
    _Reader(payload, "Terminate").end()
    return Terminate()


def _parse_sync(payload: bytes) -> Sync:
    _Reader(payload, "Sync").end()
    return Sync()


def _parse_flush(payload: bytes) -> Flush:
    _Reader(payload, "Flush").end()
    return Flush()


def _parse_parse(payload: bytes) -> Parse | InvalidEncoding:
    r = _Reader(payload, "Parse", lenient=True)
    name = r.cstring()
    query = r.cstring()
    count = r.int16()
    if count < 0:
        raise r._fail("negative parameter count")
    types = tuple(r.int32() & 0xFFFFFFFF for _ in range(count))
    return r.checked(Parse(name, query, types), b"P")


def _int16_list(r: _Reader) -> tuple[int, ...]:
    count = r.int16()
    if count < 0:
        raise r._fail("negative count")
    return tuple(r.int16() for _ in range(count))


def _parse_bind(payload: bytes) -> Bind | InvalidEncoding:
    r = _Reader(payload, "Bind", lenient=True)
    portal = r.cstring()
    statement = r.cstring()
    formats = _int16_list(r)
    count = r.int16()
    if count < 0:
        raise r._fail("negative parameter count")
    values: list[bytes | None] = []
    for _ in range(count):
        length = r.int32()
        values.append(None if length == -1 else r.raw(length))
    result_formats = _int16_list(r)
    return r.checked(Bind(portal, statement, formats, tuple(values), result_formats), b"B")


def _kind_and_name(payload: bytes, what: str) -> tuple[_Reader, str, str]:
    r = _Reader(payload, what, lenient=True)
    kind = r.byte()
    if kind not in ("S", "P"):
        raise r._fail(f"unknown target {kind!r} (expected 'S' or 'P')")
    return r, kind, r.cstring()


def _parse_describe(payload: bytes) -> Describe | InvalidEncoding:
    r, kind, name = _kind_and_name(payload, "Describe")
    return r.checked(Describe(kind, name), b"D")


def _parse_close(payload: bytes) -> Close | InvalidEncoding:
    r, kind, name = _kind_and_name(payload, "Close")
    return r.checked(Close(kind, name), b"C")


def _parse_execute(payload: bytes) -> Execute | InvalidEncoding:
    r = _Reader(payload, "Execute", lenient=True)
    portal = r.cstring()
    max_rows = r.int32()
    return r.checked(Execute(portal, max_rows), b"E")


def _parse_password(payload: bytes) -> PasswordMessage:
    r = _Reader(payload, "PasswordMessage")
    password = r.cstring()
    r.end()
    return PasswordMessage(password)


def _parse_sasl_initial(payload: bytes) -> SASLInitialResponse:
    r = _Reader(payload, "SASLInitialResponse")
    mechanism = r.cstring()
    length = r.int32()
    data = None if length == -1 else r.raw(length)
    r.end()
    return SASLInitialResponse(mechanism, data)


_Parser = Callable[[bytes], FrontendMessage]

_PARSERS: dict[int, _Parser] = {
    ord("Q"): _parse_query,
    ord("X"): _parse_terminate,
    ord("P"): _parse_parse,
    ord("B"): _parse_bind,
    ord("D"): _parse_describe,
    ord("E"): _parse_execute,
    ord("C"): _parse_close,
    ord("S"): _parse_sync,
    ord("H"): _parse_flush,
}
_GENERIC_TYPES = frozenset(b"dcfF")


def _parse_startup(packet: bytes) -> FrontendMessage:
    """``packet`` is the startup packet after its length field."""
    code = int(_INT32.unpack_from(packet, 0)[0])
    body = packet[4:]
    if code in (SSL_REQUEST_CODE, GSSENC_REQUEST_CODE):
        if body:
            raise ProtocolViolation("invalid SSLRequest/GSSENCRequest: unexpected trailing bytes")
        return SSLRequest() if code == SSL_REQUEST_CODE else GSSENCRequest()
    if code == CANCEL_REQUEST_CODE:
        if len(body) != 8:
            raise ProtocolViolation("invalid CancelRequest: expected exactly 16 bytes")
        pid = int(_INT32.unpack_from(body, 0)[0])
        secret = int(_UINT32.unpack_from(body, 4)[0])
        return CancelRequest(pid, secret)
    major, minor = code >> 16, code & 0xFFFF
    if major != 3:
        raise ProtocolViolation(
            f"unsupported frontend protocol {major}.{minor}: server supports 3.0"
        )
    if not body or body[-1] != 0:
        raise ProtocolViolation("invalid startup packet layout: expected terminator as last byte")
    r = _Reader(body[:-1], "startup")
    params: list[tuple[str, str]] = []
    while not r.at_end():
        name = r.cstring()
        if not name:
            raise ProtocolViolation("invalid startup packet layout: empty parameter name")
        params.append((name, r.cstring()))
    return StartupMessage(code, tuple(params))


# ---------------------------------------------------------------------------------------
# Decoder


class FrontendDecoder:
    """Incremental decoder of frontend messages.

    Starts in the startup phase (untyped packets) unless ``startup=False``; after a
    StartupMessage it switches to typed messages by itself. 'p' messages are decoded
    according to :attr:`auth_stage`, which the server sets before reading each one; use
    :meth:`next_message` (one at a time) when the stage may change between messages.
    """

    __slots__ = ("_buf", "_broken", "_max", "_startup", "auth_stage")

    def __init__(
        self, *, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE, startup: bool = True
    ) -> None:
        if max_message_size < 8:
            raise ValueError("max_message_size must be at least 8 bytes")
        self._buf = bytearray()
        self._max = max_message_size
        self._startup = startup
        self._broken: ProtocolViolation | None = None
        self.auth_stage = AuthStage.NONE

    @property
    def in_startup_phase(self) -> bool:
        return self._startup

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a message."""
        return len(self._buf)

    def append(self, data: bytes) -> None:
        """Buffer bytes without decoding them."""
        self._buf += data

    def feed(self, data: bytes) -> list[FrontendMessage]:
        """Buffer ``data`` and return every message that is now complete."""
        self._buf += data
        out: list[FrontendMessage] = []
        while (msg := self.next_message()) is not None:
            out.append(msg)
        return out

    def next_message(self) -> FrontendMessage | None:
        """Decode one complete message from the buffer, or None if more bytes are needed."""
        if self._broken is not None:
            raise self._broken
        try:
            return self._startup_packet() if self._startup else self._typed_message()
        except ProtocolViolation as exc:
            self._broken = exc
            raise

    def _startup_packet(self) -> FrontendMessage | None:
        buf = self._buf
        if len(buf) < 4:
            return None
        length = int(_INT32.unpack_from(buf, 0)[0])
        limit = min(self._max, MAX_STARTUP_PACKET_SIZE)
        if length < 8 or length > limit:
            raise ProtocolViolation(f"invalid length of startup packet: {length}")
        if len(buf) < length:
            return None
        packet = bytes(buf[4:length])
        del buf[:length]
        msg = _parse_startup(packet)
        if isinstance(msg, StartupMessage):
            self._startup = False
        return msg

    def _typed_message(self) -> FrontendMessage | None:
        buf = self._buf
        if len(buf) < 5:
            if buf and buf[0] not in _PARSERS and buf[0] not in _GENERIC_TYPES and buf[0] != 0x70:
                raise ProtocolViolation(f"invalid frontend message type {buf[0]}")
            return None
        type_byte = buf[0]
        length = int(_INT32.unpack_from(buf, 1)[0])
        if length < 4:
            raise ProtocolViolation(f"invalid message length {length}")
        if length > self._max:
            raise ProtocolViolation(
                f"message of {length} bytes exceeds the maximum of {self._max} bytes"
            )
        parser = _PARSERS.get(type_byte)
        if parser is None and type_byte not in _GENERIC_TYPES and type_byte != 0x70:
            raise ProtocolViolation(f"invalid frontend message type {type_byte}")
        end = length + 1
        if len(buf) < end:
            return None
        payload = bytes(buf[5:end])
        del buf[:end]
        if parser is not None:
            return parser(payload)
        if type_byte == 0x70:
            return self._auth_message(payload)
        return OtherMessage(bytes((type_byte,)), payload)

    def _auth_message(self, payload: bytes) -> FrontendMessage:
        stage = self.auth_stage
        if stage is AuthStage.PASSWORD:
            return _parse_password(payload)
        if stage is AuthStage.SASL_INITIAL:
            return _parse_sasl_initial(payload)
        if stage is AuthStage.SASL_CONTINUE:
            return SASLResponse(payload)
        raise ProtocolViolation("unexpected password message: no authentication in progress")


# ---------------------------------------------------------------------------------------
# Backend encoders


def _msg(type_byte: bytes, body: bytes) -> bytes:
    return type_byte + _INT32.pack(len(body) + 4) + body


def _cstr(text: str) -> bytes:
    data = text.encode("utf-8")
    if b"\x00" in data:
        # A NUL would cut the string short and desynchronise the client: replace it.
        data = data.replace(b"\x00", b"\\0")
    return data + b"\x00"


SSL_REFUSED = b"N"
"""The single byte answering SSLRequest and GSSENCRequest: not supported."""
SSL_ACCEPTED = b"S"
"""The single byte answering SSLRequest when TLS is configured: the handshake follows."""

AUTHENTICATION_OK = _msg(b"R", _INT32.pack(0))
PARSE_COMPLETE = _msg(b"1", b"")
BIND_COMPLETE = _msg(b"2", b"")
CLOSE_COMPLETE = _msg(b"3", b"")
NO_DATA = _msg(b"n", b"")
EMPTY_QUERY_RESPONSE = _msg(b"I", b"")
PORTAL_SUSPENDED = _msg(b"s", b"")
COPY_DONE = _msg(b"c", b"")
"""CopyDone: the end of a COPY ... TO STDOUT's data."""

_READY = {status: _msg(b"Z", status) for status in (b"I", b"T", b"E")}


def authentication_ok() -> bytes:
    return AUTHENTICATION_OK


def authentication_sasl(mechanisms: Iterable[str]) -> bytes:
    body = _INT32.pack(10) + b"".join(_cstr(m) for m in mechanisms) + b"\x00"
    return _msg(b"R", body)


def authentication_sasl_continue(data: bytes) -> bytes:
    return _msg(b"R", _INT32.pack(11) + data)


def authentication_sasl_final(data: bytes) -> bytes:
    return _msg(b"R", _INT32.pack(12) + data)


def parameter_status(name: str, value: str) -> bytes:
    return _msg(b"S", _cstr(name) + _cstr(value))


def backend_key_data(process_id: int, secret_key: int) -> bytes:
    return _msg(b"K", _INT32.pack(process_id) + _UINT32.pack(secret_key))


def negotiate_protocol_version(newest_minor: int, unrecognized: Sequence[str]) -> bytes:
    body = _INT32.pack(newest_minor) + _INT32.pack(len(unrecognized))
    return _msg(b"v", body + b"".join(_cstr(o) for o in unrecognized))


def ready_for_query(status: bytes) -> bytes:
    """``status`` is b'I' (idle), b'T' (in transaction) or b'E' (failed transaction)."""
    try:
        return _READY[status]
    except KeyError:
        raise ValueError(f"invalid transaction status {status!r}") from None


def row_description(
    columns: Iterable[tuple[str, int, int, int]], formats: Sequence[int] = ()
) -> bytes:
    """Columns as (name, type_oid, type_size, type_modifier); ``formats`` gives each
    column's format code (0 text, 1 binary), all text when empty."""
    parts: list[bytes] = []
    count = 0
    for name, type_oid, type_size, type_modifier in columns:
        fmt = formats[count] if formats else 0
        count += 1
        parts.append(_cstr(name))
        parts.append(struct.pack("!ihIhih", 0, 0, type_oid, type_size, type_modifier, fmt))
    return _msg(b"T", _INT16.pack(count) + b"".join(parts))


def data_row(values: Sequence[str | None]) -> bytes:
    """One row of text-format values; None is SQL NULL."""
    parts = [b""]
    pack = _INT32.pack
    for value in values:
        if value is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            data = value.encode("utf-8")
            parts.append(pack(len(data)))
            parts.append(data)
    parts[0] = b"D" + pack(sum(len(p) for p in parts) + 6) + _INT16.pack(len(values))
    return b"".join(parts)


RowEncoder = Callable[[tuple[str | None, ...]], bytes]


def data_row_bytes(values: Sequence[bytes | None]) -> bytes:
    """One row of already-encoded values (text or binary); None is SQL NULL."""
    parts = [b""]
    pack = _INT32.pack
    for value in values:
        if value is None:
            parts.append(b"\xff\xff\xff\xff")
        else:
            parts.append(pack(len(value)))
            parts.append(value)
    parts[0] = b"D" + pack(sum(len(p) for p in parts) + 6) + _INT16.pack(len(values))
    return b"".join(parts)


def command_complete(tag: str) -> bytes:
    return _msg(b"C", _cstr(tag))


def empty_query_response() -> bytes:
    return EMPTY_QUERY_RESPONSE


def _fields(
    severity: str,
    code: str,
    message: str,
    detail: str | None,
    hint: str | None,
    *,
    routine: str | None = None,
) -> bytes:
    parts = [b"S", _cstr(severity), b"V", _cstr(severity), b"C", _cstr(code), b"M", _cstr(message)]
    if detail is not None:
        parts += [b"D", _cstr(detail)]
    if hint is not None:
        parts += [b"H", _cstr(hint)]
    if routine is not None:
        parts += [b"R", _cstr(routine)]
    parts.append(b"\x00")
    return b"".join(parts)


def error_response(
    code: str,
    message: str,
    *,
    severity: str = "ERROR",
    detail: str | None = None,
    hint: str | None = None,
    routine: str | None = None,
) -> bytes:
    return _msg(b"E", _fields(severity, code, message, detail, hint, routine=routine))


def notice_response(
    message: str,
    *,
    severity: str = "NOTICE",
    code: str = "00000",
    detail: str | None = None,
    hint: str | None = None,
) -> bytes:
    return _msg(b"N", _fields(severity, code, message, detail, hint))


def parse_complete() -> bytes:
    return PARSE_COMPLETE


def bind_complete() -> bytes:
    return BIND_COMPLETE


def close_complete() -> bytes:
    return CLOSE_COMPLETE


def no_data() -> bytes:
    return NO_DATA


def portal_suspended() -> bytes:
    return PORTAL_SUSPENDED


def parameter_description(type_oids: Sequence[int]) -> bytes:
    body = _INT16.pack(len(type_oids)) + b"".join(_UINT32.pack(o) for o in type_oids)
    return _msg(b"t", body)


def copy_out_response(column_formats: Sequence[int], overall_format: int = 0) -> bytes:
    """CopyOutResponse: COPY ... TO STDOUT's data follows, in ``overall_format`` (0 text,
    1 binary), with the format code of each column (all 0 in text format)."""
    body = struct.pack("!bh", overall_format, len(column_formats))
    return _msg(b"H", body + b"".join(_INT16.pack(f) for f in column_formats))


def copy_data(data: bytes) -> bytes:
    """CopyData: a part of COPY's data (PostgreSQL sends one message per row)."""
    return _msg(b"d", data)


def copy_done() -> bytes:
    return COPY_DONE
