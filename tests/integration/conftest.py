"""The demo server on either backend, shared by integration modules.

A module sets ``PATIENTS`` (the demo's size) and may set ``DIRECTORY_PREFIX``; modules that
need another kind of server define their own ``server`` fixture, which takes precedence.
Modules whose tests leave nothing another test could see (syntax errors, catalog queries,
long texts: no budgets or audit rows counted but as deltas) make their ``server`` the
package's ``duckdb_server``. ``proxy`` and ``postgres`` are psycopg sessions on the
module's server and on the real PostgreSQL, to compare what each sends.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.integration.server import (
    Connection,
    RunningServer,
    demo_database,
    demo_server,
    fresh_demo_server,
)

#: The size of ``duckdb_server``'s demo (its tests never depend on the data).
SHARED_PATIENTS = 50


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


@pytest.fixture(scope="package")
def duckdb_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """One `dpproxy serve` of a small demo on DuckDB for the modules that share it (in
    each pytest-xdist worker that runs one of them); fails if it logged a traceback."""
    with fresh_demo_server(tmp_path_factory, "shared-duckdb", patients=SHARED_PATIENTS) as running:
        yield running


@pytest.fixture
def proxy(server: RunningServer) -> Iterator[Connection]:
    """alice's session on the module's server (autocommit)."""
    with psycopg.connect(server.dsn("alice"), autocommit=True, connect_timeout=10) as conn:
        yield conn


@pytest.fixture
def postgres(pg_dsn: str) -> Iterator[Connection]:
    """A session on the real PostgreSQL (autocommit), to compare with."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn
