"""Keys that differ in the database but not once released (decimals beyond a double's
precision, -0.0 and 0.0) make one cell. A count of distinct persons keeps the larger of
the merged counts: added, one person in three merged groups moved the cell by 3, where
Gaussian noise assumes at most 1 per cell (an L2 change of 3 against sqrt(3); review)."""

from __future__ import annotations

import duckdb

from proxy.backends import SCHEMA_QUERY, column_digits, column_types, group_declared
from rewriter import ColumnPolicy, PlanRequest, TablePolicy, build_catalog, plan
from tests.rewriter.coupling import in_key_order
from tests.rewriter.noise import ZeroNoise

SCORES = ("0.100000000000000001", "0.100000000000000002", "0.100000000000000003")


def test_a_count_of_persons_in_merged_cells_keeps_the_larger_count() -> None:
    conn = duckdb.connect()
    conn.execute("CREATE TABLE m (patient_id BIGINT, score DECIMAL(20,18), stay INTEGER)")
    rows = [(p, score, 1) for p in range(1, 51) for score in SCORES]
    conn.executemany("INSERT INTO m VALUES (?, ?, ?)", rows)
    declared = group_declared(conn.execute(SCHEMA_QUERY.format(placeholder="'main'")).fetchall())
    policy = TablePolicy(
        privacy_unit="patient_id",
        max_rows_per_unit=3,
        max_groups_per_unit=3,
        columns={"stay": ColumnPolicy(lower=0, upper=5)},
    )
    catalog = build_catalog(
        column_types(declared), {"m": policy}, schema="main", digits=column_digits(declared)
    )
    request = PlanRequest(1.0, mechanism="gaussian", delta=1e-6)
    made = plan(
        "SELECT score, COUNT(DISTINCT patient_id), SUM(stay) FROM m GROUP BY score",
        catalog,
        request,
    )
    exact = conn.execute(in_key_order(made)).fetchall()
    assert len(exact) == 3  # three groups in the database
    released = made.release(exact, ZeroNoise())
    assert len(released.rows) == 1  # one cell once released
    (score, persons, total) = released.rows[0]
    assert float(score) == 0.1
    # 50 persons (not 150); the sum adds up every row: 150 rows of stay 1.
    assert persons == 50 and total == 150
