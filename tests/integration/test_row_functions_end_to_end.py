"""nullif, left and concat in WHERE, GROUP BY and inside aggregates, through a real
`dpproxy serve` and psycopg on the demo data, on DuckDB and PostgreSQL: answered, the
columns named as PostgreSQL names them, the keys ones the data holds."""

from __future__ import annotations

from pathlib import Path

import duckdb
import psycopg
import pytest

from tests.integration.server import RunningServer

pytestmark = pytest.mark.integration

PATIENTS = 2_000
DIRECTORY_PREFIX = "row-functions-"
DEPARTMENTS = {
    "Cardiology",
    "Emergency",
    "General Medicine",
    "Neurology",
    "Obstetrics",
    "Oncology",
    "Orthopedics",
    "Pediatrics",
}
ROWS_PER_PATIENT = 30  # visits.max_rows_per_unit in the demo configuration


def _truth(demo_dir: Path, sql: str) -> list[tuple[object, ...]]:
    with duckdb.connect(str(demo_dir / "demo.duckdb"), read_only=True) as conn:
        return conn.execute(sql).fetchall()


def test_the_demo_queries_are_answered(server: RunningServer, demo_dir: Path) -> None:
    results: dict[str, tuple[list[str], list[tuple[object, ...]]]] = {}
    queries = {
        "nullif": "SELECT nullif(department, 'Oncology') AS d, COUNT(*) FROM visits GROUP BY 1",
        "left": "SELECT left(zip3, 1) AS region, COUNT(*) FROM patients GROUP BY 1",
        "concat": "SELECT concat(sex, '-', zip3) AS k, COUNT(*) FROM patients GROUP BY 1",
        "where": "SELECT COUNT(*) FROM visits WHERE nullif(length_of_stay, 0) > 2",
        "sum": "SELECT SUM(nullif(cost, 0)) FROM visits",
        "names": "SELECT nullif(department, 'x'), left(department, 3), "
        "concat(department, '!'), COUNT(*) FROM visits GROUP BY 1, 2, 3",
    }
    with psycopg.connect(server.dsn("alice"), autocommit=True) as alice:
        for name, sql in queries.items():
            cur = alice.execute(sql)
            results[name] = ([c.name for c in cur.description or []], cur.fetchall())

    names, rows = results["nullif"]
    assert names == ["d", "count"]
    # department has a public domain, and so has nullif of it: Oncology's visits are NULL.
    assert {r[0] for r in rows} == (DEPARTMENTS - {"Oncology"}) | {None}

    zips = {str(r[0]) for r in _truth(demo_dir, "SELECT DISTINCT zip3 FROM patients")}
    names, rows = results["left"]
    assert names == ["region", "count"]
    assert rows and {r[0] for r in rows} <= {z[:1] for z in zips}
    names, rows = results["concat"]
    assert names == ["k", "count"]
    pairs = _truth(demo_dir, "SELECT DISTINCT sex || '-' || zip3 FROM patients")
    assert {r[0] for r in rows} <= {str(p[0]) for p in pairs}

    names, rows = results["where"]
    assert names == ["count"]
    ((bounded,),) = _truth(
        demo_dir,
        f"SELECT SUM(LEAST(n, {ROWS_PER_PATIENT})) FROM (SELECT patient_id, COUNT(*) AS n "
        "FROM visits WHERE length_of_stay > 2 GROUP BY 1)",
    )
    # Noise of scale 30 (30 rows a patient, ε = 1): ten scales is far beyond a plausible draw.
    assert isinstance(rows[0][0], int) and abs(rows[0][0] - int(str(bounded))) < 300

    names, rows = results["sum"]
    assert names == ["sum"] and isinstance(rows[0][0], float) and rows[0][0] > 0

    names, rows = results["names"]
    assert names == ["nullif", "left", "concat", "count"]
    assert {(r[1], r[2]) for r in rows} <= {(d[:3], d + "!") for d in DEPARTMENTS}
