"""Transaction control read (proxy.transaction_statements) and answered by the session
(proxy.transaction_block): AND
CHAIN, START TRANSACTION, transaction modes, SET SESSION CHARACTERISTICS.

tests/integration/test_transaction_statements.py compares the answers with PostgreSQL's
over the wire; these check the reading of the statements and what only dpproxy does.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from accountant import AnalystBudget, Epsilon
from proxy.asker import Asker
from proxy.seam import QueryError, StatementResult, TransactionStatus
from proxy.session import AnalystSession
from proxy.statements import Kind, SessionStatement, recognize
from proxy.transaction_statements import (
    DEFERRABLE,
    ISOLATION,
    READ_ONLY,
    Begin,
    End,
    ImportSnapshot,
    SetModes,
    TransactionStatement,
    read_transaction_statement,
)
from tests.proxy.test_session_statements import changes


class RefusingPipeline:
    """Transaction statements never reach the pipeline."""

    async def answer(self, *args: object, **kwargs: object) -> None:
        raise QueryError("42P01", "no such table")


def session() -> AnalystSession:
    budget = AnalystBudget(total=Epsilon("10"), default_per_query=Epsilon("1"))
    return AnalystSession(cast(Any, RefusingPipeline()), Asker("alice", budget, "::1"), "t")


def run(s: AnalystSession, *statements: str) -> list[StatementResult]:
    async def go() -> list[StatementResult]:
        return [await s.execute(sql) for sql in statements]

    return asyncio.run(go())


def error(s: AnalystSession, sql: str) -> QueryError:
    with pytest.raises(QueryError) as caught:
        run(s, sql)
    return caught.value


def status(s: AnalystSession) -> TransactionStatus:
    return s.transaction_status  # read again after each statement (mypy: not narrowed)


def shown(s: AnalystSession, name: str) -> object:
    [result] = run(s, f"SHOW {name}")
    return result.rows[0][0]


SERIALIZABLE_READ_ONLY = ((ISOLATION, "serializable"), (READ_ONLY, "on"))


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("BEGIN", Begin(False, ())),
        ("begin work;", Begin(False, ())),
        ("START TRANSACTION", Begin(True, ())),
        (
            "BEGIN TRANSACTION ISOLATION LEVEL SERIALIZABLE READ ONLY",
            Begin(False, SERIALIZABLE_READ_ONLY),
        ),
        (
            "start transaction isolation level serializable, read only",
            Begin(True, SERIALIZABLE_READ_ONLY),
        ),
        (
            "BEGIN ISOLATION LEVEL READ UNCOMMITTED, NOT DEFERRABLE READ WRITE",
            Begin(
                False, ((ISOLATION, "read uncommitted"), (DEFERRABLE, "off"), (READ_ONLY, "off"))
            ),
        ),
        ("COMMIT", End(commit=True)),
        ("END TRANSACTION AND CHAIN", End(commit=True, chain=True)),
        ("commit work and no chain", End(commit=True)),
        ("ROLLBACK AND CHAIN", End(commit=False, chain=True)),
        ("abort /* c */ and chain;", End(commit=False, chain=True)),
        ("ROLLBACK PREPARED 'x'", End(commit=False, prepared="x")),
        ("SET TRANSACTION READ ONLY", SetModes(((READ_ONLY, "on"),), session=False, local=False)),
        (
            "SET LOCAL TRANSACTION DEFERRABLE",
            SetModes(((DEFERRABLE, "on"),), session=False, local=True),
        ),
        (
            "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL REPEATABLE READ",
            SetModes(((ISOLATION, "repeatable read"),), session=True, local=False),
        ),
        (
            "SET LOCAL SESSION CHARACTERISTICS AS TRANSACTION READ WRITE",
            SetModes(((READ_ONLY, "off"),), session=True, local=True),
        ),
        ("SET TRANSACTION SNAPSHOT '0-1'", ImportSnapshot("0-1")),
    ],
)
def test_transaction_statements_are_read_by_postgresqls_grammar(
    sql: str, expected: TransactionStatement
) -> None:
    assert read_transaction_statement(sql) == expected


@pytest.mark.parametrize(
    "sql",
    [
        "BEGIN,",
        "BEGIN READ ONLY,",
        "START",
        "START WORK",
        "BEGIN ISOLATION LEVEL SNAPSHOT",
        "BEGIN READ",
        "COMMIT AND",
        "COMMIT AND CHAIN CHAIN",
        "END PREPARED 'x'",
        "COMMIT foo",
        "SET TRANSACTION",
        "SET SESSION CHARACTERISTICS TRANSACTION READ ONLY",
    ],
)
def test_malformed_transaction_statements_are_syntax_errors(sql: str) -> None:
    with pytest.raises(QueryError) as caught:
        read_transaction_statement(sql)
    assert caught.value.sqlstate == "42601"


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("BEGIN,", SessionStatement(Kind.BEGIN)),  # a syntax error, not a query
        ("START", SessionStatement(Kind.BEGIN)),
        (
            "SET LOCAL SESSION CHARACTERISTICS AS TRANSACTION READ ONLY",
            SessionStatement(
                Kind.SET, "transaction", "AS TRANSACTION READ ONLY", local=True, transaction=True
            ),
        ),
        ("SET characteristics = 1", SessionStatement(Kind.SET, "characteristics", "1")),
        (
            "SET TRANSACTION READ ONLY",
            SessionStatement(Kind.SET, "transaction", "READ ONLY", transaction=True),
        ),
        # As in PostgreSQL, before = or TO these words are a parameter's name (42704 later).
        ("SET transaction = 1", SessionStatement(Kind.SET, "transaction", "1")),
        ('SET "transaction" TO 1', SessionStatement(Kind.SET, "transaction", "1")),
        ("SET SESSION session = 1", SessionStatement(Kind.SET, "session", "1")),
        ("SET local TO 1", SessionStatement(Kind.SET, "local", "1")),
        ("SET SESSION characteristics = 1", SessionStatement(Kind.SET, "characteristics", "1")),
    ],
)
def test_recognized_for_the_transaction_reader(sql: str, expected: SessionStatement) -> None:
    assert recognize(sql) == expected


def test_commit_and_chain_begins_a_block_with_the_same_isolation() -> None:
    s = session()
    begin, chained = run(s, "BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY", "COMMIT AND CHAIN")
    assert (begin.tag, chained.tag) == ("BEGIN", "COMMIT")
    assert status(s) is TransactionStatus.IN_TRANSACTION
    assert (shown(s, "transaction_isolation"), shown(s, "transaction_read_only")) == (
        "serializable",
        "on",
    )
    [rolled] = run(s, "ROLLBACK AND CHAIN")
    assert rolled.tag == "ROLLBACK" and status(s) is TransactionStatus.IN_TRANSACTION
    assert shown(s, "transaction_isolation") == "serializable"
    run(s, "COMMIT AND NO CHAIN")
    assert status(s) is TransactionStatus.IDLE
    assert shown(s, "transaction_isolation") == "read committed"


def test_and_chain_outside_a_block_is_an_error() -> None:
    s = session()
    for sql, message in [
        ("COMMIT AND CHAIN", "COMMIT AND CHAIN can only be used in transaction blocks"),
        ("END AND CHAIN", "COMMIT AND CHAIN can only be used in transaction blocks"),
        ("ABORT AND CHAIN", "ROLLBACK AND CHAIN can only be used in transaction blocks"),
    ]:
        caught = error(s, sql)
        assert (caught.sqlstate, caught.message) == ("25P01", message)
        assert status(s) is TransactionStatus.IDLE


def test_a_failed_block_chained_rolls_back_and_begins_again() -> None:
    s = session()
    run(s, "BEGIN ISOLATION LEVEL REPEATABLE READ", "SET LOCAL application_name = 'x'")
    error(s, "SELECT nonsense FROM nowhere")
    assert status(s) is TransactionStatus.FAILED
    # As PostgreSQL, the failed block's settings are undone at once (the error's Query
    # reports application_name back to t), not at its end.
    before = s.reported_parameters()
    assert before["application_name"] == "t"
    [chained] = run(s, "COMMIT AND CHAIN")
    assert chained.tag == "ROLLBACK"
    assert s.reported_parameters() == before
    assert status(s) is TransactionStatus.IN_TRANSACTION
    assert shown(s, "transaction_isolation") == "repeatable read"


def test_chain_in_a_querys_implicit_block_fails_the_query() -> None:
    s = session()
    s.begin_several()
    run(s, "SET application_name = 'x'")
    caught = error(s, "COMMIT AND CHAIN")
    assert caught.sqlstate == "25P01"
    before = s.reported_parameters()
    assert before["application_name"] == "t"  # undone at the error
    s.end_several(failed=True)
    assert s.reported_parameters() == before
    assert status(s) is TransactionStatus.IDLE
    # BEGIN makes the block explicit, which a chain then continues past the Query.
    s.begin_several()
    tags = [r.tag for r in run(s, "SET application_name = 'y'", "BEGIN", "COMMIT AND CHAIN")]
    s.end_several(failed=False)
    assert tags == ["SET", "BEGIN", "COMMIT"]
    assert status(s) is TransactionStatus.IN_TRANSACTION
    assert shown(s, "application_name") == "y"


def test_start_transaction_is_answered_start_transaction() -> None:
    s = session()
    [start] = run(s, "START TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
    assert start.tag == "START TRANSACTION"
    [again] = run(s, "START TRANSACTION")
    assert again.tag == "START TRANSACTION"
    assert [(n.code, n.message) for n in again.notices] == [
        ("25001", "there is already a transaction in progress")
    ]


def test_session_characteristics_set_the_defaults_and_report_read_only_when_it_changes() -> None:
    s = session()
    before = s.reported_parameters()
    run(s, "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE")
    assert s.reported_parameters() == before  # default_transaction_read_only stayed on
    assert shown(s, "default_transaction_isolation") == "serializable"
    assert shown(s, "transaction_isolation") == "serializable"  # a statement's own
    run(s, "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE")
    assert changes(before, s.reported_parameters()) == {"default_transaction_read_only": "off"}
    assert shown(s, "default_transaction_read_only") == "off"
    assert shown(s, "transaction_read_only") == "on"  # dpproxy's transactions: read only
    written = s.reported_parameters()
    run(s, "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
    assert changes(written, s.reported_parameters()) == {"default_transaction_read_only": "on"}


def test_session_characteristics_are_set_all_or_none() -> None:
    s = session()
    caught = error(s, "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE, DEFERRABLE")
    assert caught.sqlstate == "0A000"
    assert shown(s, "default_transaction_read_only") == "on"
    assert shown(s, "default_transaction_deferrable") == "off"


@pytest.mark.parametrize("sql", ["BEGIN DEFERRABLE", "SET transaction_deferrable = on"])
def test_deferrable_is_refused_and_opens_no_block(sql: str) -> None:
    s = session()
    caught = error(s, sql)
    assert caught.sqlstate == "0A000" and "dpproxy" in caught.message
    assert status(s) is TransactionStatus.IDLE


def test_read_write_in_a_block_fails_it_after_postgresqls_checks() -> None:
    s = session()
    run(s, "BEGIN", "SAVEPOINT a")
    caught = error(s, "SET TRANSACTION READ WRITE")
    assert (caught.sqlstate, caught.message) == (
        "25001",
        "cannot set transaction read-write mode inside a read-only transaction",
    )
    assert status(s) is TransactionStatus.FAILED


def test_startup_transaction_parameters_are_checked_and_change_nothing() -> None:
    s = session()
    s.apply_startup_parameters({"options": "-c transaction_isolation=read\\ committed"})
    assert shown(s, "transaction_isolation") == "read committed"
    for options in ("-c transaction_isolation=serializable", "-c transaction_deferrable=off"):
        with pytest.raises(QueryError) as caught:
            session().apply_startup_parameters({"options": options})
        assert caught.value.sqlstate == "25001"


@pytest.mark.parametrize("sql", ["ROLLBACK\vTO a", "RELEASE\vSAVEPOINT a", "ROLLBACK\vTO\va"])
def test_vertical_tab_is_not_white_space_between_the_words(sql: str) -> None:
    """As PostgreSQL 15's lexer (\\v is white space from 16 on): a syntax error, and the
    block fails; the savepoint stays. Before, ROLLBACK\\vTO a rolled back to it."""
    s = session()
    run(s, "BEGIN", "SAVEPOINT a")
    caught = error(s, sql)
    assert caught.sqlstate == "42601", caught
    assert status(s) is TransactionStatus.FAILED
