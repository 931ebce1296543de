"""The 95% interval of an average (and of a standard deviation) through a real
`dpproxy serve`, on DuckDB and PostgreSQL: in the NOTICE's detail and, with
``SET dpproxy.report = columns``, in ``<name>_ci95``, each group's own.

The demo's visits.cost is declared in [0, 20000], with at most 30 rows per person; 400
patients have about 1,900 visits, from tens to hundreds per department. At ε = 5 an
AVG(cost) alone spends 2.5 on its centred sum and 2.5 on its count (Laplace scale 12,
97.5% half-width 44); beside a COUNT(*) or a STDDEV, ε/3 each (count half-width 67). Over
all visits, and in the three largest departments, the interval is bounded. Over no rows
at all it is bounded only if the count's noise is 45 or more, probability e^(−45/12) /
(1 + e^(−1/12)) = 1.2%: three such queries are all bounded with probability 2e-6."""

from __future__ import annotations

import math
import re
from typing import Any

import psycopg
import pytest

from tests.integration.server import RunningServer

pytestmark = pytest.mark.integration

PATIENTS = 400
DIRECTORY_PREFIX = "avg-ci-"
NUMBER = r"-?[\d,]+(?:\.\d+)?"
ONE = re.compile(rf"AVG\(cost\) ±({NUMBER}) \(between ({NUMBER}) and ({NUMBER})\)")
UNRELIABLE = "AVG(cost) unbounded: its noisy count is too close to 0 for its noise (unreliable)"


def ask(conn: psycopg.Connection[Any], sql: str) -> tuple[list[tuple[Any, ...]], list[str], str]:
    """The rows of ``sql``, its column names and the detail of its NOTICE."""
    details: list[str] = []

    def keep(diagnostic: psycopg.errors.Diagnostic) -> None:
        details.append(diagnostic.message_detail or "")

    conn.add_notice_handler(keep)
    try:
        cur = conn.execute(sql)
        rows = cur.fetchall()
    finally:
        conn.remove_notice_handler(keep)
    assert cur.description is not None
    (detail,) = details
    return rows, [c.name for c in cur.description], detail


def number(text: str) -> float:
    return float(text.replace(",", ""))


def test_an_average_states_its_interval(server: RunningServer) -> None:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        conn.execute("SET dpproxy.epsilon = 5")
        conn.execute("SET dpproxy.report = columns")
        rows, names, detail = ask(conn, "SELECT AVG(cost) AS a, STDDEV(cost) AS s FROM visits")
    assert names == ["a", "s", "a_ci95", "a_bias", "s_ci95", "s_bias"]
    ((average, deviation, width, _, spread, _),) = rows
    found = ONE.search(detail)
    assert found is not None, detail
    stated, lower, upper = (number(g) for g in found.groups())
    assert 0 < width < 1000 and math.isfinite(spread) and spread > 0
    assert stated == pytest.approx(width, rel=0.01, abs=0.01)  # the ± to 3 digits
    assert lower - 0.5 <= average <= upper + 0.5
    assert width == pytest.approx(max(average - lower, upper - average), abs=0.5)
    assert deviation > 0 and "STDDEV(cost) ±" in detail, detail


def test_averages_by_group_have_their_own_interval(server: RunningServer) -> None:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        conn.execute("SET dpproxy.epsilon = 5")
        conn.execute("SET dpproxy.report = columns")
        rows, names, detail = ask(
            conn,
            "SELECT department, AVG(cost) AS a, COUNT(*) AS n FROM visits "
            "GROUP BY department ORDER BY n DESC LIMIT 3",
        )
    assert names == ["department", "a", "n", "a_ci95", "a_bias", "n_ci95", "n_bias"]
    assert len(rows) == 3
    widths = [row[3] for row in rows]
    assert all(math.isfinite(w) and w > 0 for w in widths), rows
    assert len({row[5] for row in rows}) == 1  # a count's interval: the same on every row
    found = re.search(rf"AVG\(cost\) ±({NUMBER}) to ±({NUMBER}) by group", detail)
    assert found is not None, detail
    least, most = (number(g) for g in found.groups())
    # The three largest groups shown are among the 8 released groups the NOTICE describes
    # (whose smallest, tens of visits, may be unbounded).
    assert least * 0.99 - 0.01 <= min(widths) and max(widths) <= most * 1.01 + 0.01, detail


def test_an_average_over_no_rows_is_unreliable(server: RunningServer) -> None:
    unreliable = 0
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        conn.execute("SET dpproxy.report = columns")
        for epsilon in ("5", "4.9", "4.8"):
            conn.execute(f"SET dpproxy.epsilon = {epsilon}")
            rows, _, detail = ask(conn, "SELECT AVG(cost) AS a FROM visits WHERE patient_id < 0")
            ((_, width, _),) = rows
            if UNRELIABLE in detail:
                unreliable += 1
                assert width == math.inf, rows
            else:
                assert ONE.search(detail) is not None and math.isfinite(width), detail
    assert unreliable >= 1
