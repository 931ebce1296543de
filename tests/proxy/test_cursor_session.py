"""Cursors over a real pipeline (DuckDB, the ledger, the answer cache): a DECLARE's query
is answered, charged and audited exactly as the same query sent alone, once; FETCH and
MOVE charge nothing; what refuses a cursor refuses it before the charge; the extended
protocol describes a cursor's portal (psycopg's named cursors)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from accountant import AnalystBudget, Decision, Epsilon
from proxy.answers import AnswerCache, duckdb_file_version
from proxy.asker import Asker
from proxy.backends.duckdb import DuckDBBackend
from proxy.cursors import MAX_CURSORS
from proxy.extended import ExtendedQueries
from proxy.ledger import AsyncLedger
from proxy.pipeline import Pipeline
from proxy.postprocess import PostProcessor
from proxy.protocol.messages import Bind, Describe
from proxy.seam import QueryError, StatementResult, TransactionStatus
from proxy.session import AnalystSession
from rewriter import OpenDPNoise
from tests.proxy.test_extended_state import execute, parse, split
from tests.rewriter.tables import catalog, duckdb_file

BY_DEPARTMENT = "SELECT department, COUNT(*) AS n FROM visits GROUP BY department ORDER BY 1"
COUNT = "SELECT COUNT(*) FROM visits"


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[Pipeline]:
    database = duckdb_file(tmp_path / "data.duckdb")
    ledger = AsyncLedger(tmp_path / "state.db")
    cache = AnswerCache(duckdb_file_version(database), ttl_seconds=600)
    backend = DuckDBBackend(database, timeout_seconds=10)
    yield Pipeline(catalog("main"), backend, ledger, OpenDPNoise(), PostProcessor(), answers=cache)
    ledger.close()


def session(pipeline: Pipeline) -> AnalystSession:
    budget = AnalystBudget(total=Epsilon(10), default_per_query=Epsilon("0.1"))
    return AnalystSession(pipeline, Asker("alice", budget, "127.0.0.1"), "test")


async def run(s: AnalystSession, *statements: str) -> list[StatementResult]:
    return [await s.execute(sql) for sql in statements]


async def records(pipeline: Pipeline) -> list[tuple[Decision, str, Epsilon]]:
    found = await pipeline.ledger.records("alice", ())
    return [(r.decision, r.sql, r.epsilon) for r in found]


def test_declare_answers_the_query_once_and_fetch_costs_nothing(pipeline: Pipeline) -> None:
    async def go() -> None:
        s = session(pipeline)
        begun, declared = await run(s, "BEGIN", f"DECLARE c SCROLL CURSOR FOR {BY_DEPARTMENT}")
        assert declared.tag == "DECLARE CURSOR" and declared.columns is None
        assert "this answer cost ε=0.1" in declared.notices[0].message
        assert await records(pipeline) == [(Decision.ACCEPTED, BY_DEPARTMENT, Epsilon("0.1"))]
        first, rest, moved, again = await run(
            s, "FETCH 2 FROM c", "FETCH ALL FROM c", "MOVE ABSOLUTE 0 IN c", "FETCH ALL c"
        )
        assert (first.tag, rest.tag, moved.tag) == ("FETCH 2", "FETCH 1", "MOVE 0")
        rows = first.rows + rest.rows
        assert [r[0] for r in rows] == ["A", "B", "C"] and again.rows == rows
        assert first.columns is not None and [c.name for c in first.columns] == [
            "department",
            "n",
        ]
        assert len(await records(pipeline)) == 1  # FETCH and MOVE: nothing charged, no record
        # The same query sent alone: the same release, from the answer cache, at no cost.
        (alone,) = await run(s, BY_DEPARTMENT)
        assert alone.rows == rows and "cached" in alone.notices[0].message
        await run(s, "CLOSE c", "COMMIT")
        (held,) = await run(s, f"DECLARE h CURSOR WITH HOLD FOR {BY_DEPARTMENT}")
        assert "cached" in held.notices[0].message
        (fetched,) = await run(s, "FETCH ALL h")
        assert fetched.rows == rows
        decisions = [decision for decision, _, _ in await records(pipeline)]
        assert decisions == [Decision.ACCEPTED, Decision.CACHED, Decision.CACHED]

    asyncio.run(go())


@pytest.mark.parametrize(
    ("statements", "sqlstate"),
    [
        ([f"DECLARE c CURSOR FOR {BY_DEPARTMENT}"], "25P01"),
        ([f"DECLARE c BINARY CURSOR WITH HOLD FOR {BY_DEPARTMENT}"], "0A000"),
        (
            ["BEGIN", f"DECLARE c CURSOR FOR {COUNT}", f"DECLARE c CURSOR FOR {BY_DEPARTMENT}"],
            "42P03",
        ),
        (
            ["BEGIN", *(f"DECLARE c{n} CURSOR FOR {COUNT}" for n in range(MAX_CURSORS))]
            + [f"DECLARE more CURSOR FOR {BY_DEPARTMENT}"],
            "54000",
        ),
    ],
)
def test_refused_before_the_charge(
    pipeline: Pipeline, statements: list[str], sqlstate: str
) -> None:
    """Nothing charged, nothing audited: the query was never asked."""

    async def go() -> None:
        s = session(pipeline)
        await run(s, *statements[:-1])
        before = await records(pipeline)
        assert len(before) == max(len(statements) - 2, 0)  # (the first charged, then cached)
        with pytest.raises(QueryError) as refused:
            await run(s, statements[-1])
        assert refused.value.sqlstate == sqlstate
        assert await records(pipeline) == before

    asyncio.run(go())


def test_a_refused_query_is_refused_as_sent_alone(pipeline: Pipeline) -> None:
    """Its refusal and audit record are the query's; a syntax error says where it is in
    the DECLARE's text; the transaction block fails, as after any error."""

    async def go() -> None:
        s = session(pipeline)
        await run(s, "BEGIN")
        with pytest.raises(QueryError) as refused:
            await run(s, "DECLARE c CURSOR FOR SELECT * FROM visits")
        assert refused.value.sqlstate == "0A000"
        assert "individual rows" in refused.value.message
        assert s.transaction_status is TransactionStatus.FAILED
        assert await records(pipeline) == [(Decision.REJECTED, "SELECT * FROM visits", Epsilon(0))]
        await run(s, "ROLLBACK")
        with pytest.raises(QueryError) as misplaced:
            await run(s, "DECLARE c CURSOR WITH HOLD FOR\n  SELECT COUNT(*) FROM visits WHERE")
        assert misplaced.value.message == 'syntax error at or near "WHERE" (line 2, column 35)'
        with pytest.raises(QueryError) as gone:
            await run(s, "FETCH c")
        assert gone.value.sqlstate == "34000"

    asyncio.run(go())


def test_psycopg_named_cursor_messages(pipeline: Pipeline) -> None:
    """What psycopg sends for a named cursor with a parameter: DECLARE in the extended
    protocol (Describe of its portal: NoData), Describe of the cursor's portal (its
    columns), then FETCH, here in binary as for a binary cursor. One charge."""

    async def go() -> None:
        s = session(pipeline)
        queries = ExtendedQueries()
        await run(s, "BEGIN")
        sql = (
            f'DECLARE "big" CURSOR FOR {BY_DEPARTMENT.replace("visits", "visits WHERE stay > $1")}'
        )
        out = split(queries.parse(parse(sql)))
        out += split(queries.bind(Bind("", "", (0,), (b"0",), ())))
        out += split(await queries.describe(s, Describe("P", "")))
        out += split(await queries.execute(s, execute()))
        assert out == [("1", ""), ("2", ""), ("n", ""), ("N", ""), ("C", "DECLARE CURSOR")]
        queries.sync(s.transaction_status, s.transactions_ended)
        described = await queries.describe(s, Describe("P", "big"))
        assert split(described) == [("T", "2")]
        assert b"department\x00" in described
        out = split(queries.parse(parse('FETCH FORWARD 2 FROM "big"')))
        out += split(queries.bind(Bind("", "", (), (), (1,))))
        out += split(await queries.describe(s, Describe("P", "")))
        out += split(await queries.execute(s, execute()))
        assert out == [("1", ""), ("2", ""), ("T", "2"), ("D", "2"), ("D", "2"), ("C", "FETCH 2")]
        with pytest.raises(QueryError) as unknown:
            await queries.describe(s, Describe("P", "other"))
        assert unknown.value.sqlstate == "34000"
        ((decision, audited, epsilon),) = await records(pipeline)
        assert decision is Decision.ACCEPTED and epsilon == Epsilon("0.1")
        assert "WHERE stay > '0'" in audited and not audited.startswith("DECLARE")

    asyncio.run(go())
