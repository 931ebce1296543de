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

#: A few tenths of a second of DuckDB's work on a fast machine, a few seconds on a slow
#: one (a cross join it interrupts between chunks); within the engine's 5 s limit.
SIDE = 8000
WORK = (
    f"SELECT count(*) FROM generate_series(1, {SIDE}) AS a(x), "
    f"generate_series(1, {SIDE}) AS b(y) WHERE x + y > {SIDE}"
)


def _cpu_ticks(pid: int) -> int:
    """The CPU time ``pid`` has used, in clock ticks (user + system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def _working(pid: int, before: int) -> None:
    """Wait until ``pid`` has used a twentieth of a second of CPU since ``before``: the
    query is under way, however fast the machine."""
    deadline = time.monotonic() + 30
    while _cpu_ticks(pid) - before < os.sysconf("SC_CLK_TCK") // 20:
        if time.monotonic() > deadline:
            raise AssertionError("the engine did not start working on the query")
        time.sleep(0.005)


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
        idle = _cpu_ticks(engine)
        running = threading.Thread(
            target=lambda: answers.append(database.run_blocking(WORK, QueryStop()))
        )
        running.start()
        _working(engine, idle)  # the query has reached the engine and runs
        assert running.is_alive()
        os.kill(engine, signal.SIGTERM)
        os.kill(engine, signal.SIGINT)
        running.join(timeout=60)
        # Before: the engine ended at once, and the query with it (CatalogEngineLost).
        assert answers and answers[0].rows == [(SIDE * SIDE - SIDE * (SIDE - 1) // 2,)]
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
