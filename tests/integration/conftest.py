"""The demo server on either backend, shared by integration modules.

A module sets ``PATIENTS`` (the demo's size) and may set ``DIRECTORY_PREFIX``; modules that
need another kind of server define their own ``server`` fixture, which takes precedence.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.server import RunningServer, demo_database, demo_server


@pytest.fixture(scope="module")
def demo_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    prefix = getattr(request.module, "DIRECTORY_PREFIX", "")
    directory = tmp_path_factory.mktemp(f"{prefix}demo")
    demo_database(directory, request.module.PATIENTS)
    return directory


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def server(
    request: pytest.FixtureRequest, demo_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    dsn = request.getfixturevalue("pg_dsn") if request.param == "postgres" else None
    prefix = getattr(request.module, "DIRECTORY_PREFIX", "")
    directory = tmp_path_factory.mktemp(f"{prefix}{request.param}")
    with demo_server(
        request.param, demo_dir / "demo.duckdb", directory, pg_dsn=dsn,
        patients=request.module.PATIENTS,
    ) as running:  # fmt: skip
        yield running
