"""The catalog engine ignores SIGTERM and SIGINT: the server owns its lifetime.

A Ctrl-C, or a `kill -TERM` of the server's process group (a service manager stopping
it), reaches the engine too; before, SIGTERM killed it, and the catalog queries under way
while the server shut down gracefully failed (53000). Now the engine ignores both, from
its very start (the server starts it with them blocked), and ends when its pipe closes or
the server kills it.

A real engine process; the signals are sent to it directly, as a group signal would.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

from proxy.catalog.build_script import build_script
from proxy.catalog.database import CatalogDatabase, QueryOutput, QueryStop
from proxy.catalog.engine_client import EngineProcess
from proxy.catalog.messages import EngineSetup
from tests.proxy.test_catalog_engine import _catalog

#: About a second of DuckDB's work (a cross join it interrupts between chunks).
SECOND_OF_WORK = (
    "SELECT count(*) FROM generate_series(1, 16000) AS a(x), "
    "generate_series(1, 16000) AS b(y) WHERE x + y > 16000"
)


def _signal_mask(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1], 16)
    raise AssertionError(f"no {field} for process {pid}")


def _bit(number: signal.Signals) -> int:
    return 1 << (number - 1)


def test_a_query_under_way_is_answered_though_the_engine_got_sigterm_and_sigint() -> None:
    database = CatalogDatabase(_catalog())
    try:
        engine = database.engine_pid
        ignored = _signal_mask(engine, "SigIgn")
        assert ignored & _bit(signal.SIGTERM) and ignored & _bit(signal.SIGINT)
        assert _signal_mask(engine, "SigBlk") == 0  # unblocked once ignored
        answers: list[QueryOutput] = []
        running = threading.Thread(
            target=lambda: answers.append(database.run_blocking(SECOND_OF_WORK, QueryStop()))
        )
        running.start()
        time.sleep(0.2)  # the query has reached the engine (it runs for about a second)
        os.kill(engine, signal.SIGTERM)
        os.kill(engine, signal.SIGINT)
        running.join(timeout=60)
        # Before: the engine ended at once, and the query with it (CatalogEngineLost).
        assert answers and answers[0].rows == [(16000 * 16000 - 16000 * 15999 // 2,)]
        assert database.engine_pid == engine
        assert database.run_blocking("SELECT 42").rows == [(42,)]
    finally:
        database.close()


def test_a_sigterm_as_the_engine_starts_is_ignored_too() -> None:
    """Before it has ignored them (its first tenth of a second, importing), the signals
    are blocked: pending, then dropped."""
    setup = EngineSetup(build_script(_catalog(), None), 1024 * 1024 * 1024)
    process = EngineProcess(setup)
    try:
        os.kill(process.pid, signal.SIGTERM)  # at once: the engine is not yet importing
        os.kill(process.pid, signal.SIGINT)
        process.wait_ready()
        assert process.run("SELECT 42 AS n", "UTC", QueryStop()).rows == [(42,)]
    finally:
        process.close()
    # The server's own mask is left as it was.
    assert not signal.pthread_sigmask(signal.SIG_BLOCK, []) & {signal.SIGTERM, signal.SIGINT}


def test_the_engine_still_ends_when_its_pipe_closes() -> None:
    database = CatalogDatabase(_catalog())
    engine = database.engine_pid
    database.close()
    assert not Path(f"/proc/{engine}").exists()
