"""BI tools' wrappers around an analyst's query, through a real `dpproxy serve`, psycopg and
psql, on both engines: answered as post-processing of the wrapped query's released rows,
charged once (rewriter.passes.released_source)."""

from __future__ import annotations

import json

import psycopg
import pytest

from tests.integration.server import RunningServer, dpproxy_in_process

pytestmark = pytest.mark.integration

PATIENTS = 300
DIRECTORY_PREFIX = "wrapped-"
INNER = "SELECT department, COUNT(*) AS n FROM visits GROUP BY department"
METABASE = (
    'SELECT "source"."department" AS "department", "source"."n" AS "n" '
    f'FROM ({INNER}) "source" LIMIT 1048575'
)
TABLEAU = (
    'SELECT "Custom SQL Query"."department" AS "department", '
    'SUM("Custom SQL Query"."n") AS "sum:n:ok" '
    f'FROM ({INNER}) "Custom SQL Query" GROUP BY 1 ORDER BY 2 DESC'
)


def _spent(server: RunningServer) -> float:
    result = dpproxy_in_process("budget", "show", "alice", "--json", "--config", str(server.config))
    assert result.returncode == 0, result.stderr
    return float(json.loads(result.stdout)[0]["spent"])


def test_a_metabase_question_is_answered_and_charged_once(server: RunningServer) -> None:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as alice:
        before = _spent(server)
        cursor = alice.execute(METABASE)
        rows = cursor.fetchall()
        names = [d.name for d in cursor.description or []]
        after = _spent(server)
    assert names == ["department", "n"]
    assert len(rows) == 8  # the demo's public list of departments
    assert all(isinstance(n, int) and n >= 0 for _, n in rows)
    assert after - before == pytest.approx(1.0)


def test_a_tableau_custom_sql_over_psql(server: RunningServer) -> None:
    shown = server.psql("alice", TABLEAU)
    assert shown.returncode == 0, shown.stderr
    assert "sum:n:ok" in shown.stdout and "(8 rows)" in shown.stdout


def test_a_join_around_it_is_refused_before_the_charge(server: RunningServer) -> None:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as alice:
        before = _spent(server)
        with pytest.raises(psycopg.errors.FeatureNotSupported) as refused:
            alice.execute(
                f"SELECT s.n, d.building FROM ({INNER}) s "
                "JOIN departments d ON d.department = s.department"
            )
        assert "joins are not supported" in (refused.value.diag.message_primary or "")
        assert _spent(server) == before


def test_a_metabase_query_builder_question_with_schema_qualified_columns(
    server: RunningServer,
) -> None:
    """Metabase's query builder qualifies every column with its schema and table."""
    question = (
        'SELECT "public"."visits"."department" AS "department", COUNT(*) AS "count" '
        'FROM "public"."visits" GROUP BY "public"."visits"."department" '
        'ORDER BY "public"."visits"."department" ASC'
    )
    with psycopg.connect(server.dsn("alice"), autocommit=True) as alice:
        cursor = alice.execute(question)
        rows = cursor.fetchall()
        names = [d.name for d in cursor.description or []]
    assert names == ["department", "count"]
    assert [d for d, _ in rows] == sorted(d for d, _ in rows) and len(rows) == 8
