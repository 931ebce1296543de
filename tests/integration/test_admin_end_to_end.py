"""The admin's day, as README and docs describe it, against a real server process:
two analysts with budgets query; the admin watches, changes a budget live, adds and
removes an analyst, exports and verifies the audit log and writes the HTML report."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest

from proxy.demo_data import DemoSize, generate, write_duckdb
from tests.integration.server import RunningServer, dpproxy, dpproxy_in_process, start, write_config

pytestmark = pytest.mark.integration

COUNT = "SELECT COUNT(*) FROM visits"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    directory = tmp_path_factory.mktemp("admin")
    write_duckdb(generate(DemoSize(patients=300)), directory / "demo.duckdb")
    running = start(write_config(directory, backend=""))
    yield running
    log = running.stop()
    assert "Traceback" not in log, log


def admin(server: RunningServer, *args: str, stdin: str | None = None) -> str:
    """The command's output; in this process, unless it reads standard input (a new
    analyst's password): that one runs as the real `dpproxy`, as the admin types it."""
    command = [*args, "--config", str(server.config)]
    result = dpproxy(*command, stdin=stdin) if stdin is not None else dpproxy_in_process(*command)
    assert result.returncode == 0, result.stderr
    return result.stdout


def budget(server: RunningServer, analyst: str) -> dict[str, str]:
    rows: list[dict[str, str]] = json.loads(admin(server, "budget", "show", analyst, "--json"))
    return rows[0]


def show_budget(conn: psycopg.Connection) -> str:
    row = conn.execute("SHOW dpproxy.budget").fetchone()
    assert row is not None
    return str(row[0])


def test_admin_day(server: RunningServer, tmp_path: Path) -> None:
    # Two analysts from the configuration, with their budgets.
    listed = json.loads(admin(server, "analyst", "list", "--json"))
    assert [(a["analyst"], a["total"]) for a in listed] == [("alice", "200"), ("bob", "3")]

    with (
        psycopg.connect(server.dsn("alice"), autocommit=True) as alice,
        psycopg.connect(server.dsn("bob"), autocommit=True) as bob,
    ):
        alice.execute(COUNT)
        bob.execute(COUNT)
        bob.execute("SET dpproxy.epsilon = 1")
        bob.execute(COUNT)
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            bob.execute("SELECT * FROM visits")  # rejected, not charged
        assert show_budget(bob).startswith("1.5 left of 3 (1.5 spent")

        # Analysts see their own budget and history, free of charge.
        mine = bob.execute("SELECT * FROM dpproxy.my_budget").fetchall()
        assert mine == [
            ("bob", Decimal(3), Decimal("1.5"), Decimal("1.5"), Decimal("0.5"), 1)
            + (Decimal("1e-6"), 0, Decimal("1e-6"))  # δ: none spent (COUNTs select nothing)
        ]
        history = bob.execute("SELECT * FROM dpproxy.my_queries").fetchall()
        assert [(h[4], h[6]) for h in history] == [
            ("accepted", Decimal("0.5")),
            ("accepted", Decimal(1)),
            ("rejected", Decimal(0)),
        ]
        assert {h[3] for h in history} == {COUNT, "SELECT * FROM visits"}
        assert budget(server, "bob")["spent"] == "1.5"

        # The admin watches them query.
        watched = json.loads(admin(server, "audit", "list", "--format", "json"))
        queries = [(r["analyst"], r["decision"]) for r in watched if r["decision"] != "admin"]
        assert queries == [
            ("alice", "accepted"),
            ("bob", "accepted"),
            ("bob", "accepted"),
            ("bob", "rejected"),
        ]
        assert all(r["client_address"].startswith("127.0.0.1") for r in watched[-4:])

        # A live budget cut applies to bob's open session at once; a grant lifts it.
        admin(server, "budget", "set", "bob", "--epsilon-total", "2")
        with pytest.raises(psycopg.errors.ConfigurationLimitExceeded, match="0.5 remains of 2"):
            bob.execute(COUNT)
        admin(server, "budget", "grant", "bob", "1")
        bob.execute(COUNT)
        assert show_budget(bob).startswith("0.5 left of 3 (2.5 spent")
        alice.execute(COUNT)

    # A new analyst can log in at once; a removed one cannot.
    admin(server, "analyst", "add", "carol", "--epsilon-total", "1", stdin="carol-pw\n")
    carol_dsn = server.dsn("alice").replace("alice:alice-pw", "carol:carol-pw")
    with psycopg.connect(carol_dsn, autocommit=True) as carol:
        carol.execute(COUNT)
        assert carol.execute("SELECT * FROM dpproxy.my_queries").rowcount == 1
    admin(server, "analyst", "remove", "carol")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(carol_dsn).close()

    # Export and verify the audit log.
    export = tmp_path / "audit.csv"
    admin(server, "audit", "export", "--format", "csv", "--out", str(export))
    rows = list(csv.DictReader(export.open()))
    decisions = [r["decision"] for r in rows]
    assert decisions.count("accepted") == 6 and decisions.count("over_budget") == 1
    assert decisions.count("admin") == 6  # 2 seeds, set, grant, add, remove
    refused = next(r for r in rows if r["decision"] == "over_budget")
    assert refused["analyst"] == "bob" and "0.5 remains of 2" in refused["reason"]
    assert all(r["actor"] for r in rows if r["decision"] == "admin")
    assert "intact" in admin(server, "audit", "verify")

    # The HTML report.
    page = tmp_path / "report.html"
    admin(server, "report", "--out", str(page))
    html = page.read_text()
    for name in ("alice", "bob", "carol"):
        assert f"<h2>{name}</h2>" in html or name == "carol"  # carol was removed
    assert html.count("<svg") == 4 and "over_budget" in html
