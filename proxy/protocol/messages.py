"""Frontend (client → server) messages of the PostgreSQL v3 protocol, as frozen values.

The decoder in :mod:`proxy.protocol.codec` turns bytes into these; nothing here does I/O.
Backend messages are produced directly as bytes by the encoder functions in the codec.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import ClassVar

PROTOCOL_3_0 = 3 << 16
SSL_REQUEST_CODE = 80877103
GSSENC_REQUEST_CODE = 80877104
CANCEL_REQUEST_CODE = 80877102


class AuthStage(Enum):
    """How the decoder interprets a 'p' message, which depends on the authentication step."""

    NONE = "none"
    PASSWORD = "cleartext"  # noqa: S105 (a stage name, not a secret)
    SASL_INITIAL = "sasl-initial"
    SASL_CONTINUE = "sasl-continue"


# --- startup phase (untyped, length-prefixed packets) ---


@dataclass(frozen=True, slots=True)
class SSLRequest:
    """The client asks for TLS; the server answers a single byte."""


@dataclass(frozen=True, slots=True)
class GSSENCRequest:
    """The client asks for GSSAPI encryption; the server answers a single byte."""


@dataclass(frozen=True, slots=True)
class CancelRequest:
    """Sent on a fresh connection to cancel the statement running on another one."""

    process_id: int
    secret_key: int


@dataclass(frozen=True, slots=True)
class StartupMessage:
    """The first real packet: protocol version and the connection parameters."""

    protocol: int
    parameters: tuple[tuple[str, str], ...]

    @property
    def major(self) -> int:
        return self.protocol >> 16

    @property
    def minor(self) -> int:
        return self.protocol & 0xFFFF

    @property
    def params(self) -> dict[str, str]:
        """The parameters as a dict (a repeated name keeps its last value)."""
        return dict(self.parameters)


# --- authentication ('p', interpreted according to AuthStage) ---


@dataclass(frozen=True, slots=True)
class PasswordMessage:
    password: str


@dataclass(frozen=True, slots=True)
class SASLInitialResponse:
    mechanism: str
    data: bytes | None


@dataclass(frozen=True, slots=True)
class SASLResponse:
    data: bytes


# --- regular phase ---


@dataclass(frozen=True, slots=True)
class Query:
    sql: str


@dataclass(frozen=True, slots=True)
class Terminate:
    pass


@dataclass(frozen=True, slots=True)
class Parse:
    statement: str
    query: str
    parameter_types: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Bind:
    portal: str
    statement: str
    parameter_formats: tuple[int, ...]
    parameters: tuple[bytes | None, ...]
    result_formats: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Describe:
    kind: str  # 'S' (statement) or 'P' (portal)
    name: str


@dataclass(frozen=True, slots=True)
class Execute:
    portal: str
    max_rows: int


@dataclass(frozen=True, slots=True)
class Close:
    kind: str  # 'S' (statement) or 'P' (portal)
    name: str


@dataclass(frozen=True, slots=True)
class Sync:
    pass


@dataclass(frozen=True, slots=True)
class Flush:
    pass


@dataclass(frozen=True, slots=True)
class OtherMessage:
    """A known but uninterpreted message (CopyData 'd', CopyDone 'c', CopyFail 'f',
    FunctionCall 'F'): the type byte and the raw payload."""

    type: bytes
    payload: bytes


@dataclass(frozen=True, slots=True)
class InvalidEncoding:
    """A well-framed Query, Parse, Bind, Describe, Execute or Close whose text (its SQL or
    a statement or portal name) is not valid UTF-8, in place of that message. PostgreSQL
    answers such a message with an ERROR and the session goes on; so does dpproxy."""

    sqlstate: ClassVar[str] = "22021"  # character_not_in_repertoire

    type: bytes
    """The type byte of the message that could not be read (b"Q", b"P", ...)."""
    message: str
    """PostgreSQL's words: 'invalid byte sequence for encoding "UTF8": 0xff'."""


@dataclass(frozen=True, slots=True)
class MalformedQuery(InvalidEncoding):
    """A well-framed Query whose payload is not one NUL-terminated string: a NUL inside
    the SQL (bytes after the first NUL), or no NUL at its end. PostgreSQL answers it with
    an ERROR (08P01, "invalid message format") and the session goes on, since the
    message's length frames it; so does dpproxy. It is answered as InvalidEncoding is
    (an ERROR, then ReadyForQuery), hence the subclass."""

    sqlstate: ClassVar[str] = "08P01"  # protocol_violation


StartupPacket = SSLRequest | GSSENCRequest | CancelRequest | StartupMessage
AuthMessage = PasswordMessage | SASLInitialResponse | SASLResponse
ExtendedMessage = Parse | Bind | Describe | Execute | Close | Flush
FrontendMessage = (
    StartupPacket
    | AuthMessage
    | Query
    | Terminate
    | ExtendedMessage
    | Sync
    | OtherMessage
    | InvalidEncoding
    | MalformedQuery
)
