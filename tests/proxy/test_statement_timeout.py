"""statement_timeout in seconds, and a statement stopped before its charge costs nothing.

The real pipeline (DuckDB, OpenDP, the state store): a CancelToken that fired before
Pipeline.answer reaches the reservation (a cancel request or the session's timeout while
the query was planned) ends the statement with 57014, charges nothing and audits it as an
error. End to end, with real clients: tests/integration/test_statement_timeout.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from accountant import AnalystBudget, Decision, Epsilon
from proxy.asker import Asker
from proxy.backends import STATEMENT_TIMEOUT, USER_REQUEST, CancelToken
from proxy.backends.duckdb import DuckDBBackend
from proxy.ledger import AsyncLedger
from proxy.pg_values import integer_setting, time_seconds
from proxy.pipeline import Pipeline
from proxy.postprocess import PostProcessor
from proxy.seam import QueryError
from proxy.session import AnalystSession
from rewriter import OpenDPNoise
from tests.rewriter.tables import catalog, duckdb_file

ALICE = Asker(
    "alice",
    AnalystBudget(total=Epsilon(10), default_per_query=Epsilon("0.5"), delta=Decimal(0)),
    "127.0.0.1",
)
COUNT = "SELECT COUNT(*) FROM visits"


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[Pipeline]:
    database = duckdb_file(tmp_path / "data.duckdb")
    ledger = AsyncLedger(tmp_path / "state.db")
    backend = DuckDBBackend(database, timeout_seconds=10)
    yield Pipeline(catalog("main"), backend, ledger, OpenDPNoise(), PostProcessor())
    ledger.close()


@pytest.mark.parametrize(
    ("written", "seconds"),
    [("2s", 2.0), ("1500ms", 1.5), ("1.5s", 1.5), ("1min", 60.0), ("0", 0.0), ("300", 0.3)],
)
def test_time_seconds_reads_what_set_shows(written: str, seconds: float) -> None:
    shown = integer_setting("statement_timeout", written, 0, 2**31 - 1, "ms")
    assert time_seconds(shown, "ms") == pytest.approx(seconds)


def test_time_seconds_refuses_other_values() -> None:
    with pytest.raises(ValueError, match="not a time"):
        time_seconds("soon", "ms")
    with pytest.raises(ValueError, match="not a unit of time"):
        time_seconds("2", "kB")


@pytest.mark.parametrize("reason", [USER_REQUEST, STATEMENT_TIMEOUT])
def test_a_token_fired_before_the_charge_charges_nothing(pipeline: Pipeline, reason: str) -> None:
    token = CancelToken()
    token.cancel(reason)
    with pytest.raises(QueryError) as raised:
        asyncio.run(pipeline.answer(ALICE, COUNT, Epsilon("0.5"), token))
    assert raised.value.sqlstate == "57014"
    assert raised.value.message == f"canceling statement due to {reason}"
    records = asyncio.run(pipeline.ledger.records("alice", tuple(Decision)))
    assert [(r.decision, r.reason, r.epsilon) for r in records] == [
        (Decision.ERROR, f"canceled due to {reason} before the charge", Epsilon(0))
    ]
    # The same query, not stopped, is charged.
    answered = asyncio.run(pipeline.answer(ALICE, COUNT, Epsilon("0.5"), CancelToken()))
    assert "this answer cost ε=0.5" in answered.notices[0].message


def test_the_first_reason_stays() -> None:
    token = CancelToken()
    token.cancel(STATEMENT_TIMEOUT)
    token.cancel()  # a cancel request after the timeout fired
    assert token.canceled and token.reason == STATEMENT_TIMEOUT


def test_a_session_timeout_during_planning_charges_nothing(pipeline: Pipeline) -> None:
    """1 ms runs out while the statement is planned (on a worker thread): 57014 and no
    charge; with statement_timeout = 0 the same statement is answered."""
    session = AnalystSession(pipeline, ALICE, "test")
    statement = "SELECT COUNT(*) FROM visits WHERE stay IN ({})".format(
        ", ".join(str(i) for i in range(2000))
    )

    async def go() -> None:
        await session.execute("SET statement_timeout = 1")
        with pytest.raises(QueryError, match="^canceling statement due to statement timeout$"):
            await session.execute(statement)
        await session.execute("SET statement_timeout = 0")
        answered = await session.execute(statement)
        assert "this answer cost ε=0.5" in answered.notices[0].message

    asyncio.run(go())
    assert [r.decision for r in asyncio.run(pipeline.ledger.records("alice", tuple(Decision)))] == [
        Decision.ERROR,
        Decision.ACCEPTED,
    ]
