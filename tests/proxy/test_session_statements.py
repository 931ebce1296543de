"""Session statements without data: transactions, savepoints, DISCARD and DEALLOCATE, and
their effect on the connection's prepared statements (proxy.extended)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from accountant import AnalystBudget, Epsilon
from proxy.extended import ExtendedQueries
from proxy.pipeline import Asker
from proxy.protocol.messages import Parse
from proxy.seam import QueryError, TransactionStatus
from proxy.session import AnalystSession


class RefusingPipeline:
    """Session statements never reach the pipeline; anything else is refused here."""

    async def answer(self, *args: object, **kwargs: object) -> None:
        raise QueryError("42P01", "no such table")


def session() -> AnalystSession:
    budget = AnalystBudget(total=Epsilon("10"), default_per_query=Epsilon("1"))
    pipeline = cast(Any, RefusingPipeline())
    return AnalystSession(pipeline, Asker("alice", budget, "127.0.0.1"), "test")


def run(s: AnalystSession, *statements: str) -> list[str]:
    async def go() -> list[str]:
        return [(await s.execute(sql)).tag for sql in statements]

    return asyncio.run(go())


def test_pgjdbc_and_metabase_sequences() -> None:
    s = session()
    tags = run(
        s,
        "SET extra_float_digits = 3",
        "SET application_name = 'PostgreSQL JDBC Driver'",
        "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ UNCOMMITTED",
        "SHOW TRANSACTION ISOLATION LEVEL",
        "BEGIN READ ONLY",
        "COMMIT",
        "START TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY",
        "ROLLBACK",
    )
    assert tags == ["SET", "SET", "SET", "SHOW", "BEGIN", "COMMIT", "BEGIN", "ROLLBACK"]
    assert s.transaction_status is TransactionStatus.IDLE


def test_savepoints() -> None:
    s = session()
    with pytest.raises(QueryError) as outside:
        run(s, "SAVEPOINT a")
    assert outside.value.sqlstate == "25P01"
    assert run(s, "BEGIN", "SAVEPOINT a", "SAVEPOINT b", "RELEASE SAVEPOINT b") == [
        "BEGIN",
        "SAVEPOINT",
        "SAVEPOINT",
        "RELEASE",
    ]
    with pytest.raises(QueryError):
        run(s, "SELECT nonsense FROM nowhere")  # fails the transaction
    assert s.transaction_status is TransactionStatus.FAILED
    assert run(s, "ROLLBACK TO SAVEPOINT a") == ["ROLLBACK"]
    assert s.transaction_status is TransactionStatus.IN_TRANSACTION
    with pytest.raises(QueryError) as unknown:
        run(s, "RELEASE b")
    assert unknown.value.sqlstate == "3B001"
    assert run(s, "ROLLBACK") == ["ROLLBACK"]


def test_discard_all_resets_and_refuses_in_a_transaction() -> None:
    s = session()
    assert run(s, "SET dpproxy.epsilon = 0.5", "SET timezone = 'Europe/Paris'") == ["SET"] * 2
    assert run(s, "DISCARD ALL", "DISCARD PLANS", "DEALLOCATE ALL", "DEALLOCATE x") == [
        "DISCARD ALL",
        "DISCARD PLANS",
        "DEALLOCATE ALL",
        "DEALLOCATE",
    ]

    async def shown() -> list[object]:
        e = await s.execute("SHOW dpproxy.epsilon")
        t = await s.execute("SHOW timezone")
        return [e.rows[0][0], t.rows[0][0]]

    assert asyncio.run(shown()) == ["1", "UTC"]
    run(s, "BEGIN")
    with pytest.raises(QueryError) as caught:
        run(s, "DISCARD ALL")
    assert caught.value.sqlstate == "25001"


def test_deallocate_and_discard_drop_prepared_statements() -> None:
    ext = ExtendedQueries()
    for name in ("a", "B", "c"):
        ext.parse(Parse(name, "SELECT 1", ()))
    with pytest.raises(QueryError) as caught:
        ext.check_session_statement("DEALLOCATE nope")
    assert caught.value.sqlstate == "26000"
    ext.check_session_statement('DEALLOCATE PREPARE "B"')
    ext.after_session_statement('DEALLOCATE PREPARE "B"')
    ext.after_session_statement("deallocate a")
    assert set(ext.statements) == {"c"}
    ext.after_session_statement("DISCARD PLANS")
    assert set(ext.statements) == {"c"}
    ext.after_session_statement("DISCARD ALL")
    assert ext.statements == {}
    ext.parse(Parse("d", "SELECT 1", ()))
    ext.after_session_statement("DEALLOCATE ALL")
    assert ext.statements == {}


@pytest.mark.parametrize("value", ["1e-300", "1e-10", "0.1234567891"])
def test_an_epsilon_finer_than_the_ledger_keeps_is_refused_not_rounded_up(value: str) -> None:
    s = session()
    with pytest.raises(QueryError) as caught:
        run(s, f"SET dpproxy.epsilon = {value}")
    assert caught.value.sqlstate == "22023" and "9 decimal places" in caught.value.message
    assert run(s, "SET dpproxy.epsilon = 0.000000001", "SET dpproxy.epsilon = 1e-9") == ["SET"] * 2
    with pytest.raises(QueryError) as zero:
        run(s, "SET dpproxy.epsilon = 0")
    assert zero.value.hint is not None
