"""Client matrix: a DP query, with and without a parameter, from psycopg (text, binary,
parameters, pipeline), asyncpg and node-postgres, against both backends."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest

from tests.integration.server import (
    PASSWORDS,
    RunningServer,
    dpproxy_in_process,
)

pytestmark = pytest.mark.integration

PATIENTS = 500
DIRECTORY_PREFIX = "protocol-"
COUNT = "SELECT COUNT(*) FROM visits"
BY_DEPARTMENT = "SELECT COUNT(*) FROM visits WHERE department = $1"
DEPARTMENT = "Cardiology"
NODE_PG_DIR = Path(os.environ.get("DPPROXY_NODE_PG_DIR", Path.home() / ".cache/dpproxy/node-pg"))


def audited_sql(server: RunningServer, limit: int = 5) -> list[str]:
    result = dpproxy_in_process(
        "audit", "list", "--analyst", "alice", "--limit", str(limit), "--json",
        "--config", str(server.config),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return [str(json.loads(line)["sql"]) for line in result.stdout.splitlines()]


def plausible(count: object) -> None:
    assert isinstance(count, int) and -1000 < count < 100_000, count


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
def test_psycopg_text_and_binary_with_parameter(server: RunningServer, binary: bool) -> None:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        cur = conn.cursor(binary=binary)
        row = cur.execute(COUNT).fetchone()
        assert row is not None
        plausible(row[0])
        row = cur.execute(BY_DEPARTMENT.replace("$1", "%s"), [DEPARTMENT]).fetchone()
        assert row is not None
        plausible(row[0])
        assert cur.description is not None and cur.description[0].name == "count"
    assert f"department = '{DEPARTMENT}'" in audited_sql(server)[-1]  # the bound SQL


def test_psycopg_typed_parameters(server: RunningServer) -> None:
    # int and float go in binary, str as text of unknown type: all bound as literals.
    sql = (
        "SELECT COUNT(*) FROM visits WHERE length_of_stay >= %s AND cost < %s AND department <> %s"
    )
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        row = conn.execute(sql, [2, 1e9, "O'Brien"]).fetchone()
        assert row is not None
        plausible(row[0])
    assert audited_sql(server)[-1].endswith(
        "length_of_stay >= 2 AND cost < 1000000000.0 AND department <> 'O''Brien'"
    )


def test_psycopg_numeric_parameters_of_any_size(server: RunningServer) -> None:
    # Python ints beyond bigint and Decimals go as binary NUMERIC: 10**28 and more used to
    # fail with an internal error (the decoder rounded to Python's 28-digit context).
    sql = "SELECT COUNT(*) FROM visits WHERE cost > %b AND cost > %b AND cost <> %b"
    numbers: list[int | Decimal] = [-(10**17), Decimal("1e-100"), Decimal("123.4500")]
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        row = conn.execute(sql, numbers).fetchone()
        assert row is not None
        plausible(row[0])
        shown = [f"{Decimal(n):f}" for n in numbers]
        assert audited_sql(server)[-1].endswith(
            f"cost > {shown[0]} AND cost > {shown[1]} AND cost <> {shown[2]}"
        )
        # Decoded exactly, then refused for free: DuckDB could fail comparing such a
        # number on some rows only (docs/sql.md, "Expressions never fail on particular rows").
        for huge in (10**28, -(10**100)):
            with pytest.raises(psycopg.errors.FeatureNotSupported, match="out of the range"):
                conn.execute("SELECT COUNT(*) FROM visits WHERE cost > %b", [huge])


def test_psycopg_placeholders_without_spaces(server: RunningServer) -> None:
    # psycopg writes "%s,%s" as "$1,$2" (server-side binding, the default), which sqlglot
    # alone cannot tokenize: refused with 42601, or, for text (OID 0), "requires 0".
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        for sql, params, bound in [
            ("SELECT COUNT(*) FROM visits WHERE department IN (%s,%s)",
             [DEPARTMENT, "Oncology"], f"department IN ('{DEPARTMENT}', 'Oncology')"),
            ("SELECT COUNT(*) FROM visits WHERE length_of_stay IN (%s,%s)", [2, 3],
             "length_of_stay IN (2, 3)"),
            ("SELECT COUNT(*) FROM visits WHERE department=%s", [DEPARTMENT],
             f"department = '{DEPARTMENT}'"),
            ("SELECT COUNT(*) FROM visits WHERE length_of_stay>=(%s)", ["2"],
             "length_of_stay >= (2)"),  # an int4 parameter, as PostgreSQL types it
            ("SELECT COUNT(*) FROM visits WHERE length_of_stay>=%s::int", ["2"],
             "length_of_stay >= CAST(2 AS INT)"),
            ("SELECT COUNT(*) FROM visits WHERE department<>'$1,$2' AND department<>%s",
             [DEPARTMENT], f"department <> '$1,$2' AND department <> '{DEPARTMENT}'"),
        ]:  # fmt: skip
            row = conn.execute(sql, params).fetchone()
            assert row is not None
            plausible(row[0])
            assert audited_sql(server)[-1].endswith(bound)


def test_psycopg_pipeline(server: RunningServer) -> None:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        with conn.pipeline():
            first = conn.execute(COUNT)
            second = conn.execute(BY_DEPARTMENT.replace("$1", "%s"), [DEPARTMENT])
            shown = conn.execute("SHOW dpproxy.epsilon")
        row1, row2 = first.fetchone(), second.fetchone()
        assert row1 is not None and row2 is not None
        plausible(row1[0])
        plausible(row2[0])
        assert shown.fetchone() == ("1",)
        with pytest.raises(psycopg.errors.FeatureNotSupported), conn.pipeline():
            conn.execute("SELECT * FROM visits")
            conn.execute(COUNT)  # skipped after the error
        assert conn.execute("SHOW dpproxy.epsilon").fetchone() == ("1",)  # usable again


def test_psycopg_prepared_then_deallocated(server: RunningServer) -> None:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        for _ in range(6):  # psycopg prepares a named statement after 5 executions
            conn.execute(BY_DEPARTMENT.replace("$1", "%s"), [DEPARTMENT]).fetchone()
        conn.execute("DEALLOCATE ALL")
        conn.execute("DISCARD ALL")
        with pytest.raises(psycopg.errors.InvalidSqlStatementName):
            conn.execute("DEALLOCATE nope")
        row = conn.execute(BY_DEPARTMENT.replace("$1", "%s"), [DEPARTMENT]).fetchone()
        assert row is not None


def test_asyncpg(server: RunningServer) -> None:
    asyncpg = pytest.importorskip("asyncpg")

    async def run() -> tuple[object, object, list[object]]:
        conn = await asyncpg.connect(server.dsn("alice"))
        try:
            total = await conn.fetchval(COUNT)
            by_department = await conn.fetchval(BY_DEPARTMENT, DEPARTMENT)
            statement = await conn.prepare(BY_DEPARTMENT)
            types = [t.name for t in statement.get_parameters()]
            return total, by_department, types
        finally:
            await conn.close()

    total, by_department, types = asyncio.run(run())
    plausible(total)
    plausible(by_department)
    assert types == ["text"]
    assert f"department = '{DEPARTMENT}'" in audited_sql(server)[-1]


NODE_SCRIPT = """
const { Client } = require('pg');
(async () => {
  const client = new Client({ connectionString: process.env.DSN });
  await client.connect();
  const total = await client.query('SELECT COUNT(*) FROM visits');
  const byDepartment = await client.query(
    'SELECT COUNT(*) FROM visits WHERE department = $1', ['Cardiology']);
  await client.end();
  console.log(JSON.stringify([total.rows[0].count, byDepartment.rows[0].count]));
})().catch((e) => { console.error(e); process.exit(1); });
"""


@pytest.fixture(scope="session")
def node_pg() -> Path:
    """A directory whose node_modules holds `pg` (installed with npm on first use)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        if os.environ.get("CI") == "true":
            pytest.fail("node and npm are needed for the node-postgres test in CI")
        pytest.skip("node or npm is not installed")
    if not (NODE_PG_DIR / "node_modules" / "pg").is_dir():
        NODE_PG_DIR.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [npm, "install", "--prefix", str(NODE_PG_DIR), "--no-audit", "--no-fund", "pg@8"],
            capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            message = f"npm install pg failed: {done.stderr[-2000:]}"
            if os.environ.get("CI") == "true":
                pytest.fail(message)
            pytest.skip(message)
    return NODE_PG_DIR


def test_node_postgres(server: RunningServer, node_pg: Path) -> None:
    env = {
        **os.environ,
        "DSN": server.dsn("alice") + "?sslmode=disable",
        "NODE_PATH": str(node_pg / "node_modules"),
    }
    done = subprocess.run(
        ["node", "-e", NODE_SCRIPT], capture_output=True, text=True, env=env, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    total, by_department = json.loads(done.stdout)
    plausible(int(total))
    plausible(int(by_department))
    assert f"department = '{DEPARTMENT}'" in audited_sql(server)[-1]


def test_password_is_checked_for_every_client(server: RunningServer) -> None:
    assert PASSWORDS["alice"]
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(server.dsn("alice", "wrong"), connect_timeout=10)
