"""The states of one client connection and the transitions allowed between them."""

from __future__ import annotations

from enum import Enum


class ConnectionState(Enum):
    AWAITING_STARTUP = "awaiting startup"
    """Before the StartupMessage (SSLRequest/GSSENCRequest may come first)."""
    AUTHENTICATING_SASL_FIRST = "awaiting SASLInitialResponse"
    AUTHENTICATING_SASL_FINAL = "awaiting SASLResponse"
    READY = "ready"
    """Authenticated, session open: reading simple and extended protocol messages."""
    IN_EXTENDED_ERROR = "skipping until Sync"
    """An extended-protocol message failed: every message up to Sync is discarded."""
    CLOSED = "closed"


class IllegalTransition(Exception):
    """A bug or a hostile client drove the connection into a transition it must not make."""

    def __init__(self, current: ConnectionState, target: ConnectionState) -> None:
        super().__init__(f"illegal connection state transition: {current.value} -> {target.value}")
        self.current = current
        self.target = target


_S = ConnectionState
ALLOWED: dict[ConnectionState, frozenset[ConnectionState]] = {
    _S.AWAITING_STARTUP: frozenset({_S.AUTHENTICATING_SASL_FIRST, _S.CLOSED}),
    _S.AUTHENTICATING_SASL_FIRST: frozenset({_S.AUTHENTICATING_SASL_FINAL, _S.CLOSED}),
    _S.AUTHENTICATING_SASL_FINAL: frozenset({_S.READY, _S.CLOSED}),
    _S.READY: frozenset({_S.IN_EXTENDED_ERROR, _S.CLOSED}),
    _S.IN_EXTENDED_ERROR: frozenset({_S.READY, _S.CLOSED}),
    _S.CLOSED: frozenset(),
}


def transition(current: ConnectionState, target: ConnectionState) -> ConnectionState:
    """Return ``target`` if the move from ``current`` is allowed, else raise."""
    if target not in ALLOWED[current]:
        raise IllegalTransition(current, target)
    return target
