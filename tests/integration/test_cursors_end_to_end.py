"""Cursors through a real `dpproxy serve` with real clients: psycopg's named cursors
(fetchone, fetchmany, fetchall, iteration, withhold=True, scrollable=True with scroll(),
binary=True, parameters), SQLAlchemy's stream_results read by pandas in chunks, and psql
(DECLARE / FETCH / MOVE / CLOSE, and its FETCH_COUNT). Each DECLARE is charged and audited
once, as its query sent alone would be; FETCH and MOVE are never charged."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pandas
import psycopg
import pytest
import sqlalchemy

from tests.integration.server import (
    PASSWORDS,
    RunningServer,
    dpproxy_in_process,
    fresh_demo_server,
)

pytestmark = pytest.mark.integration

BY_DEPARTMENT = "SELECT department, COUNT(*) AS n FROM visits GROUP BY department ORDER BY 1"
DEPARTMENTS = 8  # the demo's public domain


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with fresh_demo_server(tmp_path_factory, "cursors", patients=300) as running:
        yield running


def spent(server: RunningServer) -> float:
    result = dpproxy_in_process("budget", "show", "alice", "--json", "--config", str(server.config))
    assert result.returncode == 0, result.stderr
    return float(json.loads(result.stdout)[0]["spent"])


def audited(server: RunningServer) -> list[tuple[str, str]]:
    """alice's audit records, oldest first: (decision, SQL)."""
    done = dpproxy_in_process(
        "audit", "list", "--analyst", "alice", "--limit", "100000", "--json",
        "--config", str(server.config),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    return [(str(r["decision"]), str(r["sql"])) for r in records if r["decision"] != "admin"]


class Charges:
    """What a block of client calls was charged and audited."""

    def __init__(self, server: RunningServer) -> None:
        self.server = server
        self.spent = spent(server)
        self.audited = len(audited(server))

    def since(self) -> tuple[float, list[tuple[str, str]]]:
        return spent(self.server) - self.spent, audited(self.server)[self.audited :]


def test_psycopg_named_cursor(server: RunningServer) -> None:
    """conn.cursor(name=...): DECLARE in a transaction, Describe of its portal, then
    FETCH FORWARD n for each fetch; one charge of ε=1 for all of them."""
    charges = Charges(server)
    with psycopg.connect(server.dsn("alice")) as conn:
        notices: list[str] = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        with conn.cursor(name="big") as cur:
            cur.execute(BY_DEPARTMENT)
            assert cur.description is not None and [c.name for c in cur.description] == [
                "department",
                "n",
            ]
            first = cur.fetchone()
            some = cur.fetchmany(3)
            rest = cur.fetchall()
            assert cur.fetchone() is None
        rows = [first, *some, *rest]
        assert len(rows) == DEPARTMENTS and rows == sorted(rows)  # ORDER BY department
        with conn.cursor(name="iterated") as cur:
            cur.itersize = 3
            cur.execute(BY_DEPARTMENT)
            iterated = list(cur)
        assert [r[0] for r in iterated] == [r[0] for r in rows]  # (its own noise)
        conn.commit()
    assert any("this answer cost ε=1" in n for n in notices)
    cost, records = charges.since()
    assert cost == pytest.approx(2.0)  # two DECLAREs, nothing for their seven FETCHes
    assert records == [("accepted", BY_DEPARTMENT), ("accepted", BY_DEPARTMENT)]


def test_withhold_scrollable_binary_and_parameters(server: RunningServer) -> None:
    charges = Charges(server)
    sql = "SELECT department, COUNT(*) AS n FROM visits WHERE length_of_stay >= %s GROUP BY 1"
    with psycopg.connect(server.dsn("alice")) as conn:
        with conn.cursor(name="held", withhold=True) as cur:
            cur.execute(sql + " ORDER BY 1", [0])
            conn.commit()  # a WITH HOLD cursor outlives its transaction
            assert conn.info.transaction_status is psycopg.pq.TransactionStatus.IDLE
            held = cur.fetchmany(2) + cur.fetchall()
        assert len(held) == DEPARTMENTS
        with conn.cursor(name="scrolled", scrollable=True) as cur:
            cur.execute(BY_DEPARTMENT)
            two = cur.fetchmany(2)
            cur.scroll(-2)  # MOVE -2: back before the first row
            assert cur.fetchone() == two[0]
            cur.scroll(4, "absolute")  # MOVE ABSOLUTE 4: on the fourth row
            fifth = cur.fetchone()
            cur.scroll(0, "absolute")
            everything = cur.fetchall()
            assert everything[:2] == two and everything[4] == fifth
        with conn.cursor(name="forward") as cur:
            cur.execute(BY_DEPARTMENT)
            cur.fetchmany(2)
            with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState) as backward:
                cur.scroll(-1)  # neither SCROLL nor NO SCROLL: NO SCROLL, as PostgreSQL's Agg
        assert str(backward.value.diag.message_primary) == "cursor can only scan forward"
        conn.rollback()
        with conn.cursor(name="binary", binary=True) as cur:
            cur.execute(BY_DEPARTMENT)
            binary = cur.fetchall()
        assert len(binary) == DEPARTMENTS and all(isinstance(n, int) for _, n in binary)
        conn.commit()
        conn.autocommit = True  # WITH HOLD outside a transaction block: held at once
        with conn.cursor(name="auto", withhold=True) as cur:
            cur.execute(BY_DEPARTMENT)
            assert len(cur.fetchmany(5) + list(cur)) == DEPARTMENTS
    cost, records = charges.since()
    assert cost == pytest.approx(5.0)
    assert [d for d, _ in records] == ["accepted"] * 5
    assert "length_of_stay >= 0" in records[0][1]  # bound as in the same query sent alone
    assert records[0][1].startswith("SELECT")


def test_refused_before_the_charge(server: RunningServer) -> None:
    charges = Charges(server)
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        with (
            pytest.raises(psycopg.errors.NoActiveSqlTransaction) as outside,
            conn.cursor(name="lost") as cur,
        ):
            cur.execute(BY_DEPARTMENT)
        assert "DECLARE CURSOR can only be used in transaction blocks" in str(outside.value)
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            conn.execute(f"DECLARE b BINARY CURSOR WITH HOLD FOR {BY_DEPARTMENT}")
    assert charges.since() == (0.0, [])


def test_stream_results_read_by_pandas_in_chunks(server: RunningServer) -> None:
    url = f"postgresql+psycopg://alice:{PASSWORDS['alice']}@127.0.0.1:{server.port}/demo"
    engine = sqlalchemy.create_engine(url)
    try:
        charges = Charges(server)
        with engine.connect().execution_options(stream_results=True) as conn:
            chunks = list(pandas.read_sql(BY_DEPARTMENT, conn, chunksize=3))
        assert [len(c) for c in chunks] == [3, 3, 2]
        assert list(pandas.concat(chunks)["department"]) == sorted(
            pandas.concat(chunks)["department"]
        )
        cost, records = charges.since()
        assert cost == pytest.approx(1.0) and records == [("accepted", BY_DEPARTMENT)]
    finally:
        engine.dispose()


def test_psql(server: RunningServer) -> None:
    charges = Charges(server)
    shown = server.psql(
        "alice",
        "BEGIN",
        f"DECLARE c SCROLL CURSOR FOR {BY_DEPARTMENT}",
        "FETCH 2 FROM c",
        "FETCH PRIOR c",
        "MOVE LAST IN c",
        "FETCH BACKWARD 2 c",
        "CLOSE c",
        "COMMIT",
    )
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[:2] == ["BEGIN", "DECLARE CURSOR"]
    assert "(2 rows)" in lines and "(1 row)" in lines and "MOVE 1" in lines
    assert lines[-2:] == ["CLOSE CURSOR", "COMMIT"]
    assert "this answer cost ε=1" in shown.stderr  # the NOTICE, with DECLARE CURSOR
    # One Query of several statements; then psql's own cursor for FETCH_COUNT.
    several = server.psql(
        "alice", f"BEGIN; DECLARE c CURSOR FOR {BY_DEPARTMENT}; FETCH 3 FROM c; COMMIT"
    )
    assert several.returncode == 0, several.stderr
    assert "(3 rows)" in several.stdout
    env_fetch_count = server.psql("alice", "\\set FETCH_COUNT 3", BY_DEPARTMENT)
    assert env_fetch_count.returncode == 0, env_fetch_count.stderr
    assert f"({DEPARTMENTS} rows)" in env_fetch_count.stdout
    cost, records = charges.since()
    assert cost == pytest.approx(3.0)
    assert records == [("accepted", BY_DEPARTMENT)] * 3
