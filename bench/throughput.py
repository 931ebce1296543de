"""Queries per second through dpproxy, next to PostgreSQL direct, on this machine.

Starts `dpproxy serve` (DuckDB backend, and PostgreSQL backend when a server is reachable)
on a small generated demo database, gives the analyst a huge budget, and runs bounded
loops of one statement from 2 and 16 concurrent psycopg clients (separate processes, on
loopback). Prints a table of queries per second and, for dpproxy, the CPU time its server
process spent per statement (Linux only): a figure that depends far less than q/s on what
else the machine is doing. The DP query is the same every time, so after the first (charged)
answer it is answered from the answer cache, each answer still audited.

    .venv/bin/python bench/throughput.py [--queries 4000] [--clients 2 16] [--pg-dsn DSN]

The PostgreSQL DSN defaults to $DPPROXY_TEST_PG_DSN, else
postgresql://postgres@127.0.0.1:5432/postgres; without a reachable server the PostgreSQL
rows are skipped.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from proxy.demo import ANALYST_TEMPLATE, CONFIG_TEMPLATE  # noqa: E402
from proxy.demo_data import DemoSize, generate, load_postgres, write_duckdb  # noqa: E402
from proxy.protocol.scram import make_verifier  # noqa: E402

PASSWORD = "bench-pw"
SCHEMA = "dpproxy_bench"
DP_QUERY = "SELECT COUNT(*) FROM visits WHERE department = 'Cardiology'"
PATIENTS = 200


@dataclass(frozen=True)
class Case:
    name: str
    dsn: str
    sql: str


def _run_one(conn: psycopg.Connection[tuple[object, ...]], sql: str) -> None:
    cur = conn.execute(sql)
    if cur.description is not None:
        cur.fetchall()


def _client(args: tuple[str, str, int, float]) -> tuple[int, float, int]:
    """One client process: wait for the common start time, run ``n`` statements."""
    dsn, sql, n, start_at = args
    errors = 0
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.add_notice_handler(lambda _: None)
        _run_one(conn, sql)  # warm up (connection, plan caches)
        time.sleep(max(0.0, start_at - time.time()))
        began = time.perf_counter()
        for _ in range(n):
            try:
                _run_one(conn, sql)
            except psycopg.Error:
                errors += 1
        return n, time.perf_counter() - began, errors


def measure(case: Case, clients: int, total: int) -> tuple[float, int]:
    per_client = max(1, total // clients)
    start_at = time.time() + 1.0 + 0.05 * clients
    with multiprocessing.get_context("spawn").Pool(clients) as pool:
        results = pool.map(_client, [(case.dsn, case.sql, per_client, start_at)] * clients)
    done = sum(r[0] for r in results)
    slowest = max(r[1] for r in results)
    return done / slowest, sum(r[2] for r in results)


def write_config(directory: Path, backend: str) -> Path:
    analysts = ANALYST_TEMPLATE.format(
        name="bench", verifier=make_verifier(PASSWORD), total=1e6, default=0.001, cap=1.0
    )
    text = CONFIG_TEMPLATE.format(
        host="127.0.0.1", port=0, database="demo.duckdb", state="state.sqlite", analysts=analysts
    )
    if backend:
        text = text.replace('engine = "duckdb"', backend, 1)
    path = directory / "dpproxy.toml"
    path.write_text(text)
    return path


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU time of process ``pid`` so far (None: unknown, e.g. not Linux)."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def dpproxy(config: Path) -> Iterator[tuple[int, int]]:
    """Run ``dpproxy serve``; yields its port and process id."""
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "serve", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        if process.stdout is None:
            raise RuntimeError("no stdout")
        deadline = time.monotonic() + 60
        line = process.stdout.readline()
        while "listening on" not in line:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"dpproxy did not start (see {config})")
            line = process.stdout.readline()
        yield int(line.strip().rsplit(":", 1)[1]), process.pid
    finally:
        process.terminate()
        process.wait(15)


def reachable(dsn: str) -> bool:
    try:
        with psycopg.connect(dsn, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=4000, help="statements per measurement")
    parser.add_argument("--clients", type=int, nargs="+", default=[2, 16])
    parser.add_argument(
        "--pg-dsn",
        default=os.environ.get(
            "DPPROXY_TEST_PG_DSN", "postgresql://postgres@127.0.0.1:5432/postgres"
        ),
    )
    args = parser.parse_args()
    pg = reachable(args.pg_dsn)
    rows: list[tuple[str, int, float, int, float | None]] = []

    def run(case: Case, server: int | None = None) -> None:
        for clients in args.clients:
            before = cpu_seconds(server)
            qps, errors = measure(case, clients, args.queries)
            after = cpu_seconds(server)
            # each client also runs one warm-up statement
            statements = max(1, args.queries // clients) * clients + clients
            cpu = None if before is None or after is None else (after - before) / statements
            rows.append((case.name, clients, qps, errors, cpu))
            shown = "" if cpu is None else f" {cpu * 1e6:>7,.0f} µs CPU/statement"
            print(f"  {case.name:<48} {clients:>3} clients {qps:>9,.0f} q/s{shown}", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        data = generate(DemoSize(patients=PATIENTS))
        write_duckdb(data, directory / "demo.duckdb")
        if pg:
            load_postgres(data, args.pg_dsn, schema=SCHEMA)
            options = f"options=-csearch_path%3D{SCHEMA}"
            direct = args.pg_dsn + ("&" if "?" in args.pg_dsn else "?") + options
            run(Case("PostgreSQL direct: SELECT 1", args.pg_dsn, "SELECT 1"))
            run(Case("PostgreSQL direct: COUNT(*) ... WHERE (exact)", direct, DP_QUERY))
        with dpproxy(write_config(directory, "")) as (port, pid):
            dsn = f"postgresql://bench:{PASSWORD}@127.0.0.1:{port}/demo"
            show = Case("dpproxy: SHOW dpproxy.epsilon (session)", dsn, "SHOW dpproxy.epsilon")
            run(show, pid)
            set_name = "SET application_name = 'b'"
            run(Case("dpproxy: SET application_name (session)", dsn, set_name), pid)
            run(Case("dpproxy: SELECT 1 (catalog, no data)", dsn, "SELECT 1"), pid)
            run(Case("dpproxy DuckDB: DP COUNT(*) ... WHERE (cached)", dsn, DP_QUERY), pid)
        if pg:
            backend = f'engine = "postgres"\ndsn = "{args.pg_dsn}"\nschema = "{SCHEMA}"\n#'
            with dpproxy(write_config(directory, backend)) as (port, pid):
                dsn = f"postgresql://bench:{PASSWORD}@127.0.0.1:{port}/demo"
                name = "dpproxy PostgreSQL: DP COUNT(*) ... WHERE (cached)"
                run(Case(name, dsn, DP_QUERY), pid)
            with psycopg.connect(args.pg_dsn, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {SCHEMA} CASCADE")

    load = ", load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"\n{os.cpu_count()} CPUs{load}; {args.queries} statements per row, split among the "
        "clients; CPU: of the dpproxy server process, per statement"
    )
    print(f"| {'statement':<52} | clients | q/s | CPU µs | errors |")
    print(f"|{'-' * 54}|---:|---:|---:|---:|")
    for name, clients, qps, errors, cpu in rows:
        shown = "" if cpu is None else f"{cpu * 1e6:,.0f}"
        print(f"| {name:<52} | {clients} | {qps:,.0f} | {shown} | {errors} |")


if __name__ == "__main__":
    main()
