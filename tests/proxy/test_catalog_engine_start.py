"""Starting the catalog engine has a deadline, and a failure to start is one clear error.

Before, the server wrote the engine's setup (250 KB here, more than a pipe holds) before
anything else, with no deadline: an engine that did not read it held the server's thread
(and the catalog's lock) for ever; and an engine that could not build the catalog wrote
its Python traceback into the server's log. Now the setup is written by a thread of its
own, the engine is killed if it is not ready in time, and a failure to start is a
CatalogEngineLost saying why and one line of the log.

Real engine processes (SIGSTOP holds one before it reads its setup, as a stuck start
would); no timings are asserted but generous upper bounds.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from proxy.catalog.build_script import build_script
from proxy.catalog.database import CatalogEngineLost, QueryStop
from proxy.catalog.engine_client import EngineProcess
from proxy.catalog.messages import EngineSetup
from tests.proxy.test_catalog_engine import _catalog

MB = 1024 * 1024
ENGINE_MODULE = b"proxy.catalog.engine_process"


@pytest.fixture(scope="module")
def setup() -> EngineSetup:
    return EngineSetup(build_script(_catalog(), None), 1024 * MB)


def _engines() -> set[int]:
    """This process's catalog engines."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            if int(stat[1]) == os.getpid() and ENGINE_MODULE in Path(
                f"/proc/{entry}/cmdline"
            ).read_bytes().replace(b"\0", b" "):
                found.add(int(entry))
        except (OSError, IndexError):
            continue  # it ended meanwhile
    return found


def _new_engine(before: set[int], seconds: float = 10.0) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        new = _engines() - before
        if new:
            return new.pop()
        time.sleep(0.001)
    raise AssertionError("no catalog engine was started")


@pytest.fixture
def stopped_engines() -> Iterator[list[int]]:
    """Engines the test stops (SIGSTOP): killed at the end whatever happened."""
    stopped: list[int] = []
    yield stopped
    for pid in stopped:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue


def test_an_engine_that_does_not_read_its_setup_does_not_hold_the_server(
    setup: EngineSetup, stopped_engines: list[int]
) -> None:
    started: list[EngineProcess] = []
    before = _engines()
    starting = threading.Thread(target=lambda: started.append(EngineProcess(setup)))
    starting.start()
    engine = _new_engine(before)
    os.kill(engine, signal.SIGSTOP)  # before it reads its setup (it imports for 0.3 s)
    stopped_engines.append(engine)
    starting.join(timeout=3)
    # Before: blocked in the setup's write, for as long as the engine did not read it.
    assert not starting.is_alive(), "the server's thread is held by the setup's write"
    started[0].close()  # a starting engine is killed: it never holds the server either


def test_an_engine_not_ready_in_time_is_killed_and_the_failure_is_clear(
    setup: EngineSetup,
    stopped_engines: list[int],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="dpproxy.catalog")
    before = _engines()
    process = EngineProcess(setup, start_seconds=1.0)
    engine = _new_engine(before)
    os.kill(engine, signal.SIGSTOP)
    stopped_engines.append(engine)
    began = time.monotonic()
    with pytest.raises(CatalogEngineLost, match=r"did not start: it did not start within 1 s"):
        process.wait_ready()
    assert time.monotonic() - began < 5
    assert process.lost
    with pytest.raises(CatalogEngineLost, match="did not start within 1 s"):
        process.run("SELECT 1", "UTC", QueryStop())
    assert not Path(f"/proc/{engine}").exists() or "Z" in _state(engine)  # killed
    messages = [record.getMessage() for record in caplog.records]
    assert messages == ["catalog engine killed: it did not start within 1 s"]
    process.close()


def test_an_engine_that_cannot_build_the_catalog_says_why_in_one_line(
    setup: EngineSetup,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="dpproxy.catalog")
    process = EngineProcess(EngineSetup(setup.script, 1 * MB))
    with pytest.raises(CatalogEngineLost) as lost:
        process.wait_ready()
    process.close()
    why = "it ran out of memory building the catalog"
    assert str(lost.value).startswith(f"the catalog engine did not start: {why}")
    assert "at most 1 MB (RLIMIT_DATA)" in str(lost.value)
    # The server's log: one line, and no traceback from the engine's process (whose
    # standard error is the server's). Before: DuckDB's traceback, then "catalog engine
    # ended (exit status 1): it ended".
    assert [record.getMessage() for record in caplog.records] == [
        str(lost.value).replace("the catalog engine did not start", "catalog engine did not start")
    ]
    assert "Traceback" not in capfd.readouterr().err


def test_an_engine_killed_before_it_is_ready_is_a_clear_error(
    setup: EngineSetup, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="dpproxy.catalog")
    before = _engines()
    process = EngineProcess(setup)
    os.kill(_new_engine(before), signal.SIGKILL)
    with pytest.raises(CatalogEngineLost, match=r"did not start: it was killed \(SIGKILL\)"):
        process.wait_ready()
    process.close()
    assert [record.getMessage() for record in caplog.records] == [
        "catalog engine did not start: it was killed (SIGKILL) before it was ready"
    ]


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
