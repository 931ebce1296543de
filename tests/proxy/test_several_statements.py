"""Splitting a simple Query's text into its statements, as PostgreSQL's lexer does.

A ``;`` separates statements only outside string constants ('…' with '' quotes, E'…' with
backslash escapes), quoted identifiers, dollar-quoted strings and comments (-- and nested
/* */); text that cannot be read so is refused whole (42601), as is a Query of more than
MAX_STATEMENTS statements (54000). tests/integration/test_several_statements_end_to_end.py
runs such Queries on a real server and on PostgreSQL.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.parameters import prepare
from proxy.seam import QueryError, TransactionStatus
from proxy.session import AnalystSession
from proxy.several_statements import MAX_STATEMENTS, NOT_SPLIT_HINT, run_statements, split_query
from tests.proxy.local_pipeline import alice_session, local_pipeline
from tests.proxy.test_session_statements import changes


@pytest.mark.parametrize(
    ("sql", "statements"),
    [
        ("SELECT 1", ["SELECT 1"]),
        ("  SELECT 1 -- no semicolon: as it came\n", ["  SELECT 1 -- no semicolon: as it came\n"]),
        ("SELECT 1;", ["SELECT 1"]),
        ("SELECT 1; SELECT 2", ["SELECT 1", "SELECT 2"]),
        ("SELECT 1;;SELECT 2;", ["SELECT 1", "SELECT 2"]),
        ("SELECT 1; -- only a comment", ["SELECT 1"]),
        ("SELECT 1; /* only a comment */ ;", ["SELECT 1"]),
        (";", [""]),
        (" ; ;\n", [""]),
        ("-- c;\n", [""]),
        ("/* ; */", [""]),
        # Comments before a statement stay with it.
        ("/* a */ SELECT 1; -- b\nSELECT 2", ["/* a */ SELECT 1", "-- b\nSELECT 2"]),
        # '' is a quote inside a string; a backslash is an ordinary character there.
        ("SELECT 'a;b'';c'; SELECT 2", ["SELECT 'a;b'';c'", "SELECT 2"]),
        ("SELECT 'a\\'; SELECT 2", ["SELECT 'a\\'", "SELECT 2"]),
        # In E'…' a backslash escapes the next character, a quote too.
        ("SELECT E'a\\';b'; SELECT 2", ["SELECT E'a\\';b'", "SELECT 2"]),
        ("SELECT e'a\\\\'; SELECT 2", ["SELECT e'a\\\\'", "SELECT 2"]),
        ('SELECT 1 AS "a;""b"; SELECT 2', ['SELECT 1 AS "a;""b"', "SELECT 2"]),
        ("SELECT $$a;b$$; SELECT 2", ["SELECT $$a;b$$", "SELECT 2"]),
        ("SELECT $t$c;$$;d$t$; SELECT 2", ["SELECT $t$c;$$;d$t$", "SELECT 2"]),
        # $1 is a placeholder, and a$b a name: neither opens a dollar quote.
        ("SELECT $1; SELECT a$b; SELECT 3", ["SELECT $1", "SELECT a$b", "SELECT 3"]),
        (
            "SELECT 1 /* ; /* ; */ ; */; SELECT 2 -- ;\n; SELECT 3",
            ["SELECT 1 /* ; /* ; */ ; */", "SELECT 2 -- ;", "SELECT 3"],
        ),
        # U+00A0 is not white space for PostgreSQL (it may be part of a name): kept.
        ("SELECT x\u00a0; SELECT 2", ["SELECT x\u00a0", "SELECT 2"]),
    ],
)
def test_statements_are_split_where_postgresql_splits(sql: str, statements: list[str]) -> None:
    assert split_query(sql) == statements


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT 1; SELECT 'x", 'unterminated quoted string at or near "\'x"'),
        ("SELECT 1; SELECT E'\\';", "unterminated quoted string at or near \"E'\\';\""),
        ('SELECT 1; SELECT "x', 'unterminated quoted identifier at or near ""x"'),
        ("SELECT 1; /* /* */ SELECT 2", 'unterminated /* comment at or near "/* /* */ SELECT 2"'),
        ("SELECT 1; SELECT $q$x;", 'unterminated dollar-quoted string at or near "$q$x;"'),
        ("SELECT 1abc; SELECT 2", 'trailing junk after numeric literal at or near "1abc"'),
    ],
)
def test_text_that_cannot_be_read_is_refused_whole(sql: str, message: str) -> None:
    with pytest.raises(QueryError) as refused:
        split_query(sql)
    assert (refused.value.sqlstate, refused.value.message) == ("42601", message)
    assert refused.value.hint == NOT_SPLIT_HINT


def test_more_than_the_most_statements_is_refused_whole() -> None:
    assert len(split_query("SELECT 1;" * MAX_STATEMENTS)) == MAX_STATEMENTS == 100
    with pytest.raises(QueryError) as refused:
        split_query("SELECT 1;" * (MAX_STATEMENTS + 1) + ";;")
    assert refused.value.sqlstate == "54000"
    assert refused.value.message == (
        "this query holds 101 statements; dpproxy runs at most 100 in one query, "
        "and ran none of these"
    )


def test_parse_refuses_what_a_query_splits() -> None:
    """The extended protocol reads the text as the simple Query does: what a Query runs
    as several statements, a Parse refuses as PostgreSQL does."""
    for sql in ("SELECT 1; SELECT 2", "SET a.b = 'x;y'; SELECT $$;$$"):
        assert len(split_query(sql)) == 2
        with pytest.raises(QueryError) as refused:
            prepare(sql, ())
        assert refused.value.sqlstate == "42601"
        assert refused.value.message == "cannot insert multiple commands into a prepared statement"
    assert prepare("SELECT 'a;b' -- ;", ()).sql == "SELECT 'a;b' -- ;"


_PIECES = st.sampled_from(
    [
        "SELECT 1",
        "SELECT 'a;b'",
        "SELECT 'it''s;'",
        "SELECT E'\\';'",
        'SELECT 1 AS "x;y"',
        "SELECT $$;$$",
        "SELECT $tag$ $$; $tag$",
        "SELECT 1 /* ; /* ; */ ; */",
        "SELECT 2 -- ;\n",
        "SET dpproxy.epsilon = 0.5",
    ]
)
_GAPS = st.sampled_from([";", " ; ", ";;", ";\n-- ;\n;", "; /* ; */ ;"])  # comments between ;


@given(st.lists(st.tuples(_PIECES, _GAPS), min_size=1, max_size=8))
def test_joined_statements_split_back(parts: list[tuple[str, str]]) -> None:
    sql = "".join(piece + gap for piece, gap in parts)
    assert split_query(sql) == [piece.strip() for piece, _ in parts]


def _run_query(
    session: AnalystSession, sql: str, *, cancel_after: str | None = None
) -> tuple[list[str], dict[str, str]]:
    """Run a Query's statements as the server does: each one's tag or SQLSTATE, and the
    reported values the Query changed (the ParameterStatus messages before its
    ReadyForQuery). A cancel request comes right after the statement ``cancel_after``
    (between two statements, when none is running)."""
    seen: list[str] = []
    before = session.reported_parameters()

    async def one(sql: str) -> bool:
        try:
            result = await session.execute(sql)
        except QueryError as error:
            seen.append(error.sqlstate)
            session.abort_transaction()
            return False
        seen.append(result.tag)
        if sql == cancel_after:
            session.cancel()
        return True

    asyncio.run(run_statements(session, split_query(sql), one))
    return seen, changes(before, session.reported_parameters())


def test_a_cancel_between_two_statements_stops_the_rest(tmp_path: Path) -> None:
    pipeline = local_pipeline(tmp_path)
    try:
        session = alice_session(pipeline)
        query = "SET application_name = 'a'; SELECT COUNT(*) FROM visits; SHOW application_name"
        seen, told = _run_query(session, query, cancel_after="SET application_name = 'a'")
        assert seen == ["SET", "57014"]
        # The failed Query's SET is undone (at its error, as PostgreSQL undoes it).
        assert session.reported_parameters()["application_name"] == "test"
        assert told == {}
        assert session.transaction_status is TransactionStatus.IDLE
        # A cancel request between two Queries is not kept for the next one.
        session.cancel()
        seen, told = _run_query(session, "SHOW application_name; SHOW dpproxy.epsilon")
        assert (seen, told) == (["SHOW", "SHOW"], {})
    finally:
        pipeline.ledger.close()
