"""dpproxy.my_budget and dpproxy.my_queries: own rows only, never charged, only whole."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from accountant import AdminChange, AnalystBudget, Attempt, Decision, Epsilon
from proxy.ledger import AsyncLedger
from proxy.pipeline import Asker
from proxy.responders import SessionContext
from proxy.seam import QueryError
from proxy.selfservice import SelfServiceResponder

BUDGET = AnalystBudget(total=Epsilon(3), default_per_query=Epsilon("0.5"))


def context(ledger: AsyncLedger, analyst: str) -> SessionContext:
    asker = Asker(analyst=analyst, budget=BUDGET, address="127.0.0.1")
    return SessionContext(asker, "demo", {}, catalog=None, ledger=ledger)  # type: ignore[arg-type]


def ask(ledger: AsyncLedger, analyst: str, sql: str) -> Any:
    return asyncio.run(SelfServiceResponder().answer(sql, context(ledger, analyst)))


@pytest.fixture
def ledger(tmp_path: Path) -> Any:
    opened = AsyncLedger(tmp_path / "state.db")
    change = AdminChange("root@host", "test")
    opened.seed_analysts({"bob": ("v", BUDGET), "eve": ("v", BUDGET)}, change)

    async def fill() -> None:
        for who in ("bob", "eve", "bob"):
            attempt = Attempt(who, "10.0.0.1:1", f"SELECT COUNT(*) FROM visits -- {who}")
            reservation = await opened.reserve(attempt, Epsilon("0.5"), BUDGET)
            await opened.complete(
                reservation, decision=Decision.ACCEPTED, reason=None, rows=1, duration_ms=3.0
            )
        await opened.refuse(Attempt("bob", "10.9.9.9", ""), Decision.AUTH_FAILED, "bad pw", None)

    asyncio.run(fill())
    yield opened
    opened.close()


def test_my_budget(ledger: AsyncLedger) -> None:
    result = ask(ledger, "bob", "select * from dpproxy.my_budget;")
    assert result.rows == (("bob", "3", "1", "2", "0.5", "3"),)
    assert [c.name for c in result.columns][:4] == [
        "analyst",
        "epsilon_total",
        "epsilon_spent",
        "epsilon_remaining",
    ]


def test_my_queries_are_own_and_free(ledger: AsyncLedger) -> None:
    result = ask(ledger, "bob", 'SELECT * FROM "dpproxy"."my_queries"')
    assert result.tag == "SELECT 2"
    assert all(row[3].endswith("-- bob") for row in result.rows)  # no eve, no failed login
    assert [row[7] for row in result.rows] == ["2.5", "2"]
    last = ask(ledger, "bob", "SELECT * FROM dpproxy.my_queries LIMIT 1")
    assert last.rows == result.rows[-1:]
    assert ask(ledger, "bob", "SELECT * FROM dpproxy.my_budget").rows[0][2] == "1"  # unchanged


def test_only_whole_views_and_nothing_else(ledger: AsyncLedger) -> None:
    assert ask(ledger, "bob", "SELECT COUNT(*) FROM visits") is None
    with pytest.raises(QueryError, match="read whole"):
        ask(ledger, "bob", "SELECT sql FROM dpproxy.my_queries WHERE analyst = 'eve'")
