"""The server's side of one catalog engine process (proxy.catalog.engine_process): starts
it, sends it queries and cancels, waits for their replies, and ends it if a query does not
stop in time.

The engine is started with SIGINT and SIGTERM blocked (it unblocks them once it ignores
them: a Ctrl-C or a `kill -TERM` of the server's process group never ends it), its setup
is written by a thread of its own while its replies are read, and it must be ready within
START_SECONDS, else it is killed: a failure to start is a CatalogEngineDidNotStart saying
why, and one line of the server's log (the engine's own reason when it gives one).

A query ends when its reply comes; else, past TIMEOUT_SECONDS + KILL_GRACE_SECONDS (the
engine interrupts it after TIMEOUT_SECONDS), or KILL_GRACE_SECONDS after it was
cancelled, the process is killed: a query DuckDB cannot interrupt (one function call
that runs for a minute) holds a core for no longer. Every query still waiting then fails
with CatalogEngineLost (EngineLostForAnother: it did nothing wrong, and may be sent again
to the new engine), and the next one starts a new process (CatalogDatabase).
"""

from __future__ import annotations

import io
import itertools
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from proxy.catalog.engine_process import IGNORED_SIGNALS, MAX_ANSWER_BYTES, START_FAILED
from proxy.catalog.messages import (
    CancelQuery,
    EngineSetup,
    FrameTooLarge,
    QueryReply,
    Ready,
    RunQuery,
    encode,
    read_frame,
    write_frame,
)
from proxy.catalog.outputs import (
    TIMEOUT_SECONDS,
    CatalogEngineLost,
    CatalogQueryCanceled,
    CatalogQueryTimedOut,
    QueryOutput,
)
from proxy.catalog.stops import QueryStop

logger = logging.getLogger("dpproxy.catalog")

#: How long a query may go on once interrupted (by the timeout, or a cancel) before the
#: process is killed.
KILL_GRACE_SECONDS = 2.0
#: How long the engine may take to start and build the catalog.
START_SECONDS = 120.0
#: The longest reply read (the engine refuses longer answers itself).
MAX_REPLY_BYTES = MAX_ANSWER_BYTES
_PROJECT = str(Path(__file__).resolve().parents[2])  # where the proxy package is


class CatalogEngineDidNotStart(CatalogEngineLost):
    """The engine ended, or was killed, before it had built the catalog."""


class EngineLostForAnother(CatalogEngineLost):
    """The engine ended for a reason that is not this query's: killed because another
    query would not stop, or ended before this query was sent to it. The query did nothing
    wrong, and may be sent again to a new engine (catalog queries read nothing and cost
    nothing); not more than once, so that no query is sent again and again."""


class _Pending:
    """One query sent: its reply, once come; whether it was cancelled."""

    def __init__(self, query_id: int) -> None:
        self.id = query_id
        self.reply: QueryReply | None = None
        self.lost: str | None = None  # why the engine ended before replying
        self.cancel_requested = False
        self.signal = threading.Event()  # a reply, a loss or a cancel came
        self.sent = time.monotonic()

    def fire(self) -> None:  # QueryStop's target: from any thread, never blocks
        self.cancel_requested = True
        self.signal.set()


class EngineProcess:
    def __init__(self, setup: EngineSetup, *, start_seconds: float = START_SECONDS) -> None:
        """Starts the process and returns (wait_ready: once it has built the catalog); it
        is killed if it is not ready within ``start_seconds``."""
        environment = {
            **os.environ,
            # The same proxy package as the server's, wherever it was imported from.
            "PYTHONPATH": os.pathsep.join(
                p for p in (_PROJECT, os.environ.get("PYTHONPATH", "")) if p
            ),
            "OPENBLAS_NUM_THREADS": "1",  # NumPy's, which the engine imports
            "OMP_NUM_THREADS": "1",
        }
        command = [sys.executable, "-m", "proxy.catalog.engine_process"]
        # Blocked in this thread (whose mask the process inherits) while it starts.
        unblocked = signal.pthread_sigmask(signal.SIG_BLOCK, IGNORED_SIGNALS)
        try:
            self._process = subprocess.Popen(  # noqa: S603 (our own module, no shell)
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=environment,
                cwd=_PROJECT,  # -m looks there first: not in the server's directory
                bufsize=0,
            )
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
        if self._process.stdin is None or self._process.stdout is None:
            raise RuntimeError("the catalog engine's pipes were not made")
        self._requests = io.FileIO(self._process.stdin.fileno(), "wb", closefd=False)
        self._replies = io.FileIO(self._process.stdout.fileno(), "rb", closefd=False)
        self._lock = threading.Lock()  # the pending queries, and why the engine ended
        self._writing = threading.Lock()  # the requests' pipe, and whether it is closed
        self._closed = False
        self._pending: dict[int, _Pending] = {}
        self._ids = itertools.count(1)
        self._ready = threading.Event()
        self._start_deadline = time.monotonic() + start_seconds
        self._start_seconds = start_seconds
        self._start_failure: str | None = None  # why the engine could not start, if it said
        self._lost: str | None = None
        self._killed_for: str | None = None
        self._killed_because = ""
        self._killed_at = 0.0  # time.monotonic() of the kill
        self._reader = threading.Thread(
            target=self._read, name="dpproxy-catalog-engine", daemon=True
        )
        self._reader.start()
        # Written meanwhile: the setup is larger than a pipe holds, and the engine may not
        # read it (wait_ready kills it then).
        threading.Thread(
            target=self._send_setup,
            args=(encode(setup),),
            name="dpproxy-catalog-engine-setup",
            daemon=True,
        ).start()

    @property
    def lost(self) -> bool:
        return self._lost is not None

    @property
    def pid(self) -> int:
        return self._process.pid

    def wait_ready(self) -> None:
        """Returns once the engine has built the catalog; raises CatalogEngineDidNotStart
        if it ended before, or was not ready within its start_seconds (then it is
        killed)."""
        while not self._ready.wait(0.05):
            if self._lost is not None:
                raise CatalogEngineDidNotStart(f"the catalog engine did not start: {self._lost}")
            if time.monotonic() > self._start_deadline:
                self.kill("start", f"it did not start within {self._start_seconds:g} s")
                self._reader.join(timeout=5)  # it fails the engine: _lost says why
                raise CatalogEngineDidNotStart(
                    f"the catalog engine did not start: {self._lost or 'not in time'}"
                )

    def run(self, sql: str, zone: str, stop: QueryStop) -> QueryOutput:
        """The output of ``sql``; raises the CatalogQueryFailed the engine replied,
        CatalogQueryCanceled once ``stop`` was cancelled and the engine had to be killed
        for it, CatalogQueryTimedOut likewise past the timeout, and CatalogEngineLost if
        the engine ended for another reason meanwhile (EngineLostForAnother if that reason
        is not this query's)."""
        pending = _Pending(next(self._ids))
        with self._lock:
            if self._lost is not None:  # not sent
                raise EngineLostForAnother(_lost_message(self._lost))
            self._pending[pending.id] = pending
        self._send_or_end(encode(RunQuery(pending.id, sql, zone)))
        stop.attach(pending)
        try:
            self._wait(pending)
        finally:
            stop.attach(None)
        reply = pending.reply
        if reply is None:
            culprit = self._killed_for
            if culprit == f"query {pending.id}":
                if pending.cancel_requested:
                    raise CatalogQueryCanceled("canceled on request")
                raise CatalogQueryTimedOut(f"stopped after {TIMEOUT_SECONDS:g} s")
            lost = _lost_message(pending.lost or "it ended")
            if culprit is not None and culprit.startswith("query "):
                # Killed for another query. This one did nothing wrong, unless it too had
                # run past its time (its interrupt did not stop it either) or was
                # cancelled and had not stopped: then it is not sent again.
                if pending.cancel_requested:
                    raise CatalogQueryCanceled("canceled on request")
                if self._killed_at - pending.sent >= TIMEOUT_SECONDS:  # when it was killed
                    raise CatalogQueryTimedOut(f"stopped after {TIMEOUT_SECONDS:g} s")
                raise EngineLostForAnother(lost)
            raise CatalogEngineLost(lost)
        if reply.error is not None:
            raise reply.error
        if reply.output is None:
            raise CatalogEngineLost("the catalog engine replied nothing")
        return reply.output

    def _wait(self, pending: _Pending) -> None:
        deadline = time.monotonic() + TIMEOUT_SECONDS + KILL_GRACE_SECONDS
        cancel_sent = False
        while True:
            pending.signal.clear()
            if pending.reply is not None or pending.lost is not None:
                return
            now = time.monotonic()
            if pending.cancel_requested and not cancel_sent:
                cancel_sent = True
                deadline = min(deadline, now + KILL_GRACE_SECONDS)
                self._send_or_end(encode(CancelQuery(pending.id)))
            if now >= deadline:
                self.kill(f"query {pending.id}", "a catalog query did not stop when interrupted")
                while pending.reply is None and pending.lost is None:
                    pending.signal.wait(0.05)
                    pending.signal.clear()
                return
            pending.signal.wait(deadline - now)

    def kill(self, culprit: str, reason: str) -> None:
        """End the process (its reader then fails the pending queries)."""
        with self._lock:
            if self._killed_for is None:
                self._killed_for = culprit
                self._killed_because = reason
                self._killed_at = time.monotonic()
        logger.warning("catalog engine killed: %s", reason)
        self._process.kill()

    def close(self) -> None:
        """End the process: it ends when the pipe it reads closes (killed if it does not
        within a few seconds, or at once if it is not ready: its setup may be being
        written, and would hold the pipe)."""
        with self._lock:
            if self._killed_for is None:
                self._killed_for = "close"
                self._killed_because = "the catalog database was closed"
        if not self._ready.is_set():
            self._process.kill()
        self._close_requests()
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
        self._reader.join(timeout=5)

    def _send(self, frame: bytes) -> None:
        with self._writing:
            if self._closed:
                raise BrokenPipeError("the catalog engine's pipe is closed")
            write_frame(self._requests, frame)

    def _close_requests(self) -> None:
        """Close the requests' pipe (the engine then ends), never while it is written."""
        with self._writing:
            if not self._closed and self._process.stdin is not None:
                self._closed = True
                self._process.stdin.close()

    def _send_setup(self, frame: bytes) -> None:
        """Write the setup (the setup's thread); if the pipe is broken, the engine has
        ended or is ending: make sure it does (its reader then says why)."""
        try:
            self._send(frame)
        except OSError:
            self._process.kill()

    def _send_or_end(self, frame: bytes) -> None:
        """Send a frame; if the pipe is broken, the engine is ending: make sure it does
        (its reader then fails the pending queries)."""
        try:
            self._send(frame)
        except OSError as error:
            self.kill("pipe", f"the catalog engine's pipe broke ({error})")

    def _read(self) -> None:
        """Replies to the pending queries, until the process ends: then they fail."""
        reason = "it ended"
        try:
            while True:
                message = read_frame(self._replies, MAX_REPLY_BYTES)
                if message is None:
                    break
                if isinstance(message, Ready):
                    self._ready.set()
                elif isinstance(message, QueryReply) and message.id == START_FAILED:
                    self._start_failure = str(message.error)  # the engine then ends
                elif isinstance(message, QueryReply):
                    with self._lock:
                        pending = self._pending.pop(message.id, None)
                    if pending is not None:
                        pending.reply = message
                        pending.signal.set()
                else:
                    reason = "it sent a message it should not have"
                    break
        except (OSError, EOFError, FrameTooLarge, pickle.UnpicklingError) as error:
            reason = f"its replies could not be read ({error})"
        finally:
            self._end(reason)

    def _end(self, reason: str) -> None:
        try:
            code = self._process.wait(timeout=1)
        except subprocess.TimeoutExpired:  # its replies could not be read, but it runs
            self._process.kill()
            code = self._process.wait()
        self._close_requests()
        if self._process.stdout is not None:
            self._process.stdout.close()  # read by this thread (the reader) alone
        with self._lock:
            if self._killed_for is not None:
                self._lost = self._killed_because
            elif not self._ready.is_set():
                self._lost = self._start_failure or f"{_status(code)} before it was ready"
                logger.warning("catalog engine did not start: %s", self._lost)
            else:
                logger.warning("catalog engine ended (exit status %s): %s", code, reason)
                self._lost = f"{reason}, exit status {code}: it may have run out of memory"
            pending = list(self._pending.values())
            self._pending.clear()
        for query in pending:
            query.lost = self._lost
            query.signal.set()


def _status(code: int) -> str:
    if code < 0:
        try:
            return f"it was killed ({signal.Signals(-code).name})"
        except ValueError:
            return f"it was killed (signal {-code})"
    return f"it ended (exit status {code})"


def _lost_message(reason: str) -> str:
    return f"dpproxy's catalog engine ended while the query ran ({reason}); it starts again"
