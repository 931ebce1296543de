"""The PostgreSQL v3 wire protocol: codec, SCRAM-SHA-256 and connection states (no I/O)."""

from proxy.protocol.codec import DEFAULT_MAX_MESSAGE_SIZE, FrontendDecoder, ProtocolViolation
from proxy.protocol.scram import (
    ScramAuthenticationFailed,
    ScramError,
    ScramExchange,
    ScramProtocolError,
    make_verifier,
    parse_verifier,
)
from proxy.protocol.states import ConnectionState, IllegalTransition, transition

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "ConnectionState",
    "FrontendDecoder",
    "IllegalTransition",
    "ProtocolViolation",
    "ScramAuthenticationFailed",
    "ScramError",
    "ScramExchange",
    "ScramProtocolError",
    "make_verifier",
    "parse_verifier",
    "transition",
]
