"""A Python list passed to ``= ANY(%s)`` through psycopg 3, its documented way to pass a
list (proxy.parameter_arrays): ints, floats, texts and dates, sent in text and in binary,
through a real `dpproxy serve` on DuckDB and PostgreSQL. Each noisy count (ε = 5) is near
the true one; a list longer than dpproxy compares with is refused free of charge."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import duckdb
import psycopg
import pytest

from tests.integration.server import RunningServer, dpproxy_in_process

pytestmark = pytest.mark.integration

PATIENTS = 1_000
DIRECTORY_PREFIX = "list-parameters-"
ROWS_PER_PATIENT = 30  # the demo's max_rows_per_unit for visits
LISTS: list[tuple[str, str, list[object]]] = [
    ("length_of_stay = ANY(%s)", "length_of_stay IN (1, 2)", [1, 2]),
    # psycopg binds small integers as int2[]: the query's cast reads them as integers.
    ("length_of_stay = ANY(%s::int[])", "length_of_stay IN (1, 2)", [1, 2]),
    ("length_of_stay = ANY(%s::bigint[])", "length_of_stay IN (3)", [3]),
    ("length_of_stay <> ALL(%s)", "length_of_stay NOT IN (0, 1, 200000)", [0, 1, 200000]),
    (
        "department = ANY(%s)",
        "department IN ('Cardiology', 'Oncology')",
        ["Cardiology", "Oncology"],
    ),
    ("cost >= ANY(%s)", "cost >= 15000.5", [15000.5, 19000.25]),
    (
        "visit_date = ANY(%s)",
        "visit_date IN (DATE '2023-01-02', DATE '2023-01-03')",
        [dt.date(2023, 1, 2), dt.date(2023, 1, 3), None],
    ),
]


def _truth(demo_dir: Path, condition: str) -> int:
    sql = (
        f"SELECT COALESCE(SUM(LEAST(n, {ROWS_PER_PATIENT})), 0) FROM "
        f"(SELECT COUNT(*) AS n FROM visits WHERE {condition} GROUP BY patient_id)"
    )
    with duckdb.connect(str(demo_dir / "demo.duckdb"), read_only=True) as conn:
        row = conn.execute(sql).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_lists_are_compared_with_each_element(
    server: RunningServer, demo_dir: Path, binary: bool
) -> None:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as alice:
        alice.execute("SET dpproxy.epsilon = 5")
        for where, condition, listed in LISTS:
            cur = alice.execute(
                f"SELECT COUNT(*) FROM visits WHERE {where}", (listed,), binary=binary
            )
            (noisy,) = cur.fetchone() or (None,)
            truth = _truth(demo_dir, condition)
            assert isinstance(noisy, int) and abs(noisy - truth) <= 150, (where, noisy, truth)


def test_a_list_too_long_is_refused_free(server: RunningServer) -> None:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as alice:
        before = alice.execute("SELECT * FROM dpproxy.my_budget").fetchone()
        with pytest.raises(psycopg.errors.ProgramLimitExceeded, match="1001 elements"):
            alice.execute(
                "SELECT COUNT(*) FROM visits WHERE length_of_stay = ANY(%s)",
                (list(range(1001)),),
            )
        after = alice.execute("SELECT * FROM dpproxy.my_budget").fetchone()
    assert before == after
    listing = dpproxy_in_process("audit", "list", "--json", "--config", str(server.config))
    records = [json.loads(line) for line in listing.stdout.splitlines()]
    assert not any("1001" in (r["reason"] or "") and r["epsilon"] != "0" for r in records)
