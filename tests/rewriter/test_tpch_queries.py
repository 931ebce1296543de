"""The TPC-H benchmark's queries plan under its policies, and their rewritten SQL runs
(on empty tables of the TPC-H shape; bench/tpch.py measures speed on real data)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import duckdb
import pytest

from proxy.backends import column_type
from rewriter import ColumnType, PlanRequest, build_catalog, plan

TABLES = {
    "customer": "c_custkey BIGINT, c_nationkey INTEGER, c_acctbal DECIMAL(15,2)",
    "orders": "o_orderkey BIGINT, o_custkey BIGINT, o_totalprice DECIMAL(15,2)",
    "lineitem": "l_orderkey BIGINT, l_quantity DECIMAL(15,2), l_extendedprice DECIMAL(15,2), "
    "l_discount DECIMAL(15,2), l_tax DECIMAL(15,2), l_returnflag VARCHAR, "
    "l_linestatus VARCHAR, l_shipdate DATE",
    "nation": "n_nationkey INTEGER, n_name VARCHAR",
}


def bench() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "bench" / "tpch.py"
    spec = importlib.util.spec_from_file_location("bench_tpch", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("index", range(3))
def test_benchmark_query_plans_and_runs(index: int) -> None:
    module = bench()
    conn = duckdb.connect()
    columns: dict[str, dict[str, ColumnType]] = {}
    for table, ddl in TABLES.items():
        conn.execute(f"CREATE TABLE {table} ({ddl})")
        for part in ddl.split(", "):
            name, declared = part.split(" ", 1)
            columns.setdefault(table, {})[name] = column_type(declared)
    # Two nations of one name: nation may be joined on n_nationkey only.
    conn.execute("INSERT INTO nation VALUES (0, 'ALGERIA'), (1, 'ALGERIA'), (2, NULL), (3, NULL)")
    unique = module.unique_columns(conn)
    assert unique == {"nation": ["n_nationkey"]}
    catalog = build_catalog(columns, module.POLICIES, schema="main", unique=unique)
    name, dp_sql, raw_sql = module.QUERIES[index]
    made = plan(dp_sql, catalog, PlanRequest(1.0))
    conn.execute(made.sql).fetchall()
    conn.execute(raw_sql).fetchall()
    if name == "Q1-like":
        assert made.max_rows_per_unit == 120  # lineitem's bound; orders is its FK parent
