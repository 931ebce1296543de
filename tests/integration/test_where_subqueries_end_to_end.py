"""Subqueries in WHERE through the real server, on the demo data, with psycopg: a semi-join
with IN and one with EXISTS, on DuckDB and PostgreSQL; answers near the exact bounded
values computed straight from the demo database."""

from __future__ import annotations

from pathlib import Path

import duckdb
import psycopg
import pytest

from tests.integration.server import RunningServer

pytestmark = pytest.mark.integration

PATIENTS = 1_000
BOUND = 30  # visits.max_rows_per_unit in the demo configuration

IN_QUERY = (
    "SELECT COUNT(*) FROM visits WHERE patient_id IN "
    "(SELECT patient_id FROM patients WHERE birth_year < 1960)"
)
EXISTS_QUERY = (
    "SELECT COUNT(*) FROM visits v WHERE EXISTS "
    "(SELECT 1 FROM patients p WHERE p.patient_id = v.patient_id AND p.sex = 'F')"
)
TRUTH = {
    IN_QUERY: "SELECT SUM(LEAST(n, 30)) FROM (SELECT v.patient_id, COUNT(*) AS n FROM visits v "
    "JOIN patients p ON p.patient_id = v.patient_id WHERE p.birth_year < 1960 "
    "GROUP BY v.patient_id)",
    EXISTS_QUERY: "SELECT SUM(LEAST(n, 30)) FROM (SELECT v.patient_id, COUNT(*) AS n FROM "
    "visits v JOIN patients p ON p.patient_id = v.patient_id WHERE p.sex = 'F' "
    "GROUP BY v.patient_id)",
}


def truth(database: Path, sql: str) -> int:
    with duckdb.connect(str(database), read_only=True) as conn:
        row = conn.execute(sql).fetchone()
    assert row is not None and row[0] is not None
    return int(row[0])


@pytest.mark.parametrize("query", [IN_QUERY, EXISTS_QUERY])
def test_semi_join_answer_is_near_the_bounded_truth(
    server: RunningServer, demo_dir: Path, query: str
) -> None:
    exact = truth(demo_dir / "demo.duckdb", TRUTH[query])
    everyone = truth(demo_dir / "demo.duckdb", "SELECT SUM(LEAST(n, 30)) FROM "
                     "(SELECT COUNT(*) AS n FROM visits GROUP BY patient_id)")  # fmt: skip
    assert 0 < exact < everyone  # the subquery filters: a real test of the semi-join
    notices: list[str] = []
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        row = conn.execute(query).fetchone()
    assert row is not None
    # ε = 1 (alice's default), sensitivity 30: ±600 is 20 noise scales (p < 1e-8).
    assert abs(row[0] - exact) < 20 * BOUND, (row[0], exact)
    assert any("this answer cost ε=1" in n for n in notices), notices


def test_scalar_subquery_over_protected_data_is_refused(server: RunningServer) -> None:
    sql = "SELECT COUNT(*) FROM visits WHERE cost > (SELECT AVG(cost) FROM visits)"
    with (
        psycopg.connect(server.dsn("bob"), autocommit=True) as conn,
        pytest.raises(psycopg.errors.FeatureNotSupported) as caught,
    ):
        conn.execute(sql)
    assert "used as a value" in str(caught.value)
    assert caught.value.diag.message_hint is not None
    assert "paste the noisy value" in caught.value.diag.message_hint
