"""A query that fails in the database after it was charged: the charge stands, the failure
is audited for the admin, and the analyst never sees the database's own error text."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from proxy.demo_data import DemoSize, generate, load_postgres
from tests.integration.server import RunningServer, dpproxy_in_process, start, write_config

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


@pytest.fixture
def pg_server(pg_dsn: str, tmp_path: Path) -> Iterator[tuple[RunningServer, str]]:
    schema = f"dpproxy_fail_{uuid.uuid4().hex[:8]}"
    load_postgres(generate(DemoSize(patients=300)), pg_dsn, schema=schema)
    backend = f'engine = "postgres"\ndsn = "{pg_dsn}"\nschema = "{schema}"\n#'
    running = start(write_config(tmp_path, backend=backend))
    try:
        yield running, schema
    finally:
        running.stop()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def test_database_failure_is_charged_audited_and_hidden(
    pg_server: tuple[RunningServer, str], pg_dsn: str
) -> None:
    server, schema = pg_server
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        assert conn.execute("SELECT COUNT(*) FROM visits").fetchone() is not None
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(f"ALTER TABLE {schema}.visits RENAME TO visits_elsewhere")
        with pytest.raises(psycopg.errors.InternalError_) as caught:
            conn.execute("SELECT COUNT(*) FROM visits")
        # The analyst's own history never shows the database's error text either.
        cur = conn.execute("SELECT * FROM dpproxy.my_queries")
        names = [c.name for c in cur.description or []]
        rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
        failed = [r for r in rows if r["decision"] == "failed"]
        assert failed and all("does not exist" not in (r["reason"] or "") for r in failed)
    message = str(caught.value)
    assert "the query failed in the database; the charge of ε=1 stands" in message
    assert "visits_elsewhere" not in message and "does not exist" not in message
    listing = dpproxy_in_process("audit", "list", "--json", "--config", str(server.config))
    records = [json.loads(line) for line in listing.stdout.splitlines()]
    records = [r for r in records if r["decision"] != "admin"]
    assert [r["decision"] for r in records] == ["accepted", "failed"]
    assert records[1]["epsilon"] == "1" and records[1]["remaining"] == "198"
    assert "does not exist" in records[1]["reason"]  # the admin sees the cause
    budget = json.loads(
        dpproxy_in_process(
            "budget", "show", "alice", "--json", "--config", str(server.config)
        ).stdout
    )
    assert budget[0]["spent"] == "2"
