"""The catalog engine's process: ``python -m proxy.catalog.engine_process``, started by
the server (proxy.catalog.engine_client) and ended when it closes the pipe.

DuckDB makes the strings and lists of its functions (repeat('x', 1000000000),
range(300000000), replace() of replace()...) outside the memory_limit it enforces on its
buffers; in the server's process, one catalog query could so take gigabytes and a core
for a minute. Here it cannot: the process may map at most EngineSetup.memory_bytes for its
data (RLIMIT_DATA), past which DuckDB's allocations fail with its out-of-memory error
(and Python's with MemoryError), answered as such; and the server ends the process if a
query does not stop when interrupted.

Reads frames (proxy.catalog.messages) on its standard input: an EngineSetup, then
RunQuery and CancelQuery; writes Ready, then a QueryReply for each RunQuery, on what was
its standard output (which becomes its standard error: nothing else is ever written in
the frames). Queries run on threads of their own, as many at a time as the server sends.
"""

from __future__ import annotations

import io
import os
import pickle
import resource
import signal
import sys
import threading

from proxy.catalog.datetimes import session_zone
from proxy.catalog.engine import CatalogEngine
from proxy.catalog.messages import (
    CancelQuery,
    EngineSetup,
    QueryReply,
    Ready,
    RunQuery,
    encode,
    read_frame,
    write_frame,
)
from proxy.catalog.outputs import CatalogQueryFailed, memory_refusal
from proxy.catalog.stops import QueryStop

#: The longest frame the server sends (the setup holds the catalog's rows).
MAX_REQUEST_BYTES = 1024 * 1024 * 1024
#: The longest reply (the answer of MAX_BYTES pickled: longer ones are refused).
MAX_REPLY_BYTES = 160 * 1024 * 1024


class _Replies:
    """The reply pipe, written by the query threads one frame at a time."""

    def __init__(self, stream: io.FileIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, message: Ready | QueryReply) -> None:
        try:
            frame = encode(message)
        except (MemoryError, RecursionError, pickle.PicklingError):
            frame = b""
        if isinstance(message, QueryReply) and (not frame or len(frame) > MAX_REPLY_BYTES):
            frame = encode(QueryReply(message.id, None, memory_refusal()))
        if not frame:
            raise RuntimeError("the catalog engine could not write its message")
        with self._lock:
            write_frame(self._stream, frame)


class _Queries:
    """The queries running, by id, each with its QueryStop."""

    def __init__(self, engine: CatalogEngine, replies: _Replies) -> None:
        self._engine = engine
        self._replies = replies
        self._lock = threading.Lock()
        self._stops: dict[int, QueryStop] = {}

    def start(self, query: RunQuery) -> None:
        stop = QueryStop()
        with self._lock:
            self._stops[query.id] = stop
        thread = threading.Thread(
            target=self._answer, args=(query, stop), name="dpproxy-catalog-query", daemon=True
        )
        thread.start()

    def cancel(self, query: CancelQuery) -> None:
        with self._lock:
            stop = self._stops.get(query.id)
        if stop is not None:
            stop.cancel()

    def _answer(self, query: RunQuery, stop: QueryStop) -> None:
        # Sent whatever happens, so that the server never waits for a reply in vain.
        reply = QueryReply(query.id, None, CatalogQueryFailed("the catalog engine failed"))
        try:
            output = self._engine.run(query.sql, stop, session_zone(query.zone))
            reply = QueryReply(query.id, output, None)
        except CatalogQueryFailed as error:
            reply = QueryReply(query.id, None, error)
        except MemoryError:
            reply = QueryReply(query.id, None, memory_refusal())
        except RecursionError:
            failure = CatalogQueryFailed("its answer holds values nested too deeply")
            reply = QueryReply(query.id, None, failure)
        finally:
            with self._lock:
                self._stops.pop(query.id, None)
            self._replies.send(reply)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is the server's to handle
    requests = io.FileIO(os.dup(0), "rb")
    replies = _Replies(io.FileIO(os.dup(1), "wb"))
    # Whatever else would write to standard output (a library's message) goes to standard
    # error, never into the replies; standard input is the server's alone.
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    setup = read_frame(requests, MAX_REQUEST_BYTES)
    if not isinstance(setup, EngineSetup):
        sys.exit("dpproxy's catalog engine: no setup from the server")
    _limit_memory(setup.memory_bytes)
    queries = _Queries(CatalogEngine(setup.script), replies)
    replies.send(Ready())
    while True:
        message = read_frame(requests, MAX_REQUEST_BYTES)
        if message is None:
            break  # the server closed the pipe (or has ended)
        if isinstance(message, RunQuery):
            queries.start(message)
        elif isinstance(message, CancelQuery):
            queries.cancel(message)
    sys.stdout.flush()
    os._exit(0)  # at once, with any query still running


def _limit_memory(memory_bytes: int) -> None:
    """Map at most ``memory_bytes`` for data (heap, anonymous mappings, thread stacks)."""
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = memory_bytes if hard == resource.RLIM_INFINITY else min(memory_bytes, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


if __name__ == "__main__":
    main()
