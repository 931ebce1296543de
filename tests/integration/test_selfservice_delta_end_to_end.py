"""The δ of partition selection in the analyst's own views, through a real `dpproxy serve`
and psycopg: `dpproxy.my_budget` and `dpproxy.my_queries` show it exactly, as the ledger
holds it and as the admin's `budget show` and `audit list` give it; 0 for queries that
spend none."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from psycopg.types.string import TextLoader

from tests.integration.server import (
    RunningServer,
    demo_database,
    dpproxy_in_process,
    start,
    write_config,
)

pytestmark = pytest.mark.integration

COUNT = "SELECT COUNT(*) FROM visits"
BY_DIAGNOSIS = "SELECT diagnosis, COUNT(*) AS visits FROM visits GROUP BY diagnosis"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    directory = tmp_path_factory.mktemp("selfservice-delta")
    demo_database(directory, 300)
    running = start(write_config(directory, backend=""))
    yield running
    log = running.stop()
    assert "Traceback" not in log, log


def view(conn: psycopg.Connection[Any], name: str) -> list[dict[str, Any]]:
    """The rows of ``dpproxy.NAME`` by column name, amounts as the text on the wire."""
    cur = conn.cursor()
    cur.adapters.register_loader("numeric", TextLoader)
    cur.execute(f"SELECT * FROM dpproxy.{name}")
    names = [c.name for c in cur.description or []]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def admin(server: RunningServer, *args: str) -> list[dict[str, Any]]:
    """A JSON command's records (`budget show` writes a list, `audit list` JSON lines)."""
    result = dpproxy_in_process(*args, "--json", "--config", str(server.config))
    assert result.returncode == 0, result.stderr
    if result.stdout.startswith("["):
        return list(json.loads(result.stdout))
    return [json.loads(line) for line in result.stdout.splitlines()]


def test_delta_in_my_budget_and_my_queries(server: RunningServer) -> None:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as alice:
        before = view(alice, "my_budget")[0]
        assert (before["delta_total"], before["delta_spent"], before["delta_remaining"]) == (
            "0.000001",
            "0",
            "0.000001",
        )
        alice.execute(COUNT).fetchall()
        alice.execute("SET dpproxy.delta = 2.5e-9")
        alice.execute(BY_DIAGNOSIS).fetchall()
        alice.execute("SET dpproxy.delta = 0")
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="no public domain"):
            alice.execute(BY_DIAGNOSIS)
        mine = view(alice, "my_budget")[0]
        history = view(alice, "my_queries")
        # psycopg's own numeric loader reads the same exact values.
        decimals = alice.execute("SELECT * FROM dpproxy.my_budget").fetchall()[0]

    assert [(q["sql"], q["decision"], q["delta"]) for q in history] == [
        (COUNT, "accepted", "0"),
        (BY_DIAGNOSIS, "accepted", "0.0000000025"),
        (BY_DIAGNOSIS, "rejected", "0"),
    ]
    assert (mine["delta_total"], mine["delta_spent"], mine["delta_remaining"]) == (
        "0.000001",
        "0.0000000025",
        "0.0000009975",
    )
    assert decimals[-3:] == (Decimal("1e-6"), Decimal("2.5e-9"), Decimal("9.975e-7"))

    # The admin sees the same amounts (written as 2.5e-9).
    shown = admin(server, "budget", "show", "alice")[0]
    assert (shown["delta_spent"], shown["delta_remaining"]) == ("2.5e-9", "9.975e-7")
    assert Decimal(shown["delta_spent"]) == Decimal(mine["delta_spent"])
    assert Decimal(shown["delta_remaining"]) == Decimal(mine["delta_remaining"])
    audited = {r["id"]: r["delta"] for r in admin(server, "audit", "list", "--analyst", "alice")}
    assert [Decimal(audited[q["id"]]) for q in history] == [Decimal(q["delta"]) for q in history]
