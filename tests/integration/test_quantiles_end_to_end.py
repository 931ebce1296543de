"""Quantiles through a real server: psycopg asks for medians and percentiles of the demo
data, on DuckDB and PostgreSQL, and gets DP estimates near the truth with an honest NOTICE;
MIN and MAX are refused with a suggestion."""

from __future__ import annotations

from pathlib import Path

import duckdb
import psycopg
import pytest

from tests.integration.server import RunningServer

pytestmark = pytest.mark.integration

PATIENTS = 1_000


def truth(database: Path, sql: str) -> list[tuple[object, ...]]:
    with duckdb.connect(str(database), read_only=True) as conn:
        return conn.execute(sql).fetchall()


def test_median_through_psycopg_is_near_the_truth(server: RunningServer, demo_dir: Path) -> None:
    # Each patient's stays, at most 30 of them (a few patients have more: ignore those).
    [(median,)] = truth(
        demo_dir / "demo.duckdb",
        "SELECT MEDIAN(LEAST(GREATEST(length_of_stay, 0), 30)) FROM visits "
        "WHERE patient_id IN (SELECT patient_id FROM visits GROUP BY 1 HAVING COUNT(*) <= 30)",
    )
    notices: list[str] = []
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        conn.add_notice_handler(
            lambda d: notices.append(f"{d.message_primary} | {d.message_detail}")
        )
        cur = conn.execute("SELECT MEDIAN(length_of_stay) AS m FROM visits")
        assert cur.description is not None and cur.description[0].name == "m"
        row = cur.fetchone()
    assert row is not None and isinstance(row[0], float)
    # Stays are whole days: one bin per day, so the answer is a whole number of days.
    assert row[0].is_integer() and 0 <= row[0] <= 30
    # Thousands of visits, the scores' noise is ~30 rows: the selected day is the median's
    # or next to it (a miss by more than one day has probability far below 1e-9).
    assert abs(row[0] - float(median)) <= 1, (row, median)  # type: ignore[arg-type]
    assert len(notices) == 1 and "this answer cost ε=1" in notices[0]
    assert "MEDIAN(length_of_stay): one of the 31 integers from 0 to 30" in notices[0]
    assert "exponential mechanism (no closed-form interval)" in notices[0]


def test_grouped_percentile_with_count(server: RunningServer) -> None:
    notices: list[str] = []
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(str(d.message_detail)))
        conn.execute("SET dpproxy.epsilon = 2")
        rows = conn.execute(
            "SELECT department, COUNT(*) AS visits, "
            "percentile_cont(0.9) WITHIN GROUP (ORDER BY cost) AS p90, "
            "quantile_cont(cost, 0.1) AS p10 FROM visits GROUP BY department ORDER BY 1"
        ).fetchall()
    assert len(rows) == 8  # the public domain of departments
    for _, count, p90, p10 in rows:
        assert isinstance(count, int) and count >= 0
        assert 0 <= p10 <= 20_000 and 0 <= p90 <= 20_000
    # 64 bins over cost's bounds [0, 20000]: answers are bin midpoints.
    assert all(((p90 / 312.5) - 0.5).is_integer() for _, _, p90, _ in rows)
    assert "bins of width 312.5 over [0, 20000]" in notices[0]


def test_min_and_max_are_refused_with_a_suggestion(server: RunningServer) -> None:
    with (
        psycopg.connect(server.dsn("alice"), autocommit=True) as conn,
        pytest.raises(psycopg.errors.FeatureNotSupported) as caught,
    ):
        conn.execute("SELECT MAX(cost) FROM visits")
    assert "cannot be released with differential privacy" in str(caught.value)
    assert caught.value.diag.message_hint is not None
    assert "quantile_cont(x, 0.99)" in caught.value.diag.message_hint


def test_gaussian_session_spends_rho_on_a_median(server: RunningServer) -> None:
    notices: list[str] = []
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(str(d.message_primary)))
        conn.execute("SET dpproxy.mechanism = gaussian")
        row = conn.execute(
            "SELECT MEDIAN(length_of_stay), COUNT(*) FROM visits WHERE department = 'Oncology'"
        ).fetchone()
    assert row is not None and 0 <= row[0] <= 30 and row[0].is_integer()
    assert "this answer cost ρ=" in notices[0], notices
