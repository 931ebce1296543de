"""TPC-H benchmark of the rewriter: engine time of the rewritten (bounded) query over the
raw query with the same joins, and rewrite time per query. Beside them, the per-person
floor: the raw query summed per customer first, which any per-person bound must do.

Customer is the privacy unit: orders reach it directly (o_custkey), lineitem through the
foreign key l_orderkey -> orders.o_orderkey; nation is a public lookup, joined on
n_nationkey, which dbgen declares no key for: its values are checked to be unique, as
dpproxy checks a DuckDB file's (proxy.public_keys).

Needs DuckDB's TPC-H extension, which the PyPI package duckdb-extension-tpch provides
offline and which pins its DuckDB version, so it runs in its own virtualenv:

    python3 -m venv .venv-bench
    .venv-bench/bin/pip install -e . duckdb==1.5.5 duckdb-extension-tpch==1.5.5
    .venv-bench/bin/python bench/tpch.py [--sf 1] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from proxy.backends import (  # noqa: E402
    SCHEMA_QUERY,
    column_digits,
    column_types,
    group_declared,
)
from rewriter import (  # noqa: E402
    ColumnPolicy,
    PlanRequest,
    TablePolicy,
    build_catalog,
    plan,
)

NATIONS = [
    "ALGERIA",
    "ARGENTINA",
    "BRAZIL",
    "CANADA",
    "CHINA",
    "EGYPT",
    "ETHIOPIA",
    "FRANCE",
    "GERMANY",
    "INDIA",
    "INDONESIA",
    "IRAN",
    "IRAQ",
    "JAPAN",
    "JORDAN",
    "KENYA",
    "MOROCCO",
    "MOZAMBIQUE",
    "PERU",
    "ROMANIA",
    "RUSSIA",
    "SAUDI ARABIA",
    "UNITED KINGDOM",
    "UNITED STATES",
    "VIETNAM",
]

POLICIES = {
    "customer": TablePolicy(
        privacy_unit="c_custkey",
        max_rows_per_unit=1,
        columns={"c_acctbal": ColumnPolicy(lower=-1000, upper=10000)},
    ),
    "orders": TablePolicy(
        privacy_unit="o_custkey",
        max_rows_per_unit=30,
        columns={"o_totalprice": ColumnPolicy(lower=0, upper=500000)},
    ),
    "lineitem": TablePolicy(
        privacy_unit="l_orderkey -> orders.o_orderkey",
        max_rows_per_unit=120,
        columns={
            "l_quantity": ColumnPolicy(lower=0, upper=50),
            "l_extendedprice": ColumnPolicy(lower=0, upper=100000),
            "l_discount": ColumnPolicy(lower=0, upper=0.1),
            "l_tax": ColumnPolicy(lower=0, upper=0.08),
            "l_returnflag": ColumnPolicy(domain=["A", "N", "R"]),
            "l_linestatus": ColumnPolicy(domain=["F", "O"]),
        },
    ),
    "nation": TablePolicy(public=True, columns={"n_name": ColumnPolicy(domain=NATIONS)}),
}

# (name, the analyst's DP query, the raw query with the same joins)
QUERIES = [
    (
        "Q1-like",
        "SELECT l_returnflag, l_linestatus, SUM(l_quantity) AS sum_qty, "
        "SUM(l_extendedprice) AS sum_base_price, "
        "SUM(l_extendedprice * (1 - l_discount)) AS sum_disc_price, AVG(l_quantity) AS avg_qty, "
        "AVG(l_discount) AS avg_disc, COUNT(*) AS count_order FROM lineitem "
        "WHERE l_shipdate <= DATE '1998-09-02' GROUP BY l_returnflag, l_linestatus ORDER BY 1, 2",
        "SELECT l_returnflag, l_linestatus, SUM(l_quantity), SUM(l_extendedprice), "
        "SUM(l_extendedprice * (1 - l_discount)), AVG(l_quantity), AVG(l_discount), COUNT(*) "
        "FROM lineitem JOIN orders ON l_orderkey = o_orderkey "
        "WHERE l_shipdate <= DATE '1998-09-02' GROUP BY l_returnflag, l_linestatus ORDER BY 1, 2",
    ),
    (
        "Q6-like",
        "SELECT SUM(l_extendedprice * l_discount) AS revenue FROM lineitem "
        "WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' "
        "AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24",
        "SELECT SUM(l_extendedprice * l_discount) FROM lineitem "
        "JOIN orders ON l_orderkey = o_orderkey "
        "WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' "
        "AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24",
    ),
    (
        "per-nation",
        "SELECT n.n_name, SUM(l.l_extendedprice * (1 - l.l_discount)) AS revenue "
        "FROM lineitem l JOIN orders o ON l.l_orderkey = o.o_orderkey "
        "JOIN customer c ON o.o_custkey = c.c_custkey "
        "JOIN nation n ON c.c_nationkey = n.n_nationkey GROUP BY n.n_name",
        "SELECT n.n_name, SUM(l.l_extendedprice * (1 - l.l_discount)) "
        "FROM lineitem l JOIN orders o ON l.l_orderkey = o.o_orderkey "
        "JOIN customer c ON o.o_custkey = c.c_custkey "
        "JOIN nation n ON c.c_nationkey = n.n_nationkey GROUP BY n.n_name",
    ),
]

# Per query: the raw query summed per customer (and group) first, then over customers,
# without clamping, bounding or noise: the least that any per-person bound costs the
# engine (the grouping by customer), to read the rewritten query's ratio against.
PER_PERSON_FLOOR = {
    "Q1-like": "SELECT l_returnflag, l_linestatus, SUM(q), SUM(p), SUM(dp), SUM(q) / SUM(n), "
    "SUM(d) / SUM(n), SUM(n) FROM (SELECT o_custkey, l_returnflag, l_linestatus, "
    "SUM(l_quantity) AS q, SUM(l_extendedprice) AS p, "
    "SUM(l_extendedprice * (1 - l_discount)) AS dp, SUM(l_discount) AS d, COUNT(*) AS n "
    "FROM lineitem JOIN orders ON l_orderkey = o_orderkey "
    "WHERE l_shipdate <= DATE '1998-09-02' GROUP BY o_custkey, l_returnflag, l_linestatus) "
    "GROUP BY l_returnflag, l_linestatus ORDER BY 1, 2",
    "Q6-like": "SELECT SUM(r) FROM (SELECT o_custkey, SUM(l_extendedprice * l_discount) AS r "
    "FROM lineitem JOIN orders ON l_orderkey = o_orderkey "
    "WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' "
    "AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24 GROUP BY o_custkey)",
    "per-nation": "SELECT n_name, SUM(r) FROM (SELECT c.c_custkey, n.n_name, "
    "SUM(l.l_extendedprice * (1 - l.l_discount)) AS r "
    "FROM lineitem l JOIN orders o ON l.l_orderkey = o.o_orderkey "
    "JOIN customer c ON o.o_custkey = c.c_custkey "
    "JOIN nation n ON c.c_nationkey = n.n_nationkey GROUP BY c.c_custkey, n.n_name) "
    "GROUP BY n_name",
}


def database(sf: float, directory: Path) -> Path:
    path = directory / f"tpch-sf{sf:g}.duckdb"
    if path.exists():
        return path
    # Only needed to generate the data once; it pins DuckDB, so it is not a dependency.
    import duckdb_extension_tpch  # type: ignore[import-not-found]  # noqa: PLC0415

    directory.mkdir(parents=True, exist_ok=True)
    extension = (
        Path(duckdb_extension_tpch.__file__).parent
        / "extensions"
        / f"v{duckdb.__version__}"
        / "tpch.duckdb_extension"
    )
    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    started = time.perf_counter()
    print(f"generating TPC-H at scale factor {sf:g} into {path} …", flush=True)
    with duckdb.connect(str(partial)) as conn:
        conn.execute(f"LOAD '{extension}'")
        conn.execute(f"CALL dbgen(sf={sf})")
    partial.rename(path)
    print(f"  done in {time.perf_counter() - started:.0f} s", flush=True)
    return path


def unique_columns(conn: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    """Per public table of POLICIES, the columns whose values (NULLs aside) are all
    different in ``conn``: those a query may join it on (rewriter.catalog.unique_columns).
    One scan of each table."""
    found: dict[str, list[str]] = {}
    for table, policy in POLICIES.items():
        if not policy.public:
            continue
        columns = [
            str(name)
            for (name,) in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = "
                "'main' AND table_name = ? ORDER BY ordinal_position",
                [table],
            ).fetchall()
        ]
        tests = ", ".join(f'COUNT("{c}") = COUNT(DISTINCT "{c}")' for c in columns)
        row = conn.execute(f'SELECT {tests} FROM main."{table}"').fetchone()
        if row is None:
            raise RuntimeError(f"no answer counting the values of {table}")
        found[table] = [c for c, unique in zip(columns, row, strict=True) if unique is True]
    return found


def timed(conn: duckdb.DuckDBPyConnection, sql: str, runs: int) -> float:
    conn.execute(sql).fetchall()  # warm up
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        conn.execute(sql).fetchall()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sf", type=float, default=1.0, help="TPC-H scale factor (default 1)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per query (median)")
    parser.add_argument(
        "--data",
        type=Path,
        default=Path(__file__).parent / ".data",
        help="where the generated database is kept",
    )
    args = parser.parse_args()
    path = database(args.sf, args.data)
    conn = duckdb.connect(str(path), read_only=True)
    declared = group_declared(conn.execute(SCHEMA_QUERY.format(placeholder="'main'")).fetchall())
    catalog = build_catalog(
        column_types(declared),
        POLICIES,
        schema="main",
        digits=column_digits(declared),
        finite_decimals=True,
        unique=unique_columns(conn),
    )
    per_customer = conn.execute(
        "SELECT quantile_cont(n, [0.5, 0.99]), max(n) FROM (SELECT o_custkey, COUNT(*) AS n "
        "FROM lineitem JOIN orders ON l_orderkey = o_orderkey GROUP BY o_custkey)"
    ).fetchone()
    if per_customer is None:
        raise RuntimeError("no answer counting the lineitem rows per customer")
    print(
        f"DuckDB {duckdb.__version__}, {os.cpu_count()} cores, scale factor {args.sf:g}; "
        f"lineitem rows per customer: median/p99 {per_customer[0]}, max {per_customer[1]} "
        f"(bounded at {POLICIES['lineitem'].max_rows_per_unit})"
    )
    print(
        f"{'query':<12} {'raw (s)':>9} {'rewritten (s)':>14} {'ratio':>7} "
        f"{'per-person floor':>17} {'rewrite p50 (ms)':>17}"
    )
    for name, dp_sql, raw_sql in QUERIES:
        request = PlanRequest(1.0, "duckdb")
        rewrite_times = []
        for _ in range(100):
            started = time.perf_counter()
            made = plan(dp_sql, catalog, request)
            rewrite_times.append(time.perf_counter() - started)
        raw = timed(conn, raw_sql, args.runs)
        rewritten = timed(conn, made.sql, args.runs)
        floor = timed(conn, PER_PERSON_FLOOR[name], args.runs)
        print(
            f"{name:<12} {raw:>9.3f} {rewritten:>14.3f} {rewritten / raw:>6.2f}x "
            f"{floor / raw:>16.2f}x {statistics.median(rewrite_times) * 1000:>17.2f}"
        )


if __name__ == "__main__":
    main()
