"""Session statements without data: transactions, savepoints, DISCARD and DEALLOCATE, and
their effect on the connection's prepared statements (proxy.extended)."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from accountant import AnalystBudget, Epsilon
from proxy.asker import Asker
from proxy.extended import ExtendedQueries
from proxy.protocol.messages import Parse
from proxy.seam import QueryError, StatementResult, TransactionStatus
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
    assert tags == ["SET", "SET", "SET", "SHOW", "BEGIN", "COMMIT", "START TRANSACTION", "ROLLBACK"]
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


def shown(s: AnalystSession, name: str) -> str | None:
    async def go() -> str | None:
        return (await s.execute(f"SHOW {name}")).rows[0][0]

    return asyncio.run(go())


def results(s: AnalystSession, *statements: str) -> list[StatementResult]:
    async def go() -> list[StatementResult]:
        return [await s.execute(sql) for sql in statements]

    return asyncio.run(go())


def changes(before: dict[str, str], after: dict[str, str]) -> dict[str, str]:
    """The reported values that differ in ``after``: what the server tells the client
    (ParameterStatus) before ReadyForQuery, as PostgreSQL 15 does (proxy.server)."""
    return {name: value for name, value in after.items() if before.get(name) != value}


def told(s: AnalystSession, sql: str) -> dict[str, str]:
    """Run ``sql``: the reported values it changed (``changes``)."""
    before = s.reported_parameters()
    run(s, sql)
    return changes(before, s.reported_parameters())


# Each dpproxy setting and two client parameters: the default for session(), two values.
SETTINGS = [
    ("dpproxy.epsilon", "1", "5", "0.5"),
    ("dpproxy.delta", "1e-9", "1e-7", "0"),
    ("dpproxy.mechanism", "laplace", "gaussian", "laplace"),
    ("dpproxy.report", "notice", "columns", "notice"),
    ("dpproxy.bias_check", "off", "on", "off"),
    ("extra_float_digits", "1", "3", "2"),
    ("timezone", "UTC", "Europe/Paris", "Asia/Tokyo"),
]


@pytest.mark.parametrize(("name", "default", "one", "two"), SETTINGS)
def test_settings_follow_postgresql_transactions(
    name: str, default: str, one: str, two: str
) -> None:
    s = session()
    # SET LOCAL lasts until the end of the transaction, COMMIT or ROLLBACK.
    run(s, "BEGIN", f"SET LOCAL {name} = '{one}'")
    assert shown(s, name) == one
    run(s, "COMMIT")
    assert shown(s, name) == default
    run(s, "START TRANSACTION", f"SET LOCAL {name} = '{one}'", "ROLLBACK")
    assert shown(s, name) == default
    # ROLLBACK undoes SET, SET SESSION, RESET and RESET ALL; COMMIT keeps them.
    run(s, "BEGIN", f"SET {name} = '{one}'", "ROLLBACK")
    assert shown(s, name) == default
    run(s, "BEGIN", f"SET SESSION {name} = '{one}'", "COMMIT")
    assert shown(s, name) == one
    run(s, "BEGIN", f"RESET {name}", "ABORT")
    assert shown(s, name) == one
    run(s, "BEGIN", "RESET ALL", "ROLLBACK")
    assert shown(s, name) == one
    # At COMMIT, SET LOCAL reverts to the value of the transaction's last plain SET.
    run(s, "BEGIN", f"SET {name} = '{two}'", f"SET LOCAL {name} = '{default}'", "END")
    assert shown(s, name) == two
    run(s, "BEGIN", f"SET LOCAL {name} = '{one}'", f"SET {name} = '{default}'", "COMMIT")
    assert shown(s, name) == default
    run(s, "BEGIN", f"SET {name} = '{one}'", f"SET LOCAL {name} = '{two}'", "RESET ALL", "COMMIT")
    assert shown(s, name) == default


def test_rollback_of_a_failed_transaction_restores_the_settings() -> None:
    s = session()
    run(s, "BEGIN", "SET dpproxy.epsilon = 5")
    with pytest.raises(QueryError):
        run(s, "SELECT nonsense FROM nowhere")
    assert run(s, "COMMIT") == ["ROLLBACK"]  # as PostgreSQL: a failed transaction rolls back
    assert shown(s, "dpproxy.epsilon") == "1"
    run(s, "BEGIN", "SET dpproxy.epsilon = 5")
    with pytest.raises(QueryError):
        run(s, "SET dpproxy.epsilon = nonsense")
    assert s.transaction_status is TransactionStatus.FAILED
    run(s, "ROLLBACK")
    assert shown(s, "dpproxy.epsilon") == "1"


def test_savepoints_keep_and_restore_settings() -> None:
    s = session()
    run(s, "BEGIN", "SET dpproxy.epsilon = 2", "SAVEPOINT a", "SET dpproxy.epsilon = 3")
    with pytest.raises(QueryError):
        run(s, "SELECT nonsense FROM nowhere")
    run(s, "ROLLBACK TO a")
    assert shown(s, "dpproxy.epsilon") == "2"
    run(s, "SAVEPOINT b", "SET LOCAL dpproxy.epsilon = 4", "RELEASE b")
    assert shown(s, "dpproxy.epsilon") == "4"
    run(s, "COMMIT")
    assert shown(s, "dpproxy.epsilon") == "2"
    run(s, "BEGIN", "SET LOCAL dpproxy.epsilon = 3", "SAVEPOINT a", "SET dpproxy.epsilon = 4")
    run(s, "RELEASE a", "COMMIT")
    assert shown(s, "dpproxy.epsilon") == "4"


def test_set_local_outside_a_transaction_warns_and_changes_nothing() -> None:
    s = session()
    before = s.reported_parameters()
    [result] = results(s, "SET LOCAL dpproxy.epsilon = 2")
    assert result.tag == "SET" and s.reported_parameters() == before
    [warning] = result.notices
    assert (warning.severity, warning.code) == ("WARNING", "25P01")
    assert warning.message == "SET LOCAL can only be used in transaction blocks"
    [result] = results(s, "SET LOCAL TIME ZONE 'Europe/Paris'")
    assert s.reported_parameters() == before and len(result.notices) == 1
    assert (shown(s, "dpproxy.epsilon"), shown(s, "timezone")) == ("1", "UTC")
    with pytest.raises(QueryError) as caught:  # the value is still checked
        run(s, "SET LOCAL dpproxy.epsilon = -1")
    assert caught.value.sqlstate == "22023"
    assert s.transaction_status is TransactionStatus.IDLE


def test_reported_parameters_are_sent_again_when_a_transaction_restores_them() -> None:
    s = session()
    run(s, "BEGIN")
    assert told(s, "SET LOCAL TIME ZONE 'Europe/Paris'") == {"TimeZone": "Europe/Paris"}
    assert told(s, "COMMIT") == {"TimeZone": "UTC"}
    run(s, "BEGIN", "SET application_name = 'x'")
    assert told(s, "ROLLBACK") == {"application_name": "test"}
    run(s, "BEGIN", "SET DateStyle = 'ISO, DMY'")
    before = s.reported_parameters()
    run(s, "COMMIT")
    assert s.reported_parameters() == before
    assert before["DateStyle"] == "ISO, DMY"


class RecordingPipeline:
    """Records the ε each query would be charged."""

    def __init__(self) -> None:
        self.charged: list[str] = []

    async def answer(
        self, asker: Asker, sql: str, epsilon: Epsilon, *args: object, **kw: object
    ) -> StatementResult:
        self.charged.append(epsilon.plain)
        return StatementResult(tag="SELECT 1")


def test_a_query_after_set_local_and_commit_is_charged_the_previous_epsilon() -> None:
    pipeline = RecordingPipeline()
    budget = AnalystBudget(total=Epsilon("10"), default_per_query=Epsilon("1"))
    s = AnalystSession(cast(Any, pipeline), Asker("alice", budget, "127.0.0.1"), "test")
    run(s, "SET dpproxy.epsilon = 0.25", "BEGIN", "SET LOCAL dpproxy.epsilon = 0.5")
    run(s, "SELECT COUNT(*) FROM visits", "COMMIT", "SELECT COUNT(*) FROM visits")
    run(s, "BEGIN", "SET dpproxy.epsilon = 2", "ROLLBACK", "SELECT COUNT(*) FROM visits")
    run(s, "SET LOCAL dpproxy.epsilon = 3", "SELECT COUNT(*) FROM visits")
    assert pipeline.charged == ["0.5", "0.25", "0.25", "0.25"]


@pytest.mark.parametrize(
    "sql",
    [
        "SET TimeZone = 'UTC'; SELECT 1",
        "SHOW TimeZone; SELECT 1",
        "RESET ALL; SELECT COUNT(*) FROM visits",
        "DISCARD ALL; SELECT 1",
        "SAVEPOINT a; SELECT 1",
        "SET dpproxy.epsilon = 0.5; SET dpproxy.epsilon = 5",
    ],
)
def test_a_session_statement_followed_by_another_is_refused_as_several(sql: str) -> None:
    s = session()
    with pytest.raises(QueryError) as refused:
        run(s, sql)
    assert (refused.value.sqlstate, refused.value.message) == (
        "0A000",
        "expected one statement, got several",
    )
    assert refused.value.hint == "send one statement per query"
    assert run(s, "SHOW TimeZone", "SET application_name = 'a;b'") == ["SHOW", "SET"]


def test_a_semicolon_in_an_escape_string_is_not_a_second_statement() -> None:
    s = session()
    assert run(s, "SET application_name = E'a\\';b'") == ["SET"]
    shown = asyncio.run(s.execute("SHOW application_name"))
    assert shown.rows == (("a';b",),)
