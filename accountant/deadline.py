"""The client-side deadline of operations on the PostgreSQL state store.

Apart from ``accountant.postgres`` because it is machinery of its own (a thread, a clock,
a duplicated socket) that the store's SQL never needs to know about.

PostgreSQL's own timeouts (``lock_timeout``, ``statement_timeout``) need a server that
answers, and TCP keepalives do not notice a peer that acknowledges packets but never
replies (a hung server, a stalled proxy or network path). Every operation (one
transaction, with the connection it may open first) therefore also has a deadline on this
side, the timeout plus a grace period (:func:`operation_seconds`): when it passes, the
:class:`Watchdog` thread shuts the socket down, the waiting call fails at once, the
connection is discarded (the next operation opens a new one) and the caller gets a
StateStoreError. Operations queued behind one the server did not answer fail at once
(:data:`FAIL_FAST_SECONDS`) instead of each waiting as long again.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import psycopg
from psycopg import errors as pg_errors

from accountant.errors import StateStoreError

#: The grace period an operation gets beyond the timeout (a share of it, at least
#: MIN_GRACE_SECONDS): enough for the statements after a lock wait that ran almost to the
#: server's lock_timeout, so that a busy store ends with PostgreSQL's own 55P03.
GRACE_SHARE = 0.1
MIN_GRACE_SECONDS = 1.0


#: After an operation the server did not answer in time, operations that start within this
#: many seconds (those that queued behind it) fail at once instead of waiting as long again
#: each; the first one after it tries the server again.
FAIL_FAST_SECONDS = 1.0


def operation_seconds(timeout: float) -> float:
    """The longest an operation on the state database may take, client side: ``timeout``
    (the lock timeout) plus a grace period."""
    return timeout + max(MIN_GRACE_SECONDS, timeout * GRACE_SHARE)


class Watchdog:
    """Cuts the connection of an operation that outlives its deadline.

    One daemon thread per database, asleep unless an operation is running. It holds its
    own duplicate of the connection's socket (so the descriptor it shuts down can never be
    one the process reused for something else) and shuts it down when the deadline
    passes: libpq's wait returns at once with an error, and psycopg marks the connection
    broken. Shutting a socket down does not free its descriptor, so this is safe while
    the other thread is using it."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._socket: socket.socket | None = None
        self._deadline: float | None = None
        self._fired = False
        self._stopped = False
        self._thread: threading.Thread | None = None

    def watch(self, conn: psycopg.Connection[Any] | None) -> None:
        """Watch ``conn`` (None: nothing); the previous one's duplicate is closed."""
        duplicate = None
        if conn is not None:
            duplicate = socket.socket(fileno=os.dup(conn.pgconn.socket))
        with self._cond:
            previous, self._socket = self._socket, duplicate
        if previous is not None:
            previous.close()

    def arm(self, deadline: float) -> None:
        with self._cond:
            self._deadline = deadline
            self._fired = False
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="dpproxy-state-deadline", daemon=True
                )
                self._thread.start()
            self._cond.notify()

    def disarm(self) -> bool:
        """Stop watching the clock; True if the deadline passed (the socket was shut)."""
        with self._cond:
            self._deadline = None
            return self._fired

    def stop(self) -> None:
        self.watch(None)
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while not self._stopped:
                if self._deadline is None:
                    self._cond.wait()
                    continue
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                self._deadline = None
                self._fired = True
                if self._socket is not None:
                    with suppress(OSError):
                        self._socket.shutdown(socket.SHUT_RDWR)


class Deadline:
    """The deadline of one database's operations (``name``: the database, for messages).

    ``enabled=False`` (a reader for admin commands that an interrupt stops): operations
    take as long as they need. Not for concurrent use, like the database it serves."""

    def __init__(self, name: str, timeout: float, *, enabled: bool) -> None:
        self._name = name
        self._timeout = timeout
        self._enabled = enabled
        self._watchdog = Watchdog()
        #: When the running operation must end (time.monotonic()), None between operations.
        self._ends_at: float | None = None
        #: When the last operation ended unanswered (cut, or its connection timed out);
        #: None once one was answered.
        self._unanswered_at: float | None = None

    @property
    def limit(self) -> float:
        """The longest an operation may take (:func:`operation_seconds`)."""
        return operation_seconds(self._timeout)

    @contextmanager
    def operation(self, discard: Callable[[], None]) -> Iterator[None]:
        """Run one operation under the deadline; ``discard`` drops a connection it cut."""
        if self._ends_at is not None or not self._enabled:  # (already / never)
            yield
            return
        limit = operation_seconds(self._timeout)
        now = time.monotonic()
        if self._unanswered_at is not None and now - self._unanswered_at < FAIL_FAST_SECONDS:
            raise StateStoreError(
                self._name,
                f"PostgreSQL did not answer the previous request within {limit:g} s, a moment "
                "ago; this one was not sent",
                "check the server and the network between them; dpproxy tries again at its "
                "next request",
            )
        self._ends_at = now + limit
        self._watchdog.arm(self._ends_at)
        timed_out = False  # connecting took longer than its connect_timeout
        try:
            yield
        except StateStoreError as error:
            timed_out = isinstance(error.__cause__, pg_errors.ConnectionTimeout)
            raise
        finally:
            cut = self._watchdog.disarm()
            if cut:
                discard()  # cut (even just after it answered): never used again
            self._unanswered_at = time.monotonic() if cut or timed_out else None
            self._ends_at = None

    def cut_error(self) -> StateStoreError | None:
        """The error of an operation whose connection the deadline cut (None: not cut)."""
        if self._watchdog.disarm():
            limit = operation_seconds(self._timeout)
            return StateStoreError(
                self._name,
                f"PostgreSQL did not answer within {limit:g} s (the server, or the network "
                "path to it, hangs), so dpproxy dropped the connection",
                "check the server and the network between them; dpproxy opens a new "
                "connection at its next request",
            )
        return None

    def seconds_left(self) -> float:
        """What is left of the running operation's deadline."""
        if self._ends_at is None:
            return operation_seconds(self._timeout)
        return self._ends_at - time.monotonic()

    def watch(self, conn: psycopg.Connection[Any] | None) -> None:
        """The connection the watchdog cuts (None: none)."""
        self._watchdog.watch(conn)

    def stop(self) -> None:
        """End the watchdog's thread (the database is closed)."""
        self._watchdog.stop()
