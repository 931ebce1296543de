"""The server's statement_timeout_seconds stops a query in the database with PostgreSQL's
57014 "canceling statement due to statement timeout" (it was XX000 "the query failed in
the database"), on both backends; the charge stands and the audit says why.

A real `dpproxy serve` with statement_timeout_seconds = 0.5 and psycopg; the session sets
no statement_timeout of its own. ``visits`` is a view that makes every scan slow (a huge
cross join in DuckDB, pg_sleep in PostgreSQL).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from decimal import Decimal

import psycopg
import pytest

from proxy.demo_data import DemoSize, generate, load_postgres, write_duckdb
from tests.integration.server import (
    RunningServer,
    dpproxy_in_process,
    slow_visits_duckdb,
    slow_visits_postgres,
    start,
    write_config,
)

pytestmark = pytest.mark.integration

PATIENTS = 100
SCHEMA = f"dpproxy_server_timeout_{uuid.uuid4().hex[:8]}"
TIMEOUT_SECONDS = 0.5
#: A query stopped by the timeout ends within this of its start.
PROMPT_SECONDS = 2.0
SLOW_DP = "SELECT COUNT(*) FROM visits"


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    directory = tmp_path_factory.mktemp(f"server-timeout-{request.param}")
    data = generate(DemoSize(patients=PATIENTS))
    backend = ""
    dsn = None
    if request.param == "postgres":
        dsn = request.getfixturevalue("pg_dsn")
        load_postgres(data, dsn, schema=SCHEMA)
        slow_visits_postgres(dsn, SCHEMA)
        backend = f'engine = "postgres"\ndsn = "{dsn}"\nschema = "{SCHEMA}"\n#'
    else:
        path = directory / "demo.duckdb"
        write_duckdb(data, path)
        slow_visits_duckdb(path)
    config = write_config(directory, backend=backend)
    text = config.read_text()
    if "statement_timeout_seconds = 60\n" not in text:
        raise AssertionError("the demo configuration no longer sets the statement timeout")
    config.write_text(
        text.replace(
            "statement_timeout_seconds = 60\n", f"statement_timeout_seconds = {TIMEOUT_SECONDS}\n"
        )
    )
    running = start(config)
    try:
        yield running
    finally:
        log = running.stop()
        if dsn is not None:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    assert "Traceback" not in log, log


def left(conn: psycopg.Connection[tuple[object, ...]]) -> Decimal:
    row = conn.execute("SHOW dpproxy.budget").fetchone()
    assert row is not None and isinstance(row[0], str)
    return Decimal(row[0].split(" left of ", 1)[0].removeprefix("ε="))


def test_the_servers_statement_timeout_is_57014_and_the_charge_stands(
    server: RunningServer,
) -> None:
    with psycopg.connect(server.dsn("alice"), autocommit=True, connect_timeout=10) as conn:
        assert conn.execute("SHOW statement_timeout").fetchone() == ("0",)
        before = left(conn)
        began = time.monotonic()
        with pytest.raises(psycopg.errors.QueryCanceled) as caught:
            conn.execute(SLOW_DP).fetchall()
        elapsed = time.monotonic() - began
        assert caught.value.sqlstate == "57014"
        assert str(caught.value) == (
            "canceling statement due to statement timeout; the charge of ε=1 stands"
        )
        assert TIMEOUT_SECONDS <= elapsed < PROMPT_SECONDS
        assert left(conn) == before - 1
        # The session goes on: a fast statement is answered.
        assert conn.execute("SELECT 'after' AS fresh").fetchall() == [("after",)]
    result = dpproxy_in_process(
        "audit", "list", "--analyst", "alice", "--limit", "1", "--format", "json",
        "--config", str(server.config),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    records = json.loads(result.stdout)
    record = records[-1] if isinstance(records, list) else records
    assert record["decision"] == "failed", record
    assert record["reason"] == "QueryCanceled: canceled due to statement timeout", record
