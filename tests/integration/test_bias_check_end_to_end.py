"""SET dpproxy.bias_check = on through the real server on the demo data, with psycopg and
psql, on DuckDB and PostgreSQL.

The demo's visits.cost is declared in [0, 20000] but about 12% of its 1,000 patients have
a visit costing more (120 of them), and about 20% visit more than 3 departments (207, over
max_groups_per_unit = 3). At ε = 5 each of the two checks of a SUM(cost) by department
spends ε = 0.25 (noise of scale 4, flagging above about 10): missing either flag would need
noise below -100, a probability under 1e-11. The checks come out of the query's ε: the
charge is the same with and without them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest

from tests.integration.server import RunningServer

pytestmark = pytest.mark.integration

PATIENTS = 1_000
DIRECTORY_PREFIX = "bias-"
EPSILON = "5"  # alice's per-query cap in the test configuration
BY_DEPARTMENT = "SELECT department, SUM(cost) AS total FROM visits GROUP BY department"
CUT = "persons with more than 30 row(s) in all groups together, or more than 3 group(s)"
CLAMPED = "persons with a value of visits.cost outside its declared bounds [0, 20000]"


def ask(conn: psycopg.Connection[Any], sql: str) -> tuple[list[tuple[Any, ...]], list[str]]:
    """The rows of ``sql`` and the NOTICEs it raised (message and detail)."""
    notices: list[str] = []

    def keep(diagnostic: psycopg.errors.Diagnostic) -> None:
        notices.append(f"{diagnostic.message_primary}\n{diagnostic.message_detail}")

    conn.add_notice_handler(keep)
    try:
        rows = conn.execute(sql).fetchall()
    finally:
        conn.remove_notice_handler(keep)
    return rows, notices


def test_demo_data_has_clamped_and_cut_persons(demo_dir: Path) -> None:
    """The premise of the flags below: many persons concerned by each check."""
    with duckdb.connect(str(demo_dir / "demo.duckdb"), read_only=True) as conn:
        clamped = conn.execute(
            "SELECT COUNT(DISTINCT patient_id) FROM visits WHERE cost > 20000 OR cost < 0"
        ).fetchone()
        cut = conn.execute(
            "SELECT COUNT(*) FROM (SELECT patient_id FROM visits GROUP BY 1 "
            "HAVING COUNT(DISTINCT department) > 3 OR COUNT(*) > 30)"
        ).fetchone()
    assert clamped is not None and clamped[0] >= 100
    assert cut is not None and cut[0] >= 100


def test_checks_in_notice_same_charge(server: RunningServer) -> None:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        conn.execute(f"SET dpproxy.epsilon = {EPSILON}")
        _, unchecked = ask(conn, BY_DEPARTMENT)
        conn.execute("SET dpproxy.bias_check = on")
        assert conn.execute("SHOW dpproxy.bias_check").fetchone() == ("on",)
        rows, checked = ask(conn, BY_DEPARTMENT)
        history = conn.execute("SELECT * FROM dpproxy.my_queries LIMIT 2").fetchall()
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="bias_check"):
            conn.execute("SET dpproxy.bias_check = perhaps")
    assert len(rows) == 8  # the public domain of departments
    (plain,) = unchecked
    (notice,) = checked
    assert "Bias check" not in plain
    assert "Bias check (10% of this query's ε): about " in notice
    assert f"{CUT}, whose rows were not all counted: may be biased" in notice
    assert f"{CLAMPED}, clamped or dropped: may be biased" in notice
    # The checks come out of the query's ε: the same charge, in the NOTICE and the ledger.
    for text in (plain, notice):
        assert f"this answer cost ε={EPSILON};" in text, text
    assert [(row[3], row[4], row[6]) for row in history] == [
        (BY_DEPARTMENT, "accepted", 5),
        (BY_DEPARTMENT, "accepted", 5),
    ]


def test_bias_columns_are_boolean(server: RunningServer) -> None:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        conn.execute(f"SET dpproxy.epsilon = {EPSILON}")
        conn.execute("SET dpproxy.report = columns")
        conn.execute("SET dpproxy.bias_check = true")
        cur = conn.execute(BY_DEPARTMENT)  # extended protocol: described, then executed
        assert cur.description is not None
        described = [(c.name, c.type_code) for c in cur.description]
        rows = cur.fetchall()
        conn.execute("RESET dpproxy.bias_check")
        unchecked = conn.execute(BY_DEPARTMENT).fetchall()
    assert described == [
        ("department", 25),
        ("total", 701),
        ("total_ci95", 701),
        ("total_bias", 16),
    ]
    assert len(rows) == 8
    assert all(row[3] is True for row in rows), rows  # one flag per aggregate, every row
    assert all(row[3] is None for row in unchecked), unchecked  # not checked: NULL


def test_psql_shows_the_checks(server: RunningServer) -> None:
    result = server.psql(
        "alice",
        f"SET dpproxy.epsilon = {EPSILON}",
        "SET dpproxy.bias_check = on",
        "SET dpproxy.report = columns",
        BY_DEPARTMENT,
    )
    assert result.returncode == 0, result.stderr
    assert "DETAIL:" in result.stderr and "Bias check (10% of this query's ε)" in result.stderr
    assert "total_bias" in result.stdout
    header, *lines = [line for line in result.stdout.splitlines() if "|" in line]
    assert [cell.strip() for cell in header.split("|")][-1] == "total_bias"
    assert all(line.split("|")[-1].strip() == "t" for line in lines), result.stdout
