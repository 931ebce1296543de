"""The extended protocol's statements and portals over a real session (DuckDB, the
ledger): what a portal may run, when it ends, and the limits a connection is held to.

Messages go through :class:`proxy.extended.ExtendedQueries` as the server hands them
over; the backend messages it returns are split and read back. Nothing is mocked.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from accountant import AnalystBudget, Decision, Epsilon
from proxy import extended
from proxy.asker import Asker
from proxy.backends.duckdb import DuckDBBackend
from proxy.extended import ExtendedQueries
from proxy.ledger import AsyncLedger
from proxy.pipeline import Pipeline
from proxy.postprocess import PostProcessor
from proxy.protocol.messages import Bind, Close, Describe, Execute, Parse
from proxy.seam import QueryError, TransactionStatus
from proxy.session import AnalystSession
from rewriter import OpenDPNoise
from tests.rewriter.tables import catalog, duckdb_file

COUNT = "SELECT COUNT(*) FROM visits"
BY_DEPARTMENT = "SELECT department, COUNT(*) FROM visits GROUP BY department ORDER BY 1"
Message = Parse | Bind | Describe | Execute | Close


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[Pipeline]:
    ledger = AsyncLedger(tmp_path / "state.db")
    backend = DuckDBBackend(duckdb_file(tmp_path / "data.duckdb"), timeout_seconds=10)
    yield Pipeline(catalog("main"), backend, ledger, OpenDPNoise(), PostProcessor())
    ledger.close()


class Connection:
    """One connection: its prepared statements and portals, and its analyst's session."""

    def __init__(self, pipeline: Pipeline) -> None:
        budget = AnalystBudget(total=Epsilon(10), default_per_query=Epsilon("0.1"))
        self.session = AnalystSession(pipeline, Asker("alice", budget, "127.0.0.1"), "test")
        self.queries = ExtendedQueries()
        self.ledger = pipeline.ledger

    async def send(self, *messages: Message) -> list[tuple[str, str]]:
        """Each backend message as (type, text); an error ends the batch, as at Sync."""
        out: list[tuple[str, str]] = []
        for msg in messages:
            try:
                out += split(await self.handle(msg))
            except QueryError as error:
                return [*out, ("E", error.sqlstate)]
        return out

    async def handle(self, msg: Message) -> bytes:
        if isinstance(msg, Parse):
            return self.queries.parse(msg)
        if isinstance(msg, Bind):
            return self.queries.bind(msg)
        if isinstance(msg, Describe):
            return await self.queries.describe(self.session, msg)
        if isinstance(msg, Execute):
            return await self.queries.execute(self.session, msg)
        return self.queries.close(msg)

    async def decisions(self) -> list[Decision]:
        return [r.decision for r in await self.ledger.records("alice", ())]


def split(data: bytes) -> list[tuple[str, str]]:
    """Backend messages: CommandComplete as its tag, DataRow as its column count."""
    out = []
    while data:
        kind, length = chr(data[0]), struct.unpack("!i", data[1:5])[0]
        body, data = data[5 : 1 + length], data[1 + length :]
        if kind == "C":
            out.append((kind, body.rstrip(b"\x00").decode()))
        elif kind in "DT":
            out.append((kind, str(struct.unpack("!h", body[:2])[0])))
        else:
            out.append((kind, ""))
    return out


def parse(sql: str, name: str = "") -> Parse:
    return Parse(name, sql, ())


def bind(portal: str = "", statement: str = "", formats: tuple[int, ...] = ()) -> Bind:
    return Bind(portal, statement, (), (), formats)


def execute(portal: str = "", max_rows: int = 0) -> Execute:
    return Execute(portal, max_rows)


def test_a_completed_portal_returns_no_rows_and_never_runs_again(pipeline: Pipeline) -> None:
    async def go() -> None:
        conn = Connection(pipeline)
        first = await conn.send(parse(COUNT), bind("p"), execute("p"))
        assert first[1:] == [("2", ""), ("N", ""), ("D", "1"), ("C", "SELECT 1")]
        charged = await conn.decisions()
        assert charged == [Decision.ACCEPTED]
        # As PostgreSQL: an Execute of a portal that ran to the end returns no rows.
        assert await conn.send(execute("p"), execute("p")) == [("C", "SELECT 0")] * 2
        # A statement without rows (SET) cannot be run again at all.
        done = await conn.send(parse("SET dpproxy.epsilon = 0.2"), bind("s"), execute("s"))
        assert done[-1] == ("C", "SET")
        assert await conn.send(execute("s")) == [("E", "55000")]
        assert await conn.decisions() == charged  # nothing ran or was charged again

    asyncio.run(go())


def test_rows_after_a_suspension_are_counted_per_execute(pipeline: Pipeline) -> None:
    async def go() -> None:
        conn = Connection(pipeline)
        first = await conn.send(parse(BY_DEPARTMENT), bind("p"), execute("p", 2))
        assert first[-3:] == [("D", "2"), ("D", "2"), ("s", "")]
        rest = await conn.send(execute("p", 0))
        assert rest == [("D", "2"), ("C", "SELECT 1")]  # PostgreSQL's tag: this Execute's rows
        assert await conn.send(execute("p")) == [("C", "SELECT 0")]

    asyncio.run(go())


def test_a_failed_portal_is_never_run_again(pipeline: Pipeline) -> None:
    async def go() -> None:
        conn = Connection(pipeline)
        refused = await conn.send(parse("SELECT * FROM visits"), bind("p"), execute("p"))
        assert refused[-1] == ("E", "0A000")
        assert await conn.decisions() == [Decision.REJECTED]
        assert await conn.send(execute("p")) == [("E", "55000")]
        assert await conn.send(Describe("P", "p")) == [("E", "55000")]
        assert await conn.decisions() == [Decision.REJECTED]  # not audited (or run) twice

    asyncio.run(go())


def test_portals_end_with_their_transaction(pipeline: Pipeline) -> None:
    async def go() -> None:
        conn = Connection(pipeline)
        await conn.send(parse(COUNT, "st"), bind("p1", "st"))
        assert await conn.send(bind("p1", "st")) == [("E", "42P03")]  # as PostgreSQL
        conn.queries.sync(
            conn.session.transaction_status, conn.session.transactions_ended
        )  # Sync outside a block
        assert conn.queries.portals == {}
        assert await conn.send(bind("p1", "st")) == [("2", "")]  # the name is free again
        # In a transaction block, portals outlive Sync; COMMIT ends them.
        await conn.send(parse("BEGIN"), bind(), execute())
        await conn.send(bind("p2", "st"))
        conn.queries.sync(conn.session.transaction_status, conn.session.transactions_ended)
        assert set(conn.queries.portals) == {"p1", "", "p2"}
        assert await conn.send(parse("COMMIT"), bind("c"), execute("c")) == [
            ("1", ""),
            ("2", ""),
            ("C", "COMMIT"),
        ]
        assert set(conn.queries.portals) == {"c"}
        assert await conn.send(execute("p2")) == [("E", "34000")]
        conn.queries.sync(TransactionStatus.IDLE, conn.session.transactions_ended)
        assert conn.queries.portals == {}
        assert await conn.decisions() == []  # p1 and p2 were never run

    asyncio.run(go())


def test_a_described_statement_keeps_its_columns(pipeline: Pipeline) -> None:
    async def go() -> None:
        conn = Connection(pipeline)
        described = await conn.send(parse(COUNT, "st"), Describe("S", "st"))
        assert described == [("1", ""), ("t", ""), ("T", "1")]
        await conn.send(parse("SET dpproxy.report = columns"), bind(), execute())
        # The client was told one column; three would come now (count, _ci95, _bias):
        # refused before anything is charged, as PostgreSQL refuses a changed plan.
        assert await conn.send(bind("", "st"), execute()) == [("2", ""), ("E", "0A000")]
        assert await conn.decisions() == []
        # Described again, the statement runs with its new columns.
        assert (await conn.send(Describe("S", "st")))[-1] == ("T", "3")
        ran = await conn.send(bind("", "st"), execute())
        assert ("D", "3") in ran and ran[-1] == ("C", "SELECT 1")
        # A portal described, then a SET before it runs: refused too.
        await conn.send(bind("p", "st"), Describe("P", "p"))
        await conn.send(parse("SET dpproxy.report = notice"), bind(), execute())
        assert await conn.send(execute("p")) == [("E", "0A000")]
        assert await conn.decisions() == [Decision.ACCEPTED]

    asyncio.run(go())


def test_result_format_count_is_checked_before_the_charge(pipeline: Pipeline) -> None:
    async def go() -> None:
        conn = Connection(pipeline)
        sent = await conn.send(parse(COUNT), bind("", "", (0, 0)), execute())
        assert sent[-1] == ("E", "08P01")  # two formats for one column
        assert await conn.decisions() == []

    asyncio.run(go())


def test_deeply_nested_statement_is_refused_cleanly(pipeline: Pipeline) -> None:
    deep = "SELECT COUNT(*) FROM visits WHERE " + "(" * 3000 + "cost > $1" + ")" * 3000

    async def go() -> None:
        conn = Connection(pipeline)
        assert await conn.send(parse(deep)) == [("E", "54001")]  # as a simple Query's
        assert conn.queries.statements == {}

    asyncio.run(go())


def test_statement_length_and_count_are_limited(pipeline: Pipeline) -> None:
    async def go() -> None:
        conn = Connection(pipeline)
        too_long = COUNT + " WHERE cost > $1" + " AND cost > 1" * 10_000
        assert await conn.send(parse(too_long)) == [("E", "54000")]
        for number in range(extended.MAX_PREPARED_STATEMENTS):
            assert await conn.send(parse(COUNT, f"s{number}")) == [("1", "")]
        assert await conn.send(parse(COUNT, "one more")) == [("E", "54000")]
        assert await conn.send(parse(COUNT)) == [("1", "")]  # the unnamed one is replaced
        await conn.send(Close("S", "s0"))
        assert await conn.send(parse(COUNT, "one more")) == [("1", "")]
        # A connection's statements hold at most MAX_PREPARED_CHARACTERS of SQL together.
        conn = Connection(pipeline)
        long = COUNT + " WHERE cost > 1" * 6_000  # 90,000 characters, without parameters
        held = 0
        while held + len(long) <= extended.MAX_PREPARED_CHARACTERS:
            assert await conn.send(parse(long, f"l{held}")) == [("1", "")]
            held += len(long)
        assert await conn.send(parse(long, "over")) == [("E", "54000")]
        await conn.send(parse("DEALLOCATE ALL"), bind(), execute())
        assert await conn.send(parse(long, "over")) == [("1", "")]
        # Portals too (in a transaction block they outlive Sync).
        await conn.send(parse(COUNT, "st"))
        for number in range(extended.MAX_PORTALS):
            assert await conn.send(bind(f"p{number}", "st")) == [("2", "")]
        assert await conn.send(bind("one more", "st")) == [("E", "54000")]
        assert await conn.decisions() == []

    asyncio.run(go())
