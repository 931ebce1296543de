"""Golden SQL fixtures: the rewriter's output for each dialect, run on DuckDB and PostgreSQL.

Each file in tests/fixtures/rewriter holds an input query and the expected SQL per dialect.
Set DPPROXY_UPDATE_GOLDEN=1 to rewrite the expected SQL after a deliberate change, and
review the diff.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from rewriter import PlanRequest, plan
from tests.rewriter import reference
from tests.rewriter.coupling import in_key_order
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


def joined_with_sex(rows: list[reference.Row]) -> list[reference.Row]:
    """The visits of patients with a patients row (visits ⋈ patients)."""
    return [r for r in rows if r[1] in SEX]


# visits ⋈ patients by (sex, department): each patient's groups in key order, 2 groups and
# 3 rows at most (patient 1: 2 visits in (F, A), then 2 in (F, B) do not fit its rows).
BY_SEX_DEPARTMENT = reference.kept(joined_with_sex(SAMPLE_ROWS), lambda r: (SEX[r[1]], r[2]))


BIRTH_CENTRE = (1900 + 2025) // 2  # AVG measures Σ(birth_year - centre) (measurements)


def joined_by_sex(sex: str) -> list[object]:
    """visits ⋈ patients: [sex, COUNT(*), Σ(birth_year - centre), COUNT(birth_year)] bounded
    per patient (3 visits x 1 patient row; a patient's centred sum over more than 3 joined
    rows is its birth year 3 times, clamped to 3 x [1900, 2025] - centre)."""
    visits: dict[int, int] = {}
    for row in SAMPLE_ROWS:
        if SEX.get(row[1]) == sex:
            visits[row[1]] = visits.get(row[1], 0) + 1
    return [
        sex,
        sum(min(n, 3) for n in visits.values()),
        sum(
            min(
                max(
                    reference.per_value(n * (YEAR[p] - BIRTH_CENTRE), n), 3 * (1900 - BIRTH_CENTRE)
                ),
                3 * (2025 - BIRTH_CENTRE),
            )
            for p, n in visits.items()
        ),
        sum(min(n, 3) for n in visits.values()),
    ]


Value = Callable[[reference.Row], float | None]


def bins(
    rows: list[reference.Row], value: Value, lower: float, inverse: float, count: int
) -> list[int]:
    """Rows per bin, floor(value * inverse - lower * inverse) within [0, count - 1], of rows with
    a finite value; each patient has at most 3 such rows here (so none is dropped at random)."""
    per_patient: dict[int, int] = {}
    counts = [0] * count
    for row in rows:
        v = value(row)
        if v is None or not math.isfinite(v):
            continue
        per_patient[row[1]] = per_patient.get(row[1], 0) + 1
        assert per_patient[row[1]] <= reference.C, "the fixture must not depend on random picks"
        counts[min(max(math.floor(v * inverse - lower * inverse), 0), count - 1)] += 1
    return counts


def clamped_cost(row: reference.Row) -> float | None:
    cost = row[3]
    return None if cost is None or not math.isfinite(cost) else min(max(cost, 0.0), 100.0)


def clamped_stay(row: reference.Row) -> float | None:
    return None if row[4] is None else float(min(max(row[4], 1), 10))


def department(row: reference.Row) -> object:
    return row[2]


def concat_kept(row: reference.Row) -> bool:
    """concat(department, stay) <> 'B12' AND left(department, 1) IN ('A', 'B'): concat
    skips a NULL stay (PostgreSQL's 'A', where || would give NULL and drop the row)."""
    text = row[2] + ("" if row[4] is None else str(row[4]))
    return text != "B12" and row[2][:1] in ("A", "B")


def stay_nullif_2(row: reference.Row) -> reference.Row:
    """The row with nullif(stay, 2) of stay clamped to [1, 10] (inside SUM, columns are
    clamped first): visit 5's 2 is NULL, visit 2's 0 (clamped to 1) is not."""
    stay = row[4]
    return (*row[:4], None if stay is not None and min(max(stay, 1), 10) == 2 else stay)


# The rows of the groups each patient keeps, its groups in key order (tests.rewriter.coupling):
# patient 1 has 2 visits in A and 2 in B, so with 3 rows per patient B is dropped.
BY_DEPARTMENT = reference.kept(SAMPLE_ROWS, department)
# Joined with departments, B listed twice: patient 1 has 2 rows on floor 1 (A) and 2 x 2 on
# floor 2 (B, counted as 3), so floor 2 is dropped; patient 3 keeps its 2 rows on floor 2.
BY_FLOOR = reference.kept(
    [r for r in SAMPLE_ROWS if r[2] == "A"] + [r for r in SAMPLE_ROWS if r[2] == "B"] * 2,
    lambda r: 1 if r[2] == "A" else 2,
)


def cut_patients() -> set[int]:
    """Patients with more than 3 rows or more than 2 departments (tables.POLICY)."""
    rows: dict[int, int] = {}
    groups: dict[int, set[object]] = {}
    for row in SAMPLE_ROWS:
        rows[row[1]] = rows.get(row[1], 0) + 1
        groups.setdefault(row[1], set()).add(row[2])
    return {p for p in rows if rows[p] > 3 or len(groups[p]) > 2}


def outside_patients(column: int, lower: float, upper: float) -> set[int]:
    """Patients with a non-NULL value outside [lower, upper] (NaN and infinities too)."""
    found = set()
    for row in SAMPLE_ROWS:
        value = row[column]
        if value is not None and (math.isnan(value) or not lower <= value <= upper):
            found.add(row[1])
    return found


def checked_first(group: str, checks: list[set[int]]) -> list[int]:
    """Per check, its patients whose first department in key order is ``group``."""
    first = {}
    for row in sorted(SAMPLE_ROWS, key=lambda r: r[2]):
        first.setdefault(row[1], row[2])
    return [sum(1 for p in patients if first[p] == group) for patients in checks]


# What each fixture's bounded query must return on SAMPLE_ROWS, computed independently:
# one list of values per group present, keys first (sorted), then one total per measurement.
# With GROUP BY, the query runs with each patient's groups in key order (in_key_order).
EXPECTED: dict[str, list[list[object]]] = {
    "count_star": [[reference.count_rows(SAMPLE_ROWS)]],
    # Keys from the data (partition selection): the groups present, then COUNT(*) and the
    # count of patients per group twice (COUNT(DISTINCT patient_id), and partition
    # selection's unit count); each patient has at most 2 stays <= 3: no random drop.
    "group_by_data_key": [
        [
            stay,
            reference.count_rows(SAMPLE_ROWS, lambda r, s=stay: r[4] == s),
            reference.count_units(SAMPLE_ROWS, lambda r, s=stay: r[4] == s),  # COUNT(DISTINCT)
            reference.count_units(SAMPLE_ROWS, lambda r, s=stay: r[4] == s),  # for selection
        ]
        for stay in (0, 1, 2, 3)
    ],
    # SELECT DISTINCT: the GROUP BY of its select list, keys alone: the groups present and
    # partition selection's count of patients per group.
    "distinct_keys": [
        [stay, reference.count_units(SAMPLE_ROWS, lambda r, s=stay: r[4] == s)]
        for stay in (0, 1, 2, 3)
    ],
    # A public key (department) with a key from the data (stay): groups from the data,
    # departments still restricted to their domain.
    "group_by_mixed_keys": [
        [
            d,
            stay,
            reference.count_rows(SAMPLE_ROWS, lambda r, d=d, s=stay: (r[2], r[4]) == (d, s)),
            reference.count_units(SAMPLE_ROWS, lambda r, d=d, s=stay: (r[2], r[4]) == (d, s)),
            reference.count_units(SAMPLE_ROWS, lambda r, d=d, s=stay: (r[2], r[4]) == (d, s)),
        ]
        for d, stay in (("A", 1), ("A", 2), ("A", 3), ("B", 1))
    ],
    # Metabase's pivot table: the constant key ABS(0) splits no rows (one public group),
    # computed after the release; the departments as in group_by_domain.
    "group_by_constant_key": [
        [d, reference.count_rows(BY_DEPARTMENT, lambda r, d=d: r[2] == d)] for d in ("A", "B")
    ],
    "group_by_domain": [
        [
            d,
            reference.count_rows(BY_DEPARTMENT, lambda r, d=d: r[2] == d),
            reference.sum_stay(BY_DEPARTMENT, lambda r, d=d: r[2] == d),
        ]
        for d in ("A", "B")
    ],
    # Patient 1: 1 visit "high" and 3 "low": "high" first, then "low" does not fit.
    "group_by_case_filter": [
        [
            level,
            reference.count_rows(
                reference.kept(SAMPLE_ROWS, _level),
                lambda r, v=level: _level(r) == v and r[4] is not None and r[4] >= 2,
            ),
            reference.count_units(
                reference.kept(SAMPLE_ROWS, _level), lambda r, v=level: _level(r) == v
            ),
        ]
        for level in ("high", "low")
    ],
    # Patient 1: 3 visits in bucket 1 fill its rows; its visit in bucket 3 is dropped.
    "width_bucket": [
        [
            b,
            reference.count_rows(
                reference.kept(SAMPLE_ROWS, _bucket), lambda r, b=b: _bucket(r) == b
            ),
        ]
        for b in (1, None)
    ],
    "join_protected_on_unit": [joined_by_sex("F"), joined_by_sex("M")],
    # Partials summed per patient before patients is joined (eager_partials): one group per
    # patient (its sex); patient 3 is born in 2001.
    "eager_upper_key": [
        [
            s,
            reference.count_rows(
                SAMPLE_ROWS,
                lambda r, s=s: SEX.get(r[1]) == s and YEAR[r[1]] < 2000 and (r[4] or 0) > 0,
            ),
            reference.sum_stay(
                SAMPLE_ROWS,
                lambda r, s=s: SEX.get(r[1]) == s and YEAR[r[1]] < 2000 and (r[4] or 0) > 0,
            ),
        ]
        for s in ("F", "M")
    ],
    # A key from each side: patients joined to the sums per patient and department.
    "eager_mixed_keys": [
        [
            s,
            d,
            reference.count_rows(BY_SEX_DEPARTMENT, lambda r, k=(s, d): (SEX[r[1]], r[2]) == k),
            reference.sum_stay(BY_SEX_DEPARTMENT, lambda r, k=(s, d): (SEX[r[1]], r[2]) == k),
        ]
        for s, d in sorted({(SEX[r[1]], r[2]) for r in BY_SEX_DEPARTMENT})
    ],
    # LEFT JOIN patients: patient 1's 4 visits (F, clamped to 3) and patient 3's 1; patient
    # 2's 2 (M); patient 4 has no patients row: its visit is kept, in the NULL cell, where
    # COUNT(DISTINCT p.patient_id) counts no one (p.patient_id is NULL).
    "left_join_protected_on_unit": [["F", 3 + 1, 2], ["M", 2, 1], [None, 1, 0]],
    # LEFT JOIN prescriptions (3 visits x 2 prescriptions per patient, 2 groups): patient
    # 1's visits 1 (2 prescriptions, doses 5 and 10 clamped to 8) and 2 (1) in A, 3 (7) and
    # 4 (none) in B; patient 2's 2 visits and patient 4's 1 without any in A; patient 3's
    # visit 7 with 2 (doses 2 and 3) in B.
    "left_join_fk_child": [["A", 3 + 2 + 1, 5 + 8 + 1], ["B", 2 + 2, 7 + 2 + 3]],
    # LEFT JOIN visits ON … AND department = 'A' (2 rows and 2 groups per patient, the
    # patient found through visits joined again): patient 1's prescriptions 1-3 on visits in
    # A (clamped to 2), then its prescription 4 (visit in B: NULL) does not fit its rows;
    # patient 3's 2 prescriptions on visit 7 (B) in NULL. Visit 99 has no patient.
    "left_join_fk_parent": [["A", 2], [None, 2]],
    # department B is listed twice in the lookup: its visits count twice, then are clamped.
    "join_public_lookup": [
        [1, reference.count_rows(BY_FLOOR, lambda r: r[2] == "A")],
        [2, reference.count_rows(BY_FLOOR, lambda r: r[2] == "B")],
    ],
    "variance": [
        [
            d,
            reference.sum_stay(BY_DEPARTMENT, lambda r, d=d: r[2] == d, reference.STAY_CENTRE),
            reference.count_values(BY_DEPARTMENT, 4, lambda r, d=d: r[2] == d),
            reference.sum_stay_squares(
                BY_DEPARTMENT, lambda r, d=d: r[2] == d, reference.STAY_CENTRE
            ),
        ]
        for d in ("A", "B")
    ],
    # One row per patient: n = min(visits, 3) in [0, 3]; AVG(n) measures Σ(n - 1) (centred),
    # then COUNT(n) and COUNT(*) over patients.
    "subquery_per_unit": [
        [
            reference.count_rows(SAMPLE_ROWS) - reference.count_units(SAMPLE_ROWS),
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
    # By department (2 groups and 2 rows per patient): patient 1 has 3 rows in A (clamped to
    # 2: its rows are used up, B is dropped) and 1 in B; patient 3 has 2 in B. Joining
    # visits, the parent, multiplies nothing.
    "unit_path_explicit_join": [["A", 2], ["B", 2]],
    "shared_measurements": [
        [
            reference.count_values(SAMPLE_ROWS, 3),
            reference.sum_cost_steps(SAMPLE_ROWS, centre=reference.COST_CENTRE),
        ]
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
    # 64 bins of width 100/64 over cost's bounds [0, 100]; patient 2's NaN and inf are NULL.
    "quantile_grouped": [
        [
            d,
            reference.count_rows(BY_DEPARTMENT, lambda r, d=d: r[2] == d),
            bins([r for r in BY_DEPARTMENT if r[2] == d], clamped_cost, 0.0, 0.64, 64),
        ]
        for d in ("A", "B")
    ],
    # stay in [1, 10]: one bin per integer; stay * 2 in [2, 20]: one bin per integer.
    "quantile_within_group": [
        [
            bins([r for r in SAMPLE_ROWS if r[0] != 4 and r[2] == "B"], clamped_stay, 0.5, 1.0, 10),
            bins(
                [r for r in SAMPLE_ROWS if r[0] != 4],
                lambda r: None if (s := clamped_stay(r)) is None else 2 * s,
                1.5,
                1.0,
                19,
            ),
        ]
    ],
    "row_functions": [
        [
            reference.count_rows(SAMPLE_ROWS, concat_kept),
            reference.sum_stay([stay_nullif_2(r) for r in SAMPLE_ROWS if concat_kept(r)]),
        ]
    ],
    # department = ANY('{A,B}') is department IN ('A', 'B'); stay <> ALL(ARRAY[0, 12]) is
    # stay <> 0 AND stay <> 12 (NULL for a NULL stay: visit 6 is left out).
    "any_arrays": [
        [reference.count_rows(SAMPLE_ROWS, lambda r: r[4] is not None and r[4] not in (0, 12))]
    ],
    # Constants with casts, as drivers send them: the department LIKE 'A%' (visits 1, 2, 5,
    # 6, 8), costs below 20 'low' (visit 1); (stay > 2)::int = 1 of visit 8 (raw values).
    "cast_constants": [["high", 4, 1], ["low", 1, 0]],
    # to_date, to_timestamp and timestamptz constants as literals: every comparison true.
    "time_constants": [[reference.count_rows(SAMPLE_ROWS)]],
    # Tableau's CONTAINS: strpos of the lowered text (0 where not found).
    "where_strpos": [[reference.count_rows(SAMPLE_ROWS, lambda r: "a" in r[2].lower())]],
    "where_functions": [
        [
            reference.sum_stay(
                SAMPLE_ROWS, lambda r: r[2].lower().startswith("a"), reference.STAY_CENTRE
            ),
            reference.count_values(SAMPLE_ROWS, 4, lambda r: r[2].lower().startswith("a")),
        ]
    ],
    # Subqueries in WHERE (tests.rewriter.tables: departments B is floor 2; patients 1 and
    # 3 are F, patient 1 born before 1960; patient 4 has no patients row).
    "where_in_public": [[reference.count_rows(SAMPLE_ROWS, lambda r: r[2] == "B")]],
    "where_in_unit": [
        [
            reference.count_rows(SAMPLE_ROWS, lambda r: r[1] in (1, 3)),
            reference.sum_stay(SAMPLE_ROWS, lambda r: r[1] in (1, 3)),
        ]
    ],
    "where_not_in_unit": [[reference.count_rows(SAMPLE_ROWS, lambda r: r[1] != 1)]],
    # Only patient 1 has a stay over 10: 2 visits in A, 2 in B (B does not fit its rows).
    "where_exists_correlated": [
        ["A", reference.count_rows(SAMPLE_ROWS, lambda r: r[1] == 1 and r[2] == "A")]
    ],
    "where_not_exists_unit": [[reference.count_rows(SAMPLE_ROWS, lambda r: r[1] == 4)]],
    # Prescriptions 1-3 are on visits 1 and 2 (department A) of patient 1: 3 rows, clamped
    # to 2; doses 5 + 8 (10 clamped) + 1.
    "where_in_fk_path": [[2, 5 + 8 + 1]],
    # Visits with a prescription of dose > 4: 1 and 3, both patient 1's.
    "where_exists_fk_child": [[reference.count_rows(SAMPLE_ROWS, lambda r: r[0] in (1, 3))]],
    # Patients with a visit in a floor-2 department (B): 1 and 3.
    "where_in_join": [[reference.count_rows(SAMPLE_ROWS, lambda r: r[1] in (1, 3))]],
    "where_in_cte": [[reference.count_rows(SAMPLE_ROWS, lambda r: r[1] == 1)]],
    # Joined rows: B is listed twice, so B visits count twice. Patient 1: 2 + 2x2 = 6 rows
    # (clamped to 3), floors 1 + 1 + 4x2 = 10; patient 2: 2 rows, 2; patient 3: 2 rows, 4;
    # patient 4: 1 row, 1.
    "subquery_join_lookup": [[3 + 2 + 2 + 1, 10 + 2 + 4 + 1]],
    # Per F patient, n = min(visits, 3 x 1 rows): patient 1 has 3, patient 3 has 1.
    "subquery_per_unit_join": [[2, 3 + 1]],
    # Bias checks (fixtures named bias_check_*): after the measurements, per group, the
    # patients whose first group (in key order) it is among those with rows cut (patient 1:
    # 4 visits, 3 counted) and with a stay outside [1, 10] (patient 1: stays 0 and 12).
    "bias_check_grouped": [
        [
            d,
            reference.count_rows(BY_DEPARTMENT, lambda r, d=d: r[2] == d),
            reference.sum_stay(BY_DEPARTMENT, lambda r, d=d: r[2] == d),
            *checked_first(d, [cut_patients(), outside_patients(4, 1, 10)]),
        ]
        for d in ("A", "B")
    ],
    # Without GROUP BY: patient 1 is cut; patients 1 (250, -5) and 2 (NaN, inf) have costs
    # outside [0, 100]; patient 1 has stays outside [1, 10].
    "bias_check_total": [
        [
            reference.sum_cost_steps(SAMPLE_ROWS, centre=reference.COST_CENTRE),
            reference.count_values(SAMPLE_ROWS, 3),
            reference.sum_stay(SAMPLE_ROWS),
            len(cut_patients()),
            len(outside_patients(3, 0, 100)),
            len(outside_patients(4, 1, 10)),
        ]
    ],
}


def request(name: str, dialect: str) -> PlanRequest:
    """Fixtures named bias_check_* are planned with SET dpproxy.bias_check = on."""
    return PlanRequest(
        1.0,
        dialect,  # type: ignore[arg-type]
        delta=1e-6,
        bias_check=name.startswith("bias_check"),
    )


def normalized(rows: list[tuple[object, ...]]) -> list[list[object]]:
    """Exact totals as ints (PostgreSQL returns Decimal), keys as they are; sorted."""

    def value(v: object) -> object:
        if isinstance(v, str) or v is None:
            return v
        if isinstance(v, list):  # a quantile's counts per bin
            return [value(c) for c in v]
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
    produced = plan(sections["input"], catalog(schema), request(name, dialect)).sql
    if os.environ.get("DPPROXY_UPDATE_GOLDEN") == "1":
        sections[dialect] = produced
        path.write_text(
            "".join(f"-- {k}\n{sections.get(k, '')}\n" for k in ("input", "duckdb", "postgres"))
        )
    assert produced == sections[dialect]


@pytest.mark.parametrize("name", fixture_names())
def test_golden_runs_on_duckdb(name: str) -> None:
    sections = load(FIXTURES / f"{name}.sql")
    made = plan(sections["input"], catalog("main"), request(name, "duckdb"))
    sql = in_key_order(made, sections["duckdb"])
    rows = duckdb_with(SAMPLE_ROWS).execute(sql).fetchall()
    assert normalized(rows) == sorted(EXPECTED[name], key=repr)


@pytest.mark.postgres
@pytest.mark.parametrize("name", fixture_names())
def test_golden_runs_on_postgres(name: str, pg_dsn: str, pg_schema: str) -> None:
    load_postgres(pg_dsn, pg_schema, SAMPLE_ROWS)
    sections = load(FIXTURES / f"{name}.sql")
    made = plan(sections["input"], catalog("public"), request(name, "postgres"))
    sql = in_key_order(made, sections["postgres"])
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(f'SET search_path = "{pg_schema}"')
        # The fixture names schema "public"; run it against the test schema instead.
        rows = conn.execute(sql.replace('"public".', f'"{pg_schema}".')).fetchall()
    assert normalized(rows) == sorted(EXPECTED[name], key=repr)
