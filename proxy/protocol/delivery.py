"""Whether the client of the statement being run is still there, and whether its answer
reached the connection: what the audit log must know to say what was released.

The server (``proxy.server``) keeps one :class:`ClientLink` per connection: it is told
when the client goes away (the end of its stream, or a reset connection, noticed even
while a statement runs), and it reports whether an answer on record was written to the
client's socket. The query pipeline reads the link of the statement it serves through
:func:`current` (set by the server in the connection's task): a client gone before its
answer is recorded gets no answer and the audit says so; an answer recorded as given whose
write then fails is logged for the admin (the audit log is append-only).

A client whose end of the stream is closed is taken as gone, as PostgreSQL's
``client_connection_check_interval`` takes it: no PostgreSQL client closes its sending
side and still waits for an answer. The end of the stream can sit behind data the client
sent and the server has not read yet (its reading paused while a statement runs): the
server gives the link a probe, a look at the connection that reads nothing, which the
link asks whenever :attr:`ClientLink.gone` is read, and the server reads it every so
often while a statement runs. No I/O here: state and callbacks only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextvars import ContextVar

logger = logging.getLogger(__name__)

#: Why a statement was stopped when its client went away ("canceled due to …", as the
#: reasons of proxy.backends.CancelToken).
CLIENT_DISCONNECT = "client disconnect"

_CURRENT: ContextVar[ClientLink | None] = ContextVar("dpproxy_client_link", default=None)


class ClientLink:
    """One connection's client as the statements it sends see it."""

    def __init__(self) -> None:
        self._gone = False
        self._watchers: dict[int, Callable[[], None]] = {}
        self._next = 0
        self._pending: Callable[[bool], None] | None = None
        self._probe: Callable[[], bool] | None = None

    def probe_with(self, probe: Callable[[], bool] | None) -> None:
        """``probe``: whether the client closed its end of the connection, or the
        connection was reset, as the server sees it now without reading from it (True
        also where it cannot tell). None: only what the server is told (``lost``)."""
        self._probe = probe

    @property
    def gone(self) -> bool:
        """True once the client closed its end of the connection, or it was reset. While
        it is not known to be gone, reading this asks the probe (``probe_with``), and a
        client the probe finds gone is ``lost`` then."""
        if not self._gone and self._probe is not None and self._probe():
            self.lost()
        return self._gone

    def lost(self) -> None:
        """The server saw the client go (end of stream, or the connection lost); calls
        each ``when_gone`` callback once."""
        if self._gone:
            return
        self._gone = True
        watchers, self._watchers = list(self._watchers.values()), {}
        for watcher in watchers:
            try:
                watcher()
            except Exception:  # one failing watcher must not keep the others from running
                logger.exception("a callback for a client that went away failed")

    def when_gone(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` when the client goes (at once if it is gone already).
        Returns what stops watching."""
        if self._gone:
            callback()
            return _nothing
        key = self._next
        self._next += 1
        self._watchers[key] = callback

        def stop() -> None:
            self._watchers.pop(key, None)

        return stop

    def expect_answer(self, written: Callable[[bool], None]) -> None:
        """The statement's answer is on record as given: the server is to write it to the
        client's connection at once and call ``written`` with whether it could."""
        self.answer_written(False)  # one left behind was never written
        self._pending = written

    @property
    def answer_pending(self) -> bool:
        """An answer on record waits to be written (``expect_answer``)."""
        return self._pending is not None

    def answer_written(self, written: bool) -> None:
        """The server wrote the answer on record to the client's connection (``written``),
        or could not, or sent something else instead (an error); nothing if none waits."""
        pending, self._pending = self._pending, None
        if pending is None:
            return
        try:
            pending(written)
        except Exception:
            logger.exception("reporting whether an answer was written failed")


def _nothing() -> None:
    return None


def current() -> ClientLink | None:
    """The link of the connection whose statement this task serves (None outside one)."""
    return _CURRENT.get()


def serve_in_this_task(link: ClientLink) -> None:
    """Make ``link`` the one :func:`current` returns in the calling task (the server's
    task of one connection; each task has a context of its own)."""
    _CURRENT.set(link)
