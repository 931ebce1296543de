"""dpproxy.my_budget and dpproxy.my_queries: own rows only, never charged, only whole."""

from __future__ import annotations

import asyncio
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from accountant import AdminChange, AnalystBudget, Attempt, Cost, Decision, Epsilon, Rho
from proxy.asker import Asker
from proxy.ledger import AsyncLedger
from proxy.responders import SessionContext
from proxy.seam import ColumnDescription, QueryError
from proxy.selfservice import BUDGET_COLUMNS, QUERY_COLUMNS, SelfServiceResponder

BUDGET = AnalystBudget(total=Epsilon(3), default_per_query=Epsilon("0.5"))
ADMIN_DOC = Path(__file__).resolve().parents[2] / "docs" / "admin.md"


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
    assert result.rows == (("bob", "3", "1", "2", "0.5", "3", "0.000001", "0", "0.000001"),)
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


def test_my_queries_show_answers_sent_again_from_the_cache(ledger: AsyncLedger) -> None:
    """Every attempt: an answer reused from the answer cache is listed, at ε 0."""
    sql = "SELECT COUNT(*) FROM visits -- bob"
    asyncio.run(
        ledger.cached(Attempt("bob", "10.0.0.1:1", sql), "the answer of query 1", 1, 0.5, BUDGET)
    )
    result = ask(ledger, "bob", "SELECT * FROM dpproxy.my_queries")
    assert result.tag == "SELECT 3"
    assert result.rows[-1][3:7] == (sql, "cached", "the answer of query 1", "0")
    assert ask(ledger, "bob", "SELECT * FROM dpproxy.my_budget").rows[0][2] == "1"  # unchanged


def test_only_whole_views_and_nothing_else(ledger: AsyncLedger) -> None:
    assert ask(ledger, "bob", "SELECT COUNT(*) FROM visits") is None
    with pytest.raises(QueryError, match="read whole"):
        ask(ledger, "bob", "SELECT sql FROM dpproxy.my_queries WHERE analyst = 'eve'")


def spend_delta(ledger: AsyncLedger, delta: str) -> None:
    """bob's GROUP BY over keys found in the data: ε=0.5 and ``delta``, answered."""

    async def charge() -> None:
        attempt = Attempt("bob", "10.0.0.1:1", "SELECT diagnosis, COUNT(*) FROM visits GROUP BY 1")
        cost = Cost(Epsilon("0.5"), Rho.zero(), Decimal(delta))
        reservation = await ledger.reserve(attempt, cost, BUDGET)
        await ledger.complete(
            reservation, decision=Decision.ACCEPTED, reason=None, rows=4, duration_ms=9.0
        )

    asyncio.run(charge())


def named(result: Any) -> list[dict[str, Any]]:
    names = [c.name for c in result.columns]
    return [dict(zip(names, row, strict=True)) for row in result.rows]


def test_delta_spent_shows_exactly(ledger: AsyncLedger) -> None:
    spend_delta(ledger, "1.5e-9")
    spend_delta(ledger, "2.5e-15")  # rounded up to whole 1e-15 units: 3e-15
    budget = named(ask(ledger, "bob", "SELECT * FROM dpproxy.my_budget"))[0]
    assert (budget["delta_total"], budget["delta_spent"], budget["delta_remaining"]) == (
        "0.000001",
        "0.000000001500003",
        "0.000000998499997",
    )
    queries = named(ask(ledger, "bob", "SELECT * FROM dpproxy.my_queries"))
    deltas = [q["delta"] for q in queries]
    assert deltas == ["0", "0", "0.0000000015", "0.000000000000003"]  # COUNTs spend no δ
    assert [q["epsilon"] for q in queries] == ["0.5"] * 4
    eve = named(ask(ledger, "eve", "SELECT * FROM dpproxy.my_budget"))[0]
    assert (eve["delta_spent"], eve["delta_remaining"]) == ("0", "0.000001")  # bob's is his


def test_unknown_analyst_has_nothing_left(ledger: AsyncLedger) -> None:
    row = ask(ledger, "carol", "SELECT * FROM dpproxy.my_budget").rows[0]
    assert row == ("carol", "0", None, "0", None, None, "0", None, "0")
    assert ask(ledger, "carol", "SELECT * FROM dpproxy.my_queries").rows == ()


@pytest.mark.parametrize(
    ("view", "columns"), [("my_budget", BUDGET_COLUMNS), ("my_queries", QUERY_COLUMNS)]
)
def test_docs_list_every_column(view: str, columns: tuple[ColumnDescription, ...]) -> None:
    found = re.search(rf"FROM dpproxy\.{view}; +-- (.+)$", ADMIN_DOC.read_text(), re.M)
    assert found, f"docs/admin.md does not list the columns of dpproxy.{view}"
    assert found.group(1).split(", ") == [c.name for c in columns]
