"""A real `dpproxy serve` with TLS required, on both backends: psql and psycopg connect
with sslmode=require (unencrypted clients are refused), and a running DP query canceled
from another thread ends with 57014, its charge stands and the audit log says failed.

``visits`` is a view that makes every scan slow (a huge cross join in DuckDB, pg_sleep in
PostgreSQL), so that a DP query over it is still running when the cancel arrives.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from proxy.demo_data import DemoSize, generate, load_postgres, write_duckdb
from tests.integration.server import (
    PSQL,
    RunningServer,
    dpproxy_in_process,
    slow_visits_duckdb,
    slow_visits_postgres,
    start,
    write_config,
)

pytestmark = pytest.mark.integration

PATIENTS = 200
SCHEMA = f"dpproxy_tls_{uuid.uuid4().hex[:8]}"  # unique: test runs may share the server
SLOW_QUERY = "SELECT COUNT(*) FROM visits"
FAST_QUERY = "SELECT COUNT(*) FROM patients"
CANCEL_AFTER_SECONDS = 1.5


def with_tls(config: Path, cert: Path, key: Path) -> Path:
    """The test configuration with tls_cert, tls_key and require_tls in [server]."""
    text = config.read_text()
    tls = f'[server]\ntls_cert = "{cert}"\ntls_key = "{key}"\nrequire_tls = true\n'
    config.write_text(text.replace("[server]\n", tls, 1))
    return config


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def server(
    request: pytest.FixtureRequest,
    certificate: tuple[Path, Path],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[RunningServer]:
    directory = tmp_path_factory.mktemp(f"tls-{request.param}")
    data = generate(DemoSize(patients=PATIENTS))
    backend = ""
    if request.param == "postgres":
        dsn = request.getfixturevalue("pg_dsn")
        load_postgres(data, dsn, schema=SCHEMA)
        slow_visits_postgres(dsn, SCHEMA)
        backend = f'engine = "postgres"\ndsn = "{dsn}"\nschema = "{SCHEMA}"\n#'
    else:
        write_duckdb(data, directory / "demo.duckdb")
        slow_visits_duckdb(directory / "demo.duckdb")
    running = start(with_tls(write_config(directory, backend=backend), *certificate))
    yield running
    log = running.stop()
    assert "Traceback" not in log, log
    if request.param == "postgres":
        with psycopg.connect(request.getfixturevalue("pg_dsn"), autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


def spent(server: RunningServer) -> float:
    result = dpproxy_in_process("budget", "show", "alice", "--json", "--config", str(server.config))
    assert result.returncode == 0, result.stderr
    return float(json.loads(result.stdout)[0]["spent"])


def last_audit(server: RunningServer) -> dict[str, object]:
    result = dpproxy_in_process(
        "audit", "list", "--analyst", "alice", "--limit", "1", "--format", "json",
        "--config", str(server.config),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    records = json.loads(result.stdout)
    record = records[-1] if isinstance(records, list) else records
    assert isinstance(record, dict)
    return record


def psql(server: RunningServer, dsn: str, *commands: str) -> subprocess.CompletedProcess[str]:
    args = [PSQL, "-X", "-v", "ON_ERROR_STOP=1", dsn]
    for command in commands:
        args += ["-c", command]
    return subprocess.run(
        args, capture_output=True, text=True, timeout=60, check=False,
        env={"PGCONNECT_TIMEOUT": "10", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


def test_psql_with_sslmode_require(server: RunningServer) -> None:
    result = psql(server, server.dsn("alice") + "?sslmode=require", "\\conninfo", FAST_QUERY)
    assert result.returncode == 0, result.stderr
    assert "SSL connection (protocol: TLSv1." in result.stdout, result.stdout
    assert "count" in result.stdout and "dpproxy: this answer cost" in result.stderr


def test_unencrypted_clients_are_refused(server: RunningServer) -> None:
    result = psql(server, server.dsn("alice") + "?sslmode=disable", FAST_QUERY)
    assert result.returncode != 0
    assert "accepts only encrypted connections" in result.stderr, result.stderr
    with pytest.raises(psycopg.OperationalError, match="only encrypted connections"):
        psycopg.connect(server.dsn("alice") + "?sslmode=disable", connect_timeout=10)


def test_psycopg_with_sslmode_require(server: RunningServer) -> None:
    with psycopg.connect(server.dsn("alice") + "?sslmode=require", autocommit=True) as conn:
        assert conn.pgconn.ssl_in_use
        row = conn.execute("SELECT COUNT(*) FROM patients WHERE sex = %s", ["F"]).fetchone()
        assert row is not None and isinstance(row[0], int)


def test_cancel_stops_a_running_dp_query(server: RunningServer) -> None:
    before = spent(server)
    with psycopg.connect(server.dsn("alice") + "?sslmode=require", autocommit=True) as conn:

        def cancel() -> None:
            time.sleep(CANCEL_AFTER_SECONDS)
            conn.cancel_safe(timeout=10)  # over TLS too: libpq encrypts the cancel request

        canceller = threading.Thread(target=cancel)
        began = time.monotonic()
        canceller.start()
        with pytest.raises(psycopg.errors.QueryCanceled) as raised:
            conn.execute(SLOW_QUERY)
        canceller.join()
        assert time.monotonic() - began < 20  # stopped, not run to the end or the timeout
        assert raised.value.sqlstate == "57014"
        assert "charge" in str(raised.value)
        # The connection is usable again.
        assert conn.execute("SHOW dpproxy.epsilon").fetchone() == ("1",)
    assert spent(server) == pytest.approx(before + 1.0)  # the charge stands
    record = last_audit(server)
    assert record["decision"] == "failed", record
    assert record["sql"] == SLOW_QUERY
