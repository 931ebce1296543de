"""AVG(EXTRACT(year FROM visit_date)) through the real server on the demo data, with
psycopg, on DuckDB and PostgreSQL: the demo declares visit_date's bounds (2020 to 2024),
and the answer lies within those years, near the average computed straight from the demo
database."""

from __future__ import annotations

from pathlib import Path

import duckdb
import psycopg
import pytest

from tests.integration.server import RunningServer

pytestmark = pytest.mark.integration

PATIENTS = 1_000
BOUND = 30  # visits.max_rows_per_unit in the demo configuration


def test_average_visit_year_is_within_the_bounds(server: RunningServer, demo_dir: Path) -> None:
    # The exact bounded average: each patient's visits beyond 30 contribute nothing more,
    # so take the patients with at most 30 visits (nearly all of them).
    with duckdb.connect(str(demo_dir / "demo.duckdb"), read_only=True) as conn:
        row = conn.execute(
            "SELECT AVG(EXTRACT(year FROM visit_date)), COUNT(*) FROM visits WHERE patient_id "
            f"IN (SELECT patient_id FROM visits GROUP BY 1 HAVING COUNT(*) <= {BOUND})"
        ).fetchone()
    assert row is not None
    truth, visits = float(row[0]), int(row[1])
    assert visits > 1_000
    notices: list[str] = []
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(str(d.message_primary)))
        cur = conn.execute("SELECT AVG(EXTRACT(year FROM visit_date)) AS y FROM visits")
        assert cur.description is not None and cur.description[0].name == "y"
        answer = cur.fetchone()
    assert answer is not None and isinstance(answer[0], float)
    assert 2020 <= answer[0] <= 2024
    # The noise of the centred sum has a scale of about 2 x 30 x 2 / ε = 120 years, spread
    # over thousands of visits: a miss by half a year is far beyond any plausible draw.
    assert abs(answer[0] - truth) < 0.5, (answer, truth)
    assert any("this answer cost ε=1" in n for n in notices), notices
