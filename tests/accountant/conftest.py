"""The state store's tests run against both backends: a SQLite file and a PostgreSQL
schema (a fresh one per test, from tests/conftest.py's ``pg_schema``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from accountant import PostgresState, StateLocation


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> StateLocation:
    """Where a new, empty state store is opened: a file, or an empty PostgreSQL schema."""
    if request.param == "sqlite":
        return tmp_path / "state.db"
    return PostgresState(request.getfixturevalue("pg_dsn"), request.getfixturevalue("pg_schema"))
