"""Post-processing of released values: HAVING, ORDER BY, LIMIT, arithmetic, types."""

from __future__ import annotations

from proxy.plan_cache import PlanCache
from proxy.postprocess import PostProcessor
from rewriter import PlanRequest, plan
from tests.rewriter.noise import ZeroNoise
from tests.rewriter.tables import catalog

CATALOG = catalog("main")


def answer(
    sql: str, exact: list[tuple[object, ...]]
) -> tuple[list[str], list[tuple[str | None, ...]]]:
    query_plan = plan(sql, CATALOG, PlanRequest(1.0))
    released = query_plan.release(exact, ZeroNoise())
    result = PostProcessor().run(released, query_plan.post_sql)
    return [c.name for c in result.columns], list(result.rows)


def test_having_order_limit_and_names() -> None:
    names, rows = answer(
        "SELECT department AS d, COUNT(*), SUM(stay) FROM visits GROUP BY d "
        "HAVING COUNT(*) > 1 ORDER BY 2 DESC LIMIT 1",
        [("A", 3, 10), ("B", 2, 4), ("C", 1, 1)],
    )
    assert names == ["d", "count", "sum"]
    assert rows == [("A", "3", "10")]


def test_the_largest_limit_and_offset_run() -> None:
    # LIMIT/OFFSET are bigints: 2^63-1 runs in DuckDB; beyond it the rewriter rejects them.
    grouped = "SELECT department, COUNT(*) FROM visits GROUP BY department"
    exact: list[tuple[object, ...]] = [("A", 3), ("B", 2)]
    most = 2**63 - 1
    ordered = f"{grouped} ORDER BY 2 DESC"
    assert answer(f"{ordered} LIMIT {most}", exact)[1] == [("A", "3"), ("B", "2"), ("C", "0")]
    assert answer(f"{ordered} LIMIT {most} OFFSET {most}", exact)[1] == []
    assert answer(f"{ordered} OFFSET 1", exact)[1] == [("B", "2"), ("C", "0")]
    assert answer(f"{grouped} ORDER BY -COUNT(*) LIMIT 1", exact)[1] == [("A", "3")]


def test_arithmetic_between_aggregates_is_exact_and_zero_safe() -> None:
    names, rows = answer(
        "SELECT department, SUM(stay) / COUNT(*) AS mean, 100.0 * COUNT(*) / 4 AS pct "
        "FROM visits GROUP BY department ORDER BY department",
        [("A", 10, 3), ("B", 5, 2)],  # m0 = SUM(stay), m1 = COUNT(*)
    )
    assert names == ["department", "mean", "pct"]
    assert rows == [("A", "3.3333333333333335", "75"), ("B", "2.5", "50"), ("C", None, "0")]


def test_output_types_are_postgres_oids() -> None:
    query_plan = plan(
        "SELECT COUNT(*) AS n, AVG(cost) AS a, SUM(stay) AS s, COUNT(*) > 3 AS big FROM visits",
        CATALOG,
        PlanRequest(1.0),
    )
    described = PostProcessor().describe(query_plan.released_columns, query_plan.post_sql)
    assert [(c.name, c.type_oid) for c in described.columns] == [
        ("n", 20),
        ("a", 701),
        ("s", 20),
        ("big", 16),
    ]
    assert described.rows == ()


def test_post_processing_cannot_read_files() -> None:
    processor = PostProcessor()
    query_plan = plan("SELECT COUNT(*) FROM visits", CATALOG, PlanRequest(1.0))
    released = query_plan.release([(1,)], ZeroNoise())
    try:
        processor.run(released, "SELECT * FROM read_csv('/etc/passwd')")
    except Exception as error:  # noqa: BLE001 - any refusal will do; the point is no rows
        assert "Permission" in str(error) or "disabled" in str(error)
    else:
        raise AssertionError("post-processing read a file")


def test_plain_projection_fast_path_equals_duckdb() -> None:
    query_plan = plan(
        "SELECT department AS d, COUNT(*) AS n, AVG(cost) AS mean, SUM(stay) AS s "
        "FROM visits GROUP BY department",
        CATALOG,
        PlanRequest(1.0),
    )
    # AVG(cost) measures Σ(cost - 50) over 2 values: -20 for a mean of 40.
    released = query_plan.release([("A", 3, -20 * 2**13, 2, 7)], ZeroNoise())
    processor = PostProcessor()
    fast = processor.run(released, query_plan.post_sql)
    slow = processor.run(released, query_plan.post_sql + " WHERE TRUE")  # forces DuckDB
    assert fast == slow
    assert fast.rows[0] == ("A", "3", "40", "7")


def test_plan_cache_keeps_recent_plans_only() -> None:
    cache = PlanCache(2)
    plans = {
        sql: plan(sql, CATALOG, PlanRequest(1.0))
        for sql in (
            "SELECT COUNT(*) FROM visits",
            "SELECT SUM(stay) FROM visits",
            "SELECT AVG(stay) FROM visits",
        )
    }
    for sql, made in plans.items():
        cache.put("alice", sql, PlanRequest(1.0), made)
    assert cache.get("alice", "SELECT COUNT(*) FROM visits", PlanRequest(1.0)) is None  # evicted
    assert cache.get("alice", "SELECT AVG(stay) FROM visits", PlanRequest(1.0)) is not None
    assert cache.get("alice", "SELECT AVG(stay) FROM visits", PlanRequest(0.5)) is None  # other ε
    # Another analyst's plans are not shared: their time to Describe would tell bob which
    # queries alice asked.
    assert cache.get("bob", "SELECT AVG(stay) FROM visits", PlanRequest(1.0)) is None
