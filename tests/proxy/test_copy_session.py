"""COPY (query) TO STDOUT in a session on a real pipeline (DuckDB, a SQLite ledger, the
answer cache on): the query is answered as the same query sent alone (its charge, its
audit record, its cached answer, its NOTICE), its rows written as COPY writes them; a COPY
that dpproxy refuses costs nothing and is audited; errors behave as a SELECT's."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from accountant import AnalystBudget, Decision, Epsilon
from proxy.answers import AnswerCache, duckdb_file_version
from proxy.asker import Asker
from proxy.backends.duckdb import DuckDBBackend
from proxy.copy_out import CopyFormat, copy_lines
from proxy.ledger import AsyncLedger
from proxy.pipeline import Pipeline
from proxy.postprocess import PostProcessor
from proxy.seam import QueryError, StatementResult, TransactionStatus
from proxy.session import AnalystSession
from rewriter import OpenDPNoise
from tests.rewriter.tables import catalog, duckdb_file

QUERY = "SELECT department, COUNT(*) AS n, AVG(cost) AS mean FROM visits GROUP BY department"


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[Pipeline]:
    database = duckdb_file(tmp_path / "data.duckdb")
    ledger = AsyncLedger(tmp_path / "state.db")
    cache = AnswerCache(duckdb_file_version(database), ttl_seconds=3600)
    backend = DuckDBBackend(database, timeout_seconds=10)
    yield Pipeline(catalog("main"), backend, ledger, OpenDPNoise(), PostProcessor(), answers=cache)
    ledger.close()


def session(pipeline: Pipeline) -> AnalystSession:
    budget = AnalystBudget(total=Epsilon(10), default_per_query=Epsilon("0.5"))
    return AnalystSession(pipeline, Asker("alice", budget, "127.0.0.1"), "test")


def run(s: AnalystSession, sql: str) -> StatementResult:
    return asyncio.run(s.execute(sql))


def refused(s: AnalystSession, sql: str) -> QueryError:
    with pytest.raises(QueryError) as error:
        run(s, sql)
    return error.value


def records(pipeline: Pipeline) -> list[tuple[Decision, str, Epsilon]]:
    found = asyncio.run(pipeline.ledger.records("alice", ()))
    return [(r.decision, r.sql, r.epsilon) for r in found]


def test_copy_is_the_query_answered_and_charged_once(pipeline: Pipeline) -> None:
    s = session(pipeline)
    copied = run(s, f"COPY ({QUERY}) TO STDOUT (FORMAT csv, HEADER)")
    assert copied.copy is not None and copied.columns is None
    assert copied.tag == f"COPY {len(copied.copy.lines) - 1}"
    assert copied.copy.columns == 3
    assert copied.copy.lines[0] == "department,n,mean\n"
    assert "this answer cost ε=0.5" in copied.notices[0].message
    # One record, of the query as sent alone (the text between the parentheses).
    assert records(pipeline) == [(Decision.ACCEPTED, QUERY, Epsilon("0.5"))]
    # The same query alone: the cached answer, free; COPY wrote its DataRows' text.
    alone = run(s, QUERY)
    assert "this answer was cached" in alone.notices[0].message
    assert alone.columns is not None
    names = [c.name for c in alone.columns]
    csv = CopyFormat(csv=True, header=True, delimiter=",", null="")
    assert tuple(copy_lines(csv, names, alone.rows)) == copied.copy.lines
    assert [r[0] for r in records(pipeline)] == [Decision.ACCEPTED, Decision.CACHED]


def test_a_select_then_its_copy_in_text_format(pipeline: Pipeline) -> None:
    s = session(pipeline)
    alone = run(s, QUERY)
    copied = run(s, f"copy (\n{QUERY}\n) to stdout")
    assert copied.copy is not None
    expected = ["\t".join("\\N" if v is None else v for v in row) + "\n" for row in alone.rows]
    assert list(copied.copy.lines) == expected
    assert "this answer was cached" in copied.notices[0].message
    assert [r[:2] for r in records(pipeline)] == [
        (Decision.ACCEPTED, QUERY),
        (Decision.CACHED, QUERY),
    ]


@pytest.mark.parametrize(
    "sql",
    [
        "COPY visits TO STDOUT",
        "COPY visits FROM STDIN",
        f"COPY ({QUERY}) TO '/tmp/answer.csv'",
        f"COPY ({QUERY}) TO STDOUT BINARY",
        f"COPY ({QUERY}) TO STDOUT (FORMAT csv, DELIMITER 'ab')",
        f"COPY ({QUERY}) TO STDOUT CSV FORCE QUOTE cost",  # no such column in the answer
    ],
)
def test_a_refused_copy_costs_nothing_and_is_audited(pipeline: Pipeline, sql: str) -> None:
    s = session(pipeline)
    error = refused(s, sql)
    assert records(pipeline) == [(Decision.REJECTED, sql, Epsilon(0))]
    found = asyncio.run(pipeline.ledger.records("alice", ()))
    assert found[0].reason == error.message


def test_force_quote_is_checked_before_the_charge(pipeline: Pipeline) -> None:
    s = session(pipeline)
    copied = run(s, f"COPY ({QUERY}) TO STDOUT CSV FORCE QUOTE department, n")
    assert copied.copy is not None
    assert all(line.startswith('"') for line in copied.copy.lines)
    assert [r[0] for r in records(pipeline)] == [Decision.ACCEPTED]  # described, not charged


def test_a_query_refused_is_refused_as_alone(pipeline: Pipeline) -> None:
    s = session(pipeline)
    error = refused(s, "COPY (SELECT * FROM visits) TO STDOUT CSV HEADER")
    assert error.message == refused(s, "SELECT * FROM visits").message
    assert records(pipeline) == [
        (Decision.REJECTED, "SELECT * FROM visits", Epsilon(0)),
        (Decision.REJECTED, "SELECT * FROM visits", Epsilon(0)),
    ]


def test_an_error_of_the_query_is_placed_in_the_copy(pipeline: Pipeline) -> None:
    s = session(pipeline)
    alone = refused(s, "SELECT COUNT(*) FROM visits WHERE cost = = 1")
    copied = refused(s, "COPY (\n  SELECT COUNT(*) FROM visits WHERE cost = = 1\n) TO STDOUT")
    assert alone.sqlstate == copied.sqlstate == "42601"
    column = int(alone.message.rsplit("column ", 1)[1].rstrip(")"))
    assert alone.message.endswith(f"(line 1, column {column})")
    # Where the same text is in the COPY: on its second line, after two spaces.
    assert copied.message == alone.message.replace("line 1", "line 2").replace(
        f"column {column})", f"column {column + 2})"
    )


def test_in_a_transaction_block_as_a_select(pipeline: Pipeline) -> None:
    s = session(pipeline)
    run(s, "BEGIN")
    copied = run(s, f"COPY ({QUERY}) TO STDOUT")
    assert copied.copy is not None
    assert s.transaction_status is TransactionStatus.IN_TRANSACTION
    refused(s, "COPY (SELECT * FROM visits) TO STDOUT")
    assert s.transaction_status is TransactionStatus.FAILED
    aborted = refused(s, f"COPY ({QUERY}) TO STDOUT")
    assert aborted.sqlstate == "25P02"
    run(s, "ROLLBACK")
    assert s.transaction_status is TransactionStatus.IDLE
    assert [r[0] for r in records(pipeline)] == [Decision.ACCEPTED, Decision.REJECTED]


def test_describe_says_no_rows_and_charges_nothing(pipeline: Pipeline) -> None:
    s = session(pipeline)
    assert asyncio.run(s.describe(f"COPY ({QUERY}) TO STDOUT CSV")) is None
    assert records(pipeline) == []
    with pytest.raises(QueryError):
        asyncio.run(s.describe("COPY visits TO STDOUT"))
    assert [r[0] for r in records(pipeline)] == [Decision.REJECTED]
