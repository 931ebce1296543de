"""GROUP BY a column without a public domain, through a real `dpproxy serve` and psycopg:
refused with δ = 0 (the analyst's or the session's), answered through partition selection
with δ > 0, and charged in δ (NOTICE, SHOW dpproxy.budget, `dpproxy budget show`, audit)."""

from __future__ import annotations

import json

import duckdb
import psycopg
import pytest

from tests.integration.server import RunningServer, dpproxy, dpproxy_in_process

pytestmark = pytest.mark.integration

PATIENTS = 1_500
DIRECTORY_PREFIX = "selection-"
BY_DIAGNOSIS = "SELECT diagnosis, COUNT(*) AS visits FROM visits GROUP BY diagnosis ORDER BY 1"


def admin(server: RunningServer, *args: str, stdin: str | None = None) -> str:
    """In this process, unless the command reads standard input (the real `dpproxy`)."""
    command = [*args, "--config", str(server.config)]
    result = dpproxy(*command, stdin=stdin) if stdin is not None else dpproxy_in_process(*command)
    assert result.returncode == 0, result.stderr
    return result.stdout


def spent(server: RunningServer, analyst: str) -> dict[str, str]:
    return dict(json.loads(admin(server, "budget", "show", analyst, "--json"))[0])


def test_keys_from_the_data_need_delta(server: RunningServer) -> None:
    notices: list[str] = []
    with psycopg.connect(server.dsn("alice"), autocommit=True) as alice:
        alice.add_notice_handler(
            lambda d: notices.append(f"{d.message_primary} | {d.message_detail}")
        )
        before = spent(server, "alice")
        # The session refuses to spend δ: the query is rejected, naming the key and the
        # two ways out, and costs nothing.
        alice.execute("SET dpproxy.delta = 0")
        with pytest.raises(psycopg.errors.FeatureNotSupported) as refused:
            alice.execute(BY_DIAGNOSIS)
        diag = refused.value.diag
        assert "GROUP BY diagnosis has no public domain" in (diag.message_primary or "")
        assert "domain = [...]" in (diag.message_hint or "")
        assert "SET dpproxy.delta" in (diag.message_hint or "")
        assert spent(server, "alice") == before

        # With the default δ (a thousandth of alice's 1e-6), it is answered.
        alice.execute("RESET dpproxy.delta")
        shown = alice.execute("SHOW dpproxy.delta").fetchone()
        assert shown == ("1e-9",)
        rows = alice.execute(BY_DIAGNOSIS).fetchall()
        budget_line = alice.execute("SHOW dpproxy.budget").fetchone()
    assert rows, "common diagnoses pass the threshold"
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)
    assert {r[0] for r in rows} <= true_diagnoses(server)
    assert "this answer cost ε=1 and δ=1e-9 (partition selection)" in notices[-1]
    assert "δ=9.99e-7 left for partition selection" in notices[-1]
    assert "noisy count of persons reaches" in notices[-1]
    assert budget_line is not None and "1e-9 spent by partition selection" in budget_line[0]
    after = spent(server, "alice")
    assert after["delta_spent"] == "1e-9" and after["delta"] == "1e-6"
    records = [
        json.loads(line)
        for line in admin(server, "audit", "list", "--analyst", "alice", "--json").splitlines()
    ]
    accepted = [r for r in records if r["decision"] == "accepted"]
    assert accepted[-1]["delta"] == "1e-9" and accepted[-1]["sql"] == BY_DIAGNOSIS
    assert "intact" in admin(server, "audit", "verify")


def test_select_distinct_releases_keys_found_in_the_data(server: RunningServer) -> None:
    """SELECT DISTINCT of a column without a domain: its keys alone, through partition
    selection, over the extended protocol (psycopg) and the simple one (psql)."""
    notices: list[str] = []
    distinct = "SELECT DISTINCT diagnosis FROM visits ORDER BY 1"
    with psycopg.connect(server.dsn("alice"), autocommit=True) as alice:
        alice.add_notice_handler(
            lambda d: notices.append(f"{d.message_primary} | {d.message_detail}")
        )
        before = float(spent(server, "alice")["spent"])
        cursor = alice.execute(distinct)
        rows = cursor.fetchall()
        assert [c.name for c in cursor.description or ()] == ["diagnosis"]
        # Keys of a public domain alone list its declared values, free (test_domain_values_
        # end_to_end), but not where a WHERE about other columns would narrow them: refused.
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="public domain"):
            alice.execute("SELECT DISTINCT department FROM visits WHERE cost > 100")
        # DISTINCT over aggregates: repeated released rows are removed.
        seen = alice.execute(
            "SELECT DISTINCT COUNT(*) > 0 AS seen FROM visits GROUP BY department"
        ).fetchall()
    assert rows and len(rows) == len(set(rows))
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)
    assert {r[0] for r in rows} <= true_diagnoses(server)
    assert seen == [(True,)]  # every department has thousands of visits
    assert "this answer cost ε=1 and δ=1e-9 (partition selection)" in notices[0]
    assert "95% confidence" not in notices[0]  # no aggregate, no noisy value...
    assert "clamped" not in notices[0]  # ...and no value to clamp
    assert "noisy count of persons reaches" in notices[0]
    assert float(spent(server, "alice")["spent"]) == pytest.approx(before + 2)
    shown = server.psql("alice", "SET dpproxy.delta = 1e-9", distinct)
    assert shown.returncode == 0, shown.stderr
    assert "partition selection" in shown.stderr  # the NOTICE
    lines = [line.strip() for line in shown.stdout.splitlines() if line.strip()]
    header = lines.index("diagnosis")
    listed = lines[header + 2 : -1]  # between the rule under the header and "(n rows)"
    assert lines[-1] == f"({len(listed)} rows)"
    assert listed and set(listed) <= true_diagnoses(server)


def test_a_pure_epsilon_analyst_is_refused(server: RunningServer) -> None:
    admin(
        server,
        "analyst",
        "add",
        "carol",
        "--epsilon-total",
        "2",
        "--delta",
        "0",
        stdin="carol-pw\n",
    )
    carol_dsn = server.dsn("alice").replace("alice:alice-pw", "carol:carol-pw")
    with psycopg.connect(carol_dsn, autocommit=True) as carol:
        assert carol.execute("SHOW dpproxy.delta").fetchone() == ("0",)
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="no public domain"):
            carol.execute(BY_DIAGNOSIS)
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="δ = 0"):
            carol.execute("SET dpproxy.delta = 1e-9")
        # Keys from a public domain still work without δ.
        carol.execute("SELECT department, COUNT(*) FROM visits GROUP BY department").fetchall()
    assert spent(server, "carol")["delta_spent"] == "0"


def true_diagnoses(server: RunningServer) -> set[str]:
    """Every diagnosis in the demo data (read directly, as the test's reference)."""
    database = server.config.parent / "demo.duckdb"
    with duckdb.connect(str(database), read_only=True) as conn:
        return {str(r[0]) for r in conn.execute("SELECT DISTINCT diagnosis FROM visits").fetchall()}
