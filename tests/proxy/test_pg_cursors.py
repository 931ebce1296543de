"""pg_cursors: the cursors open in the asking session, as PostgreSQL 15's view lists them.

Before, pg_cursors was not emulated: ``SELECT 1 FROM pg_catalog.pg_cursors WHERE name =
'c'``, which psycopg (closing a named cursor it never executed, in a transaction) and
psycopg2 (closing any named cursor it did not execute) send, was refused with 0A000, and
in a transaction block that refusal aborted it. Now the catalog answers it from the
session's own cursors (as pg_settings from its settings), free, with PostgreSQL's columns
and types, through every lifetime a cursor has: COMMIT keeps those WITH HOLD, ROLLBACK
and ROLLBACK TO end those declared since, a failed block's end with it, CLOSE, CLOSE ALL
and DISCARD ALL end them. No session sees another's cursors, even when the catalog
remembered a translation or an answer. Real components: DuckDB, the state store, the
catalog responder and its engine process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from accountant import AnalystBudget, Epsilon
from proxy.asker import Asker
from proxy.catalog import translate as translate_module
from proxy.catalog.cache_keys import CACHED_CURSORS_LENGTH
from proxy.catalog.responder import CatalogResponder
from proxy.catalog.session_values import OpenCursor, SessionCursors, SessionValues
from proxy.catalog.translate import translation_key
from proxy.cursor_statements import Declare, Direction, Fetch, read_cursor_statement
from proxy.cursors import Cursors
from proxy.pipeline import Pipeline
from proxy.responders import SessionContext
from proxy.seam import ColumnDescription, QueryError, StatementResult, TransactionStatus
from proxy.session import AnalystSession
from tests.proxy.local_pipeline import local_pipeline

COUNT = "SELECT COUNT(*) FROM visits"
#: What psycopg 3 sends to close a named cursor it did not declare (and psycopg2, for
#: any it did not execute).
PSYCOPG_CHECK = "SELECT 1 FROM pg_catalog.pg_cursors WHERE name = '{}'"
LISTED = "SELECT name, statement, is_holdable, is_binary, is_scrollable FROM pg_cursors"


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    made = local_pipeline(tmp_path_factory.mktemp("pg_cursors"))
    yield made
    made.ledger.close()


@pytest.fixture(scope="module")
def responder(pipeline: Pipeline) -> Iterator[CatalogResponder]:
    made = CatalogResponder(pipeline.catalog)
    yield made
    made.close()


def session(pipeline: Pipeline, responder: CatalogResponder) -> AnalystSession:
    budget = AnalystBudget(total=Epsilon(100), default_per_query=Epsilon(1))
    return AnalystSession(
        pipeline, Asker("alice", budget, "127.0.0.1"), "test", responders=(responder,)
    )


def run(s: AnalystSession, *statements: str) -> list[StatementResult]:
    async def go() -> list[StatementResult]:
        return [await s.execute(sql) for sql in statements]

    return asyncio.run(go())


def names(s: AnalystSession) -> list[str]:
    [result] = run(s, "SELECT name FROM pg_cursors")
    return [str(row[0]) for row in result.rows]


def records(pipeline: Pipeline) -> int:
    return len(asyncio.run(pipeline.ledger.records("alice", ())))


def test_pg_cursors_lists_the_sessions_cursors_with_postgres_columns(
    pipeline: Pipeline, responder: CatalogResponder
) -> None:
    s = session(pipeline, responder)
    before = datetime.now(UTC)
    run(
        s,
        "BEGIN",
        f"DECLARE a CURSOR FOR {COUNT}",
        'DECLARE "B c" SCROLL CURSOR WITH HOLD FOR SELECT relname FROM pg_class',
        "declare d no scroll cursor for select 1",
    )
    after = datetime.now(UTC)
    [everything] = run(s, "SELECT * FROM pg_cursors")
    # PostgreSQL 15's columns and types: text, text, bool, bool, bool, timestamptz.
    assert everything.columns == (
        ColumnDescription("name", 25),
        ColumnDescription("statement", 25),
        ColumnDescription("is_holdable", 16, 1),
        ColumnDescription("is_binary", 16, 1),
        ColumnDescription("is_scrollable", 16, 1),
        ColumnDescription("creation_time", 1184, 8),
    )
    assert everything.tag == "SELECT 3"
    assert [row[:5] for row in everything.rows] == [
        ("a", f"DECLARE a CURSOR FOR {COUNT}", "f", "f", "f"),
        (
            "B c",
            'DECLARE "B c" SCROLL CURSOR WITH HOLD FOR SELECT relname FROM pg_class',
            "t",
            "f",
            "t",
        ),
        ("d", "declare d no scroll cursor for select 1", "f", "f", "f"),
    ]
    created = [datetime.fromisoformat(str(row[5])) for row in everything.rows]
    assert all(before - timedelta(seconds=1) <= t <= after for t in created)
    assert created == sorted(created)
    # Shown in the session's TimeZone, as every timestamptz.
    [kolkata] = run(
        s,
        "SET TimeZone = 'Asia/Kolkata'",
        "SELECT creation_time FROM pg_catalog.pg_cursors WHERE name = 'a'",
    )[1:]
    assert str(kolkata.rows[0][0]).endswith("+05:30")
    assert datetime.fromisoformat(str(kolkata.rows[0][0])) == created[0]


def test_psycopg_close_of_a_cursor_never_declared_does_not_fail_the_block(
    pipeline: Pipeline, responder: CatalogResponder
) -> None:
    s = session(pipeline, responder)
    charged = records(pipeline)
    run(s, "BEGIN", f"DECLARE c CURSOR FOR {COUNT}")
    [never] = run(s, PSYCOPG_CHECK.format("never"))
    assert (never.tag, never.rows) == ("SELECT 0", ())
    assert s.transaction_status is TransactionStatus.IN_TRANSACTION
    [found] = run(s, PSYCOPG_CHECK.format("c"))
    assert (found.tag, found.rows) == ("SELECT 1", (("1",),))
    # pg_catalog.pg_cursors and pg_cursors, in a join and a subquery: catalog queries.
    [joined] = run(
        s,
        "SELECT c.name, n.nspname FROM pg_cursors c, pg_catalog.pg_namespace n "
        "WHERE n.nspname = 'pg_catalog' AND c.name IN (SELECT name FROM pg_cursors)",
    )
    assert joined.rows == (("c", "pg_catalog"),)
    assert records(pipeline) == charged + 1  # the DECLARE's query alone: free, unaudited
    run(s, "CLOSE c")
    [closed] = run(s, PSYCOPG_CHECK.format("c"))
    assert closed.rows == ()
    run(s, "COMMIT")
    # Outside a block too (psycopg2 asks before its BEGIN).
    [outside] = run(s, PSYCOPG_CHECK.format("c"))
    assert outside.rows == () and s.transaction_status is TransactionStatus.IDLE


def test_cursors_end_as_postgres_ends_them(pipeline: Pipeline, responder: CatalogResponder) -> None:
    s = session(pipeline, responder)
    run(
        s,
        "BEGIN",
        "DECLARE a CURSOR FOR SELECT 1",
        "DECLARE h CURSOR WITH HOLD FOR SELECT 2",
        "SAVEPOINT s",
        "DECLARE b CURSOR FOR SELECT 3",
        "DECLARE hb CURSOR WITH HOLD FOR SELECT 4",
    )
    assert names(s) == ["a", "h", "b", "hb"]
    run(s, "ROLLBACK TO s")
    assert names(s) == ["a", "h"]
    run(s, "DECLARE b CURSOR FOR SELECT 3", "RELEASE s", "COMMIT")
    assert names(s) == ["h"]  # WITH HOLD outlives COMMIT; the others end with it
    # A block that fails: its cursors, WITH HOLD too, end at its ROLLBACK; the held one stays.
    run(s, "BEGIN", "DECLARE x CURSOR WITH HOLD FOR SELECT 5")
    with pytest.raises(QueryError) as failed:
        run(s, "SELECT 1/0")
    assert failed.value.sqlstate == "22012"
    with pytest.raises(QueryError) as aborted:
        run(s, PSYCOPG_CHECK.format("x"))
    assert aborted.value.sqlstate == "25P02"  # as PostgreSQL: nothing runs in a failed block
    run(s, "COMMIT")  # (a ROLLBACK)
    assert names(s) == ["h"]
    # A failed subtransaction: ROLLBACK TO ends what was declared since the savepoint.
    run(s, "BEGIN", "DECLARE y CURSOR FOR SELECT 6", "SAVEPOINT t", "DECLARE z CURSOR FOR SELECT 7")
    with pytest.raises(QueryError):
        run(s, "SELECT 1/0")
    run(s, "ROLLBACK TO t")
    assert names(s) == ["h", "y"]
    run(s, "ROLLBACK")
    assert names(s) == ["h"]
    # A Query of several statements: its implicit block keeps WITH HOLD ones at its end.
    s.begin_several()
    run(s, "DECLARE i CURSOR FOR SELECT 8", "DECLARE j CURSOR WITH HOLD FOR SELECT 9")
    s.end_several(failed=False)
    assert names(s) == ["h", "j"]
    run(s, "BEGIN", "DECLARE k CURSOR FOR SELECT 10", "CLOSE ALL")
    assert names(s) == []
    run(s, "COMMIT", "DECLARE l CURSOR WITH HOLD FOR SELECT 11")  # held at once
    assert names(s) == ["l"]
    run(s, "CLOSE l", "DECLARE m CURSOR WITH HOLD FOR SELECT 12", "DISCARD ALL")
    assert names(s) == []


def test_no_session_sees_another_sessions_cursors(
    pipeline: Pipeline, responder: CatalogResponder
) -> None:
    """Two sessions of the same analyst, whose translations and answers the catalog
    remembers by statement: each sees only its own cursors, however they change."""
    first, second = session(pipeline, responder), session(pipeline, responder)
    run(first, "BEGIN", "DECLARE mine CURSOR FOR SELECT 1")
    run(second, "BEGIN")
    for _ in range(2):  # the second time, from what the catalog remembered
        [own] = run(first, LISTED)
        [other] = run(second, LISTED)
        assert [row[0] for row in own.rows] == ["mine"] and other.rows == ()
        [found] = run(second, PSYCOPG_CHECK.format("mine"))
        assert found.rows == ()
    run(second, "DECLARE theirs CURSOR FOR SELECT 2")
    assert names(first) == ["mine"] and names(second) == ["theirs"]
    run(first, "CLOSE mine")
    assert names(first) == [] and names(second) == ["theirs"]
    run(first, "DECLARE mine CURSOR FOR SELECT 3")  # the same name again: a new row
    [again] = run(first, "SELECT name, creation_time FROM pg_cursors")
    assert [row[0] for row in again.rows] == ["mine"]
    run(first, "ROLLBACK", "COMMIT")
    run(second, "ROLLBACK")


def test_translations_are_remembered_by_the_cursors_not_across_them(
    responder: CatalogResponder, pipeline: Pipeline
) -> None:
    """The catalog level: the same statement with other cursors is another translation
    (its key holds the cursors' SHA-256, of a fixed size however long their text), and
    the translations of a session whose cursors hold long texts are not remembered."""
    at = datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)
    one = SessionCursors(
        (OpenCursor("a", "DECLARE a CURSOR FOR SELECT 1", False, False, False, at),)
    )
    long_text = "DECLARE b CURSOR FOR SELECT '" + "x" * 100_000 + "'"
    two = SessionCursors((*one.rows, OpenCursor("b", long_text, True, False, True, at)))
    values = [
        SessionValues("alice", "demo", "v", {}, cursors=cursors)
        for cursors in (SessionCursors(), one, two)
    ]
    keys = [translation_key(LISTED, v, ()) for v in values]
    assert len(set(keys)) == 3
    assert keys[0][5] == "" and all(len(key[5]) == 64 for key in keys[1:])

    async def answer(cursors: SessionCursors) -> StatementResult | None:
        context = SessionContext(
            asker=Asker(
                "alice", AnalystBudget(total=Epsilon(1), default_per_query=Epsilon(1)), "127.0.0.1"
            ),
            database="demo",
            parameters={"timezone": "UTC"},
            catalog=pipeline.catalog,
            ledger=pipeline.ledger,
            cursors=cursors,
        )
        return await responder.answer("SELECT * FROM pg_cursors ORDER BY name", context)

    for _ in range(2):
        answers = [asyncio.run(answer(c)) for c in (SessionCursors(), one, two)]
        assert [a.tag if a else None for a in answers] == ["SELECT 0", "SELECT 1", "SELECT 2"]
    # Remembered with short cursors; not with long ones (a translation holds their text).
    remembered = {key[5] for key in responder._outcomes.kept()}
    remembered |= {key[5] for key in translate_module._TRANSLATIONS.kept()}
    assert one.key in remembered and two.key not in remembered
    assert two.length > CACHED_CURSORS_LENGTH >= one.length
    last = answers[2]
    assert last is not None
    assert last.rows == (
        ("a", "DECLARE a CURSOR FOR SELECT 1", "f", "f", "f", "2026-01-02 03:04:05.123456+00"),
        ("b", long_text, "t", "f", "t", "2026-01-02 03:04:05.123456+00"),
    )


def test_pg_cursors_is_a_pg_catalog_view(pipeline: Pipeline, responder: CatalogResponder) -> None:
    s = session(pipeline, responder)
    [listed] = run(
        s,
        "SELECT c.relkind, a.attname, format_type(a.atttypid, a.atttypmod) "
        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "JOIN pg_attribute a ON a.attrelid = c.oid "
        "WHERE n.nspname = 'pg_catalog' AND c.relname = 'pg_cursors' ORDER BY a.attnum",
    )
    assert listed.rows == (
        ("v", "name", "text"),
        ("v", "statement", "text"),
        ("v", "is_holdable", "boolean"),
        ("v", "is_binary", "boolean"),
        ("v", "is_scrollable", "boolean"),
        ("v", "creation_time", "timestamp with time zone"),
    )


def test_the_listing_is_made_again_only_when_the_cursors_change() -> None:
    """proxy.cursors: the same SessionCursors (and key) until a cursor opens or ends."""
    cursors = Cursors()
    at = datetime(2026, 1, 2, tzinfo=UTC)
    empty = cursors.listed()
    assert empty.rows == () and empty.key == ""

    def declare(sql: str) -> None:
        declared = read_cursor_statement(sql)
        assert isinstance(declared, Declare)
        answer = StatementResult(tag="SELECT 2", rows=(("1",), ("2",)))
        cursors.open(declared, answer, depth=0, begun=at)

    declare("DECLARE a SCROLL CURSOR FOR SELECT 1")
    first = cursors.listed()
    assert first.rows == (
        OpenCursor("a", "DECLARE a SCROLL CURSOR FOR SELECT 1", False, False, True, at),
    )
    cursors.fetch(Fetch("a", Direction.FORWARD, 1, move=False))
    cursors.release(0)
    assert cursors.listed() is first  # moves and RELEASE change no row
    declare("DECLARE b CURSOR WITH HOLD FOR SELECT 2")
    second = cursors.listed()
    assert [row.name for row in second.rows] == ["a", "b"] and second.key != first.key
    cursors.end_transaction(commit=True)
    assert [row.name for row in cursors.listed().rows] == ["b"]
    held = cursors.listed()
    cursors.end_transaction(commit=True)  # nothing ends: the same listing
    assert cursors.listed() is held
    cursors.close(None)
    assert cursors.listed().rows == ()
