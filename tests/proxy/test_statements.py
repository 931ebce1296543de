"""Recognising session statements (SET/SHOW/RESET/BEGIN/COMMIT/ROLLBACK)."""

from __future__ import annotations

import pytest

from proxy.statements import Kind, SessionStatement, StatementSyntaxError, recognize, strip_sql


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("BEGIN", SessionStatement(Kind.BEGIN)),
        ("begin read only;", SessionStatement(Kind.BEGIN)),
        ("START TRANSACTION ISOLATION LEVEL READ COMMITTED", SessionStatement(Kind.BEGIN)),
        ("COMMIT", SessionStatement(Kind.COMMIT)),
        ("end", SessionStatement(Kind.COMMIT)),
        ("ROLLBACK;;", SessionStatement(Kind.ROLLBACK)),
        ("abort", SessionStatement(Kind.ROLLBACK)),
        ("SET dpproxy.epsilon = 0.5", SessionStatement(Kind.SET, "dpproxy.epsilon", "0.5")),
        ("set dpproxy.epsilon to '0.25'", SessionStatement(Kind.SET, "dpproxy.epsilon", "0.25")),
        (
            "SET SESSION extra_float_digits = 3",
            SessionStatement(Kind.SET, "extra_float_digits", "3"),
        ),
        (
            "SET LOCAL dpproxy.epsilon TO 5",
            SessionStatement(Kind.SET, "dpproxy.epsilon", "5", local=True),
        ),
        (
            "set local time zone 'Europe/Paris'",
            SessionStatement(Kind.SET, "timezone", "Europe/Paris", local=True),
        ),
        ("SET local.x = 1", SessionStatement(Kind.SET, "local.x", "1")),
        (
            "SET application_name = 'PostgreSQL JDBC Driver'",
            SessionStatement(Kind.SET, "application_name", "PostgreSQL JDBC Driver"),
        ),
        ("SET TIME ZONE 'Europe/Paris'", SessionStatement(Kind.SET, "timezone", "Europe/Paris")),
        ("SET datestyle TO ISO, MDY", SessionStatement(Kind.SET, "datestyle", "ISO, MDY")),
        ("SET search_path = DEFAULT", SessionStatement(Kind.SET, "search_path", None)),
        ("SHOW dpproxy.epsilon", SessionStatement(Kind.SHOW, "dpproxy.epsilon")),
        ("SHOW TRANSACTION ISOLATION LEVEL", SessionStatement(Kind.SHOW, "transaction_isolation")),
        ('show "TimeZone"', SessionStatement(Kind.SHOW, "timezone")),
        ("RESET ALL", SessionStatement(Kind.RESET, "all")),
        ("/* c */ -- x\n  SET x.y = 1", SessionStatement(Kind.SET, "x.y", "1")),
    ],
)
def test_recognized(sql: str, expected: SessionStatement) -> None:
    assert recognize(sql) == expected


@pytest.mark.parametrize(
    "sql", ["SELECT 1", "SELECT COUNT(*) FROM visits", "starting", "settle", "", "showcase"]
)
def test_not_session_statements(sql: str) -> None:
    assert recognize(sql) is None


@pytest.mark.parametrize(
    "sql",
    [
        "SET",
        "SET x",
        "SET x = ",
        "SHOW",
        "SHOW a b",
        "RESET",
        "SET ROLE admin",
        "ROLLBACK TO SAVEPOINT",
        "DEALLOCATE",
        "DISCARD EVERYTHING",
        "SET x = ;",
    ],
)
def test_malformed_session_statements(sql: str) -> None:
    with pytest.raises(StatementSyntaxError):
        recognize(sql)


@pytest.mark.parametrize(
    ("sql", "value"),
    [
        ("SET application_name = 'a--b'", "a--b"),
        ("SET application_name = 'a/*b*/c' -- a comment", "a/*b*/c"),
        # (an escape string is kept whole here; proxy.set_statement reads it)
        ("SET application_name = E'it\\'s--here'", "E'it\\'s--here'"),
        ("/* one /* nested */ comment */ SET application_name = 'x'", "x"),
        ('SET search_path = "a--b"', "a--b"),
    ],
)
def test_comment_marks_inside_quotes_are_text(sql: str, value: str) -> None:
    """-- and /* inside a quoted text are part of it, as in PostgreSQL (they used to cut the
    statement short: SET application_name = 'a--b' was refused)."""
    recognized = recognize(sql)
    assert recognized is not None and recognized.value == value


@pytest.mark.parametrize(
    ("sql", "stripped"),
    [
        ("SELECT 1 -- a comment", "SELECT 1"),
        ("SELECT /* a /* nested */ one */ 1;", "SELECT   1"),
        ("SELECT $$ -- $$", "SELECT $$ -- $$"),
        ("SELECT $x$ /* $x$ -- y", "SELECT $x$ /* $x$"),
        ("SELECT $1 -- y", "SELECT $1"),
        ("SELECT name'x' -- y", "SELECT name'x'"),
        ("SELECT 'open -- y", "SELECT 'open -- y"),  # left open: kept, it fails later
        ("/* open", "/* open"),
        ("-- only a comment", ""),
        ("-- ends at a carriage return\rSET x = 1", "SET x = 1"),
        ("\u00a0", "\u00a0"),  # not white space to PostgreSQL (a name may hold it)
    ],
)
def test_strip_sql_reads_quotes_and_comments_as_postgresql(sql: str, stripped: str) -> None:
    assert strip_sql(sql) == stripped
