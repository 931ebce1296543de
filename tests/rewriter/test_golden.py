"""Golden SQL fixtures: the rewriter's output for each dialect, run on DuckDB and PostgreSQL.

Each file in tests/fixtures/rewriter holds an input query and the expected SQL per dialect.
Set DPPROXY_UPDATE_GOLDEN=1 to rewrite the expected SQL after a deliberate change, and
review the diff.
"""

from __future__ import annotations

import math
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


def _level(row: reference.Row) -> object:
    cost = row[3]
    if cost is None:
        return "low"
    return "high" if math.isnan(cost) or cost > 20 else "low"  # SQL: NaN is above all numbers


def _bucket(row: reference.Row) -> object:
    stay = row[4]
    if stay is None:
        return None
    return 0 if stay < 0 else 3 if stay >= 10 else stay // 5 + 1


SEX = {1: "F", 2: "M", 3: "F", 5: "M"}  # tests.rewriter.tables.PATIENTS
YEAR = {1: 1950, 2: 1990, 3: 2001, 5: 1970}


def joined_by_sex(sex: str) -> list[object]:
    """visits ⋈ patients: [sex, COUNT(*), SUM(birth_year), COUNT(birth_year)] bounded per
    patient (3 visits x 1 patient row; a patient's sum clamped to 3 x 2025)."""
    visits: dict[int, int] = {}
    for row in SAMPLE_ROWS:
        if SEX.get(row[1]) == sex:
            visits[row[1]] = visits.get(row[1], 0) + 1
    return [
        sex,
        sum(min(n, 3) for n in visits.values()),
        sum(min(n * YEAR[p], 3 * 2025) for p, n in visits.items()),
        sum(min(n, 3) for n in visits.values()),
    ]


# What each fixture's bounded query must return on SAMPLE_ROWS, computed independently:
# one list of values per group present, keys first (sorted), then one total per measurement.
EXPECTED: dict[str, list[list[object]]] = {
    "count_star": [[reference.count_rows(SAMPLE_ROWS)]],
    "group_by_domain": [
        [
            d,
            reference.count_rows(SAMPLE_ROWS, lambda r, d=d: r[2] == d),
            reference.sum_stay(SAMPLE_ROWS, lambda r, d=d: r[2] == d),
        ]
        for d in ("A", "B")
    ],
    "group_by_case_filter": [
        [
            level,
            reference.count_rows(
                SAMPLE_ROWS, lambda r, v=level: _level(r) == v and r[4] is not None and r[4] >= 2
            ),
            reference.count_units(SAMPLE_ROWS, lambda r, v=level: _level(r) == v),
        ]
        for level in ("high", "low")
    ],
    "width_bucket": [
        [b, reference.count_rows(SAMPLE_ROWS, lambda r, b=b: _bucket(r) == b)] for b in (1, 3, None)
    ],
    "join_protected_on_unit": [joined_by_sex("F"), joined_by_sex("M")],
    # department B is listed twice in the lookup: its visits count twice, then are clamped.
    "join_public_lookup": [
        [1, reference.count_rows(SAMPLE_ROWS, lambda r: r[2] == "A")],
        [2, reference.count_rows([r for r in SAMPLE_ROWS if r[2] == "B"] * 2)],
    ],
    "variance": [
        [
            d,
            reference.sum_stay(SAMPLE_ROWS, lambda r, d=d: r[2] == d),
            reference.count_values(SAMPLE_ROWS, 4, lambda r, d=d: r[2] == d),
            reference.sum_stay_squares(SAMPLE_ROWS, lambda r, d=d: r[2] == d),
        ]
        for d in ("A", "B")
    ],
    # One row per patient: n = min(visits, 3); SUM(n), COUNT(n) and COUNT(*) over patients.
    "subquery_per_unit": [
        [
            reference.count_rows(SAMPLE_ROWS),
            reference.count_units(SAMPLE_ROWS),
            reference.count_units(SAMPLE_ROWS),
        ]
    ],
    # cost >= 0 is false for NaN? No: NaN >= 0 is true in SQL (NaN is above all numbers).
    "cte_inline": [
        [
            reference.sum_stay(
                SAMPLE_ROWS,
                lambda r: r[2] == "A" and r[3] is not None and (math.isnan(r[3]) or r[3] >= 0),
            )
        ]
    ],
    # Patient 1: prescriptions 1-4 (4 rows, clamped to 2; doses 5+8+1+7 = 21, clamped to
    # 2 x 8 = 16); patient 3: prescriptions 5, 6 (2 rows, doses 5). Visit 99 has no patient.
    "unit_path_hidden_join": [[2 + 2, 16 + 5]],
    # By department (2 groups per patient allowed): patient 1 has 3 rows in A (clamped to
    # 2) and 1 in B; patient 3 has 2 in B. Joining visits, the parent, multiplies nothing.
    "unit_path_explicit_join": [["A", 2], ["B", 1 + 2]],
    "shared_measurements": [
        [reference.count_values(SAMPLE_ROWS, 3), reference.sum_cost_steps(SAMPLE_ROWS)]
    ],
    "where_alias": [
        [
            reference.count_rows(
                SAMPLE_ROWS, lambda r: r[2] == "A" and r[4] is not None and 1 <= r[4] <= 5
            )
        ]
    ],
    "integer_sum": [
        [reference.sum_stay(SAMPLE_ROWS, lambda r: r[3] is not None or r[2] in ("B",))]
    ],
    "where_functions": [
        [
            reference.sum_stay(SAMPLE_ROWS, lambda r: r[2].lower().startswith("a")),
            reference.count_values(SAMPLE_ROWS, 4, lambda r: r[2].lower().startswith("a")),
        ]
    ],
}


def normalized(rows: list[tuple[object, ...]]) -> list[list[object]]:
    """Exact totals as ints (PostgreSQL returns Decimal), keys as they are; sorted."""

    def value(v: object) -> object:
        if isinstance(v, str) or v is None:
            return v
        return int(v)  # type: ignore[call-overload]

    return sorted(([value(v) for v in row] for row in rows), key=repr)


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
    rows = duckdb_with(SAMPLE_ROWS).execute(sql).fetchall()
    assert normalized(rows) == sorted(EXPECTED[name], key=repr)


@pytest.mark.postgres
@pytest.mark.parametrize("name", fixture_names())
def test_golden_runs_on_postgres(name: str, pg_dsn: str, pg_schema: str) -> None:
    load_postgres(pg_dsn, pg_schema, SAMPLE_ROWS)
    sql = load(FIXTURES / f"{name}.sql")["postgres"]
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(f'SET search_path = "{pg_schema}"')
        # The fixture names schema "public"; run it against the test schema instead.
        rows = conn.execute(sql.replace('"public".', f'"{pg_schema}".')).fetchall()
    assert normalized(rows) == sorted(EXPECTED[name], key=repr)
