"""`dpproxy serve` runs on uvloop when it is installed, else on asyncio's own loop."""

from __future__ import annotations

import asyncio
import importlib.util
import sys

import pytest

from proxy import server


async def _loop_name() -> str:
    return type(asyncio.get_running_loop()).__module__


def test_runs_on_uvloop_when_installed() -> None:
    if importlib.util.find_spec("uvloop") is None:
        pytest.skip("uvloop is not installed")
    names: list[str] = []

    async def main() -> None:
        names.append(await _loop_name())

    server.run_event_loop(main())
    assert names and names[0].startswith("uvloop")


def test_falls_back_to_asyncio(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # makes `import uvloop` fail
    assert server.event_loop_factory() is None
    names: list[str] = []

    async def main() -> None:
        names.append(await _loop_name())

    server.run_event_loop(main())
    assert names == ["asyncio.unix_events"]
