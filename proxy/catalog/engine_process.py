"""The catalog engine's process: ``python -m proxy.catalog.engine_process``, started by
the server (proxy.catalog.engine_client) and ended when it closes the pipe.

DuckDB makes the strings and lists of its functions (repeat('x', 1000000000),
range(300000000), replace() of replace()...) outside the memory_limit it enforces on its
buffers; in the server's process, one catalog query could so take gigabytes and a core
for a minute. Here it cannot: the process may map at most EngineSetup.memory_bytes for its
data (RLIMIT_DATA), past which DuckDB's allocations fail with its out-of-memory error
(and Python's with MemoryError), answered as such; and the server ends the process if a
query does not stop when interrupted. An answer whose frame would be longer than
MAX_ANSWER_BYTES is refused here, before it is sent: the server never holds a larger one.

The server owns the process's lifetime: it ignores SIGTERM and SIGINT (a Ctrl-C, or a
`kill -TERM` of the server's process group, as the server's graceful shutdown begins, so
that the catalog queries under way are still answered), and ends when its pipe closes or
the server kills it.

Reads frames (proxy.catalog.messages) on its standard input: an EngineSetup, then
RunQuery and CancelQuery; writes Ready, then a QueryReply for each RunQuery, on what was
its standard output (which becomes its standard error: nothing else is ever written in
the frames). If it cannot build the catalog, it writes instead one QueryReply to no query
(START_FAILED) whose error says why, and ends: the server logs it, in one line. Queries
run on threads of their own, as many at a time as the server sends.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import resource
import signal
import sys
import threading
from typing import TYPE_CHECKING, NoReturn

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
from proxy.catalog.outputs import CatalogQueryFailed, CatalogResultTooLarge, memory_refusal
from proxy.catalog.stops import QueryStop

if TYPE_CHECKING:  # imported by main(), once the signals are ignored (a second or so)
    from proxy.catalog.engine import CatalogEngine

#: The longest frame the server sends (the setup holds the catalog's rows).
MAX_REQUEST_BYTES = 1024 * 1024 * 1024
#: The longest reply: a query's answer (its rows, pickled) longer than this is refused
#: (54000, with a hint) before it is sent. Clients' catalog queries need far less: all of
#: pg_proc is 0.4 MB, information_schema.columns about 120 bytes a column.
MAX_ANSWER_BYTES = 16 * 1024 * 1024
#: The id of the reply that tells the server the engine could not start (queries' ids
#: start at 1).
START_FAILED = 0
#: The signals the engine ignores (the server's to handle). The server blocks them while
#: it starts the process, which unblocks them once they are ignored: none is lost to the
#: engine meanwhile.
IGNORED_SIGNALS = frozenset({signal.SIGINT, signal.SIGTERM})


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
        if isinstance(message, QueryReply):
            if not frame:
                frame = encode(QueryReply(message.id, None, memory_refusal()))
            elif len(frame) > MAX_ANSWER_BYTES:
                frame = encode(QueryReply(message.id, None, answer_refusal()))
        if not frame:
            raise RuntimeError("the catalog engine could not write its message")
        with self._lock:
            write_frame(self._stream, frame)


def answer_refusal() -> CatalogResultTooLarge:
    return CatalogResultTooLarge(
        f"its answer is larger than {MAX_ANSWER_BYTES // (1024 * 1024)} MB"
    )


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
        from proxy.catalog.datetimes import session_zone  # noqa: PLC0415 (imported by now)

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
    for number in IGNORED_SIGNALS:
        signal.signal(number, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, IGNORED_SIGNALS)  # see IGNORED_SIGNALS
    requests = io.FileIO(os.dup(0), "rb")
    replies = _Replies(io.FileIO(os.dup(1), "wb"))
    # Whatever else would write to standard output (a library's message) goes to standard
    # error, never into the replies; standard input is the server's alone.
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    engine = _started(requests)
    if isinstance(engine, str):
        _give_up(replies, engine)
    queries = _Queries(engine, replies)
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


_OUT_OF_MEMORY = "it ran out of memory building the catalog"
#: The dynamic loader's error when mapping a shared object fails (glibc's dl-load.c).
_MAPPING_FAILED = "failed to map segment from shared object"


def _started(requests: io.FileIO) -> CatalogEngine | str:
    """The engine, built from the server's setup; or why it cannot be (in one line)."""
    memory_bytes: int | None = None
    try:
        setup = read_frame(requests, MAX_REQUEST_BYTES)
        if not isinstance(setup, EngineSetup):
            return "it got no setup from the server"
        memory_bytes = setup.memory_bytes
        _limit_memory(memory_bytes)
        from proxy.catalog.engine import CatalogEngine  # noqa: PLC0415 (see TYPE_CHECKING)

        return CatalogEngine(setup.script)
    except MemoryError:
        why = _OUT_OF_MEMORY
    except Exception as error:  # noqa: BLE001 (whatever it is, the server is told, in a line)
        first_line = str(error).split("\n", 1)[0]
        if isinstance(error, ImportError) and _MAPPING_FAILED in first_line:
            # The dynamic loader could not map a library (DuckDB's) within the memory
            # limit (ENOMEM): where the limit is met depends on what was loaded before.
            why = _OUT_OF_MEMORY
        else:
            why = f"it could not build the catalog ({type(error).__name__}: {first_line})"
    if memory_bytes is not None and "memory" in why.lower():
        why += f"; its data may take at most {memory_bytes // (1024 * 1024)} MB (RLIMIT_DATA)"
    return why


def _give_up(replies: _Replies, why: str) -> NoReturn:
    """Tell the server why the engine cannot start (if it can still be told), and end."""
    # Untold (the server is gone, or no memory is left), the server still sees the process
    # end before it was ready, and says so.
    with contextlib.suppress(OSError, MemoryError, RuntimeError):
        replies.send(QueryReply(START_FAILED, None, CatalogQueryFailed(why)))
    os._exit(1)


def _limit_memory(memory_bytes: int) -> None:
    """Map at most ``memory_bytes`` for data (heap, anonymous mappings, thread stacks)."""
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = memory_bytes if hard == resource.RLIM_INFINITY else min(memory_bytes, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


if __name__ == "__main__":
    main()
