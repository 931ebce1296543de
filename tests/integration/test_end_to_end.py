"""A user's path through dpproxy: connect, ask, get a noisy answer, run out of budget,
and the admin sees every attempt. Real server process, real psql and psycopg."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import psycopg
import pytest

from tests.integration.server import RunningServer, dpproxy, dpproxy_in_process

pytestmark = pytest.mark.integration

PATIENTS = 2_000


def bounded_visit_count(database: Path) -> int:
    with duckdb.connect(str(database), read_only=True) as conn:
        row = conn.execute(
            "SELECT SUM(LEAST(n, 30)) FROM (SELECT COUNT(*) AS n FROM visits GROUP BY patient_id)"
        ).fetchone()
    assert row is not None
    return int(row[0])


def spent(server: RunningServer, analyst: str) -> str:
    result = dpproxy_in_process("budget", "show", analyst, "--json", "--config", str(server.config))
    assert result.returncode == 0, result.stderr
    return str(json.loads(result.stdout)[0]["spent"])


def audit(server: RunningServer, analyst: str) -> list[dict[str, object]]:
    result = dpproxy_in_process(
        "audit",
        "list",
        "--analyst",
        analyst,
        "--limit",
        "1000",
        "--json",
        "--config",
        str(server.config),
    )
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    return [r for r in records if r["decision"] != "admin"]  # the analysts' own attempts


def test_psycopg_count_is_noisy_near_truth_with_notice(
    server: RunningServer, demo_dir: Path
) -> None:
    truth = bounded_visit_count(demo_dir / "demo.duckdb")
    notices: list[str] = []
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        conn.add_notice_handler(
            lambda d: notices.append(f"{d.message_primary} | {d.message_detail}")
        )
        cur = conn.execute("SELECT COUNT(*) FROM visits")
        assert cur.description is not None and cur.description[0].name == "count"
        answers = [cur.fetchone()[0] for _ in range(1)]  # type: ignore[index]
        for _ in range(4):
            row = conn.execute("SELECT COUNT(*) FROM visits").fetchone()
            assert row is not None
            answers.append(row[0])
    # ε=1, sensitivity 30: the noise's scale is 30; ±600 is 20 scales (p < 1e-8).
    assert all(abs(a - truth) < 600 for a in answers), (answers, truth)
    assert len(set(answers)) > 1, "five answers without fresh noise"
    assert len(notices) == 5
    assert "this answer cost ε=1" in notices[0] and "alice has ε=" in notices[0]
    assert "95% confidence of the noise: COUNT(*) ±" in notices[0]


def test_psycopg_transaction_and_session_settings(server: RunningServer) -> None:
    with psycopg.connect(server.dsn("alice")) as conn:  # psycopg sends BEGIN
        conn.execute("SET dpproxy.epsilon = 0.25")
        shown = conn.execute("SHOW dpproxy.epsilon").fetchone()
        assert shown == ("0.25",)
        row = conn.execute(
            "SELECT COUNT(*), SUM(cost), AVG(length_of_stay) FROM visits "
            "WHERE department = 'Cardiology'"
        ).fetchone()
        assert row is not None and isinstance(row[0], int) and isinstance(row[1], float)
        assert 0 <= row[2] <= 30
        conn.commit()
    assert audit(server, "alice")[-1]["epsilon"] == "0.25"


def test_set_local_ends_with_the_transaction(server: RunningServer) -> None:
    """After BEGIN; SET LOCAL dpproxy.epsilon = 0.5; COMMIT the next query costs ε=1 again."""
    notices: list[tuple[str, str | None, str]] = []
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        conn.add_notice_handler(
            lambda d: notices.append((d.severity, d.sqlstate, d.message_primary or ""))
        )
        with conn.transaction():  # BEGIN ... COMMIT
            conn.execute("SET LOCAL dpproxy.epsilon = 0.5")
            assert conn.execute("SHOW dpproxy.epsilon").fetchone() == ("0.5",)
        assert conn.execute("SELECT COUNT(*) FROM visits").fetchone() is not None
        conn.execute("SET LOCAL dpproxy.epsilon = 0.5")  # outside a transaction: no effect
        conn.execute("BEGIN")
        conn.execute("SET dpproxy.epsilon = 0.25")
        conn.execute("ROLLBACK")
        assert conn.execute("SHOW dpproxy.epsilon").fetchone() == ("1",)
    assert "this answer cost ε=1;" in notices[0][2], notices
    warning = ("WARNING", "25P01", "SET LOCAL can only be used in transaction blocks")
    assert notices[1:] == [warning]
    assert audit(server, "alice")[-1]["epsilon"] == "1"


def test_psql_binary_shows_answer_and_notice(server: RunningServer) -> None:
    result = server.psql("alice", "SELECT COUNT(*) FROM patients")
    assert result.returncode == 0, result.stderr
    assert "count" in result.stdout and "(1 row)" in result.stdout
    assert "NOTICE:  dpproxy: this answer cost ε=1" in result.stderr
    assert "DETAIL:  95% confidence of the noise" in result.stderr


def test_rejected_query_costs_nothing_and_is_audited(server: RunningServer) -> None:
    before = spent(server, "alice")
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.FeatureNotSupported) as caught:
            conn.execute("SELECT * FROM visits")
        assert "aggregates only" in str(caught.value)
        assert conn.execute("SHOW dpproxy.epsilon").fetchone() == ("1",)  # still usable
    result = server.psql("alice", "SELECT * FROM patients")
    assert result.returncode != 0 and "ERROR:  SELECT * would return individual rows" in (
        result.stderr
    )
    assert spent(server, "alice") == before
    decisions = [(r["decision"], r["sql"], r["epsilon"]) for r in audit(server, "alice")[-2:]]
    assert decisions == [
        ("rejected", "SELECT * FROM visits", "0"),
        ("rejected", "SELECT * FROM patients", "0"),
    ]


def test_budget_runs_out_and_refusal_is_audited(server: RunningServer) -> None:
    with psycopg.connect(server.dsn("bob"), autocommit=True) as conn:
        answered = 0
        with pytest.raises(psycopg.Error) as caught:
            for _ in range(10):
                conn.execute("SELECT COUNT(*) FROM visits").fetchone()
                answered += 1
    assert answered == 6  # 6 x 0.5 = 3 = bob's whole budget
    assert caught.value.sqlstate == "53400"
    assert "exhausted" in str(caught.value) and "bob" in str(caught.value)
    assert spent(server, "bob") == "3"
    records = audit(server, "bob")
    assert [r["decision"] for r in records] == ["accepted"] * 6 + ["over_budget"]
    assert records[-1]["epsilon"] == "0" and records[-1]["remaining"] == "0"


def test_wrong_password_is_refused(server: RunningServer) -> None:
    with pytest.raises(psycopg.OperationalError) as caught:
        psycopg.connect(server.dsn("alice", password="wrong"), connect_timeout=10)
    assert "password authentication failed" in str(caught.value)


def test_admin_commands(server: RunningServer) -> None:
    # Its own query: under pytest-xdist, the module's other tests may run in another
    # process, with their own server.
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        conn.execute("SELECT COUNT(*) FROM visits").fetchall()
    # The real `dpproxy` commands, as the admin runs them (spent() and audit() run the
    # same code in this process).
    table = dpproxy("budget", "show", "--config", str(server.config))
    assert table.returncode == 0 and "alice" in table.stdout and "bob" in table.stdout
    listing = dpproxy("audit", "list", "--config", str(server.config))
    assert listing.returncode == 0 and "SELECT COUNT(*) FROM visits" in listing.stdout
    verify = dpproxy("audit", "verify", "--config", str(server.config))
    assert verify.returncode == 0 and "intact" in verify.stdout


def test_group_by_public_domain_with_post_processing(server: RunningServer) -> None:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        cur = conn.execute(
            "SELECT department AS d, COUNT(*) AS n, COUNT(DISTINCT patient_id) AS people, "
            "SUM(cost) / COUNT(*) AS mean FROM visits GROUP BY d ORDER BY d"
        )
        assert [c.name for c in (cur.description or [])] == ["d", "n", "people", "mean"]
        rows = cur.fetchall()
        # Names as PostgreSQL gives them: unquoted aliases folded to lower case, calls
        # named as written (pandas' df["total"] finds its column).
        named = conn.execute(
            'SELECT COUNT(*) AS Total, department AS Dept, COUNT(*) AS "Kept", '
            "var_samp(cost), (AVG(cost))::numeric(10, 2) FROM visits GROUP BY department"
        )
        assert [c.name for c in (named.description or [])] == [
            "total",
            "dept",
            "Kept",
            "var_samp",
            "avg",
        ]
        assert [r[0] for r in rows] == [
            "Cardiology",
            "Emergency",
            "General Medicine",
            "Neurology",
            "Obstetrics",
            "Oncology",
            "Orthopedics",
            "Pediatrics",
        ]  # every value of the public domain, in the analyst's order
        assert all(isinstance(r[1], int) and r[1] >= 0 for r in rows)
        top = conn.execute(
            "SELECT CASE WHEN length_of_stay > 0 THEN 'inpatient' ELSE 'outpatient' END AS k, "
            "COUNT(*) FILTER (WHERE cost > 1000) FROM visits GROUP BY 1 "
            "HAVING COUNT(*) >= 0 ORDER BY 2 DESC LIMIT 1"
        ).fetchall()
        assert len(top) == 1 and top[0][0] in ("inpatient", "outpatient")
        # Window functions run over the released rows: shares of the noisy total, ranks.
        cur = conn.execute(
            "SELECT department, COUNT(*) AS n, 100.0 * COUNT(*) / SUM(COUNT(*)) OVER () AS pct, "
            "RANK() OVER (ORDER BY COUNT(*) DESC) AS r FROM visits GROUP BY department "
            "ORDER BY r, department"
        )
        shares = cur.fetchall()
        assert [c.name for c in (cur.description or [])] == ["department", "n", "pct", "r"]
        assert len(shares) == 8 and sum(float(r[2]) for r in shares) == pytest.approx(100.0)
        total = sum(r[1] for r in shares)
        assert all(float(r[2]) == pytest.approx(100.0 * r[1] / total) for r in shares)
        ranks = [r[3] for r in shares]
        assert ranks == sorted(ranks) and ranks[0] == 1
        assert all(1 + sum(o[1] > r[1] for o in shares) == r[3] for r in shares)
        # Keys from the data need δ (partition selection): refused when the session has none.
        conn.execute("SET dpproxy.delta = 0")
        with pytest.raises(psycopg.errors.FeatureNotSupported) as caught:
            conn.execute("SELECT zip3, COUNT(*) FROM patients GROUP BY zip3")
        assert "domain" in str(caught.value)
        conn.execute("RESET dpproxy.delta")


def test_group_by_answers_are_near_the_truth(server: RunningServer, demo_dir: Path) -> None:
    with duckdb.connect(str(demo_dir / "demo.duckdb"), read_only=True) as conn:
        truth = dict(conn.execute("SELECT sex, COUNT(*) FROM patients GROUP BY sex").fetchall())
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        got = dict(conn.execute("SELECT sex, COUNT(*) FROM patients GROUP BY sex").fetchall())
    # ε=1, one row and one group per patient: noise scale 1, so ±30 is 30 scales.
    assert set(got) == {"F", "M"}
    assert all(abs(got[s] - truth[s]) <= 30 for s in got), (got, truth)
