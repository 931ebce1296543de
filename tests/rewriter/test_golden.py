"""Golden SQL fixtures: the rewriter's output for each dialect, run on DuckDB and PostgreSQL.

Each file in tests/fixtures/rewriter holds an input query and the expected SQL per dialect.
Set DPPROXY_UPDATE_GOLDEN=1 to rewrite the expected SQL after a deliberate change, and
review the diff.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import psycopg
import pytest

from rewriter import PlanRequest, plan
from tests.rewriter import reference
from tests.rewriter.tables import SAMPLE_ROWS, catalog, duckdb_with, load_postgres

FIXTURES = Path(__file__).parent.parent / "fixtures" / "rewriter"
SECTION = re.compile(r"^-- (input|duckdb|postgres)\s*$", re.MULTILINE)

# What each fixture's bounded query must return on SAMPLE_ROWS, computed independently.
EXPECTED = {
    "count_star": [reference.count_rows(SAMPLE_ROWS)],
    "shared_measurements": [
        reference.count_values(SAMPLE_ROWS, 3),
        reference.sum_cost_steps(SAMPLE_ROWS),
    ],
    "where_alias": [
        reference.count_rows(
            SAMPLE_ROWS, lambda r: r[2] == "A" and r[4] is not None and 1 <= r[4] <= 5
        )
    ],
    "integer_sum": [reference.sum_stay(SAMPLE_ROWS, lambda r: r[3] is not None or r[2] in ("B",))],
    "where_functions": [
        reference.sum_stay(SAMPLE_ROWS, lambda r: r[2].lower().startswith("a")),
        reference.count_values(SAMPLE_ROWS, 4, lambda r: r[2].lower().startswith("a")),
    ],
}


def load(path: Path) -> dict[str, str]:
    parts = SECTION.split(path.read_text())
    return {parts[i]: parts[i + 1].strip() for i in range(1, len(parts), 2)}


def fixture_names() -> list[str]:
    return sorted(p.stem for p in FIXTURES.glob("*.sql"))


def test_every_fixture_has_an_expected_answer() -> None:
    assert fixture_names() == sorted(EXPECTED)


@pytest.mark.parametrize("name", fixture_names())
@pytest.mark.parametrize("dialect", ["duckdb", "postgres"])
def test_rewrite_matches_golden(name: str, dialect: str) -> None:
    path = FIXTURES / f"{name}.sql"
    sections = load(path)
    schema = "main" if dialect == "duckdb" else "public"
    produced = plan(sections["input"], catalog(schema), PlanRequest(1.0, dialect)).sql  # type: ignore[arg-type]
    if os.environ.get("DPPROXY_UPDATE_GOLDEN") == "1":
        sections[dialect] = produced
        path.write_text(
            "".join(f"-- {k}\n{sections.get(k, '')}\n" for k in ("input", "duckdb", "postgres"))
        )
    assert produced == sections[dialect]


@pytest.mark.parametrize("name", fixture_names())
def test_golden_runs_on_duckdb(name: str) -> None:
    sql = load(FIXTURES / f"{name}.sql")["duckdb"]
    row = duckdb_with(SAMPLE_ROWS).execute(sql).fetchall()
    assert [int(v) for v in row[0]] == EXPECTED[name]


@pytest.mark.postgres
@pytest.mark.parametrize("name", fixture_names())
def test_golden_runs_on_postgres(name: str, pg_dsn: str, pg_schema: str) -> None:
    load_postgres(pg_dsn, pg_schema, SAMPLE_ROWS)
    sql = load(FIXTURES / f"{name}.sql")["postgres"]
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(f'SET search_path = "{pg_schema}"')
        # The fixture names schema "public"; run it against the test schema instead.
        row = conn.execute(sql.replace('"public".', f'"{pg_schema}".')).fetchall()
    assert [int(v) for v in row[0]] == EXPECTED[name]
