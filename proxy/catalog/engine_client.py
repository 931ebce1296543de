"""The server's side of one catalog engine process (proxy.catalog.engine_process): starts
it, sends it queries and cancels, waits for their replies, and ends it if a query does not
stop in time.

A query ends when its reply comes; else, past TIMEOUT_SECONDS + KILL_GRACE_SECONDS (the
engine interrupts it after TIMEOUT_SECONDS), or KILL_GRACE_SECONDS after it was
cancelled, the process is killed: a query DuckDB cannot interrupt (one function call
that runs for a minute) holds a core for no longer. Every query still waiting then fails
with CatalogEngineLost, and the next one starts a new process (CatalogDatabase).
"""

from __future__ import annotations

import io
import itertools
import logging
import os
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path

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
    CatalogQueryTooLong,
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
MAX_REPLY_BYTES = 160 * 1024 * 1024
_PROJECT = str(Path(__file__).resolve().parents[2])  # where the proxy package is


class _Pending:
    """One query sent: its reply, once come; whether it was cancelled."""

    def __init__(self, query_id: int) -> None:
        self.id = query_id
        self.reply: QueryReply | None = None
        self.lost: str | None = None  # why the engine ended before replying
        self.cancel_requested = False
        self.signal = threading.Event()  # a reply, a loss or a cancel came

    def fire(self) -> None:  # QueryStop's target: from any thread, never blocks
        self.cancel_requested = True
        self.signal.set()


class EngineProcess:
    def __init__(self, setup: EngineSetup) -> None:
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
        self._process = subprocess.Popen(  # noqa: S603 (our own module, no shell)
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=environment,
            cwd=_PROJECT,  # -m looks there first: not in the server's directory
            bufsize=0,
        )
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
        self._lost: str | None = None
        self._killed_for: str | None = None
        self._killed_because = ""
        self._send(encode(setup))
        self._reader = threading.Thread(
            target=self._read, name="dpproxy-catalog-engine", daemon=True
        )
        self._reader.start()

    @property
    def lost(self) -> bool:
        return self._lost is not None

    @property
    def pid(self) -> int:
        return self._process.pid

    def wait_ready(self, seconds: float = START_SECONDS) -> None:
        """Returns once the engine has built the catalog; raises CatalogEngineLost if it
        ended before, or did not within ``seconds`` (then it is killed)."""
        deadline = time.monotonic() + seconds
        while not self._ready.wait(0.05):
            if self._lost is not None:
                raise CatalogEngineLost(f"the catalog engine did not start: {self._lost}")
            if time.monotonic() > deadline:
                self.kill("start", "it did not start in time")
                raise CatalogEngineLost("the catalog engine did not start in time")

    def run(self, sql: str, zone: str, stop: QueryStop) -> QueryOutput:
        """The output of ``sql``; raises the CatalogQueryFailed the engine replied,
        CatalogQueryCanceled once ``stop`` was cancelled and the engine had to be killed
        for it, CatalogQueryTooLong likewise past the timeout, and CatalogEngineLost if
        the engine ended for another reason meanwhile."""
        pending = _Pending(next(self._ids))
        with self._lock:
            if self._lost is not None:
                raise CatalogEngineLost(_lost_message(self._lost))
            self._pending[pending.id] = pending
        self._send_or_end(encode(RunQuery(pending.id, sql, zone)))
        stop.attach(pending)
        try:
            self._wait(pending)
        finally:
            stop.attach(None)
        reply = pending.reply
        if reply is None:
            if self._killed_for == f"query {pending.id}":
                if pending.cancel_requested:
                    raise CatalogQueryCanceled("canceled on request")
                raise CatalogQueryTooLong(f"stopped after {TIMEOUT_SECONDS:g} s")
            raise CatalogEngineLost(_lost_message(pending.lost or "it ended"))
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
        logger.warning("catalog engine killed: %s", reason)
        self._process.kill()

    def close(self) -> None:
        """End the process: it ends when the pipe it reads closes (killed if it does not
        within a few seconds)."""
        with self._lock:
            if self._killed_for is None:
                self._killed_for = "close"
                self._killed_because = "the catalog database was closed"
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
            if self._killed_for is None:
                logger.warning("catalog engine ended (exit status %s): %s", code, reason)
                self._lost = f"{reason}, exit status {code}: it may have run out of memory"
            else:
                self._lost = self._killed_because
            pending = list(self._pending.values())
            self._pending.clear()
        for query in pending:
            query.lost = self._lost
            query.signal.set()


def _lost_message(reason: str) -> str:
    return f"dpproxy's catalog engine ended while the query ran ({reason}); it starts again"
