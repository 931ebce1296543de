"""Shared fixtures: the PostgreSQL test server and small databases for the rewriter."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.postgres_schema import scratch_schema

DEFAULT_PG_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"


def pg_dsn_or_skip() -> str:
    """The test server's DSN; skips when unreachable, except in CI where that fails."""
    dsn = os.environ.get("DPPROXY_TEST_PG_DSN", DEFAULT_PG_DSN)
    try:
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL at {dsn} is unreachable in CI: {exc}")
        pytest.skip(f"PostgreSQL at {dsn} is unreachable: {exc}")
    return dsn


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    return pg_dsn_or_skip()


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    """A fresh schema, dropped afterwards."""
    with scratch_schema(pg_dsn) as (_, name):
        yield name


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate and key made with the openssl command."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not installed")
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key
