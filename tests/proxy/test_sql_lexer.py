"""PostgreSQL's lexical rules in one lexer (proxy.sql_lexer), and the scanners read from it.

proxy.parameters.scan (statements, $n placeholders), proxy.sql_tokens (SET values) and
proxy.statements.strip_sql (comments) each read quotes and comments on their own before,
and disagreed: with each other, and with PostgreSQL. The cases where they did are checked
here against the PostgreSQL 15 test server (what it reads decides), and against each
scanner: every one of them failed on the old code. tests/proxy/test_sql_lexer_properties.py
checks generated texts.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from proxy.parameters import scan
from proxy.seam import QueryError
from proxy.sql_lexer import (
    BIT_STRING,
    CODE,
    COMMENT,
    CONTINUATION,
    DOLLAR_STRING,
    ERROR,
    ESCAPE_STRING,
    PARAMETER,
    QUOTED_IDENTIFIER,
    SEMICOLON,
    STRING,
    UNICODE_IDENTIFIER,
    UNICODE_STRING,
    Lexeme,
    lex,
)
from proxy.sql_tokens import Token, sql_tokens
from proxy.statements import strip_sql

Reading = list[list[tuple[object, ...]]] | str


@pytest.fixture(scope="module")
def postgresql(pg_dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


def pg_reads(conn: psycopg.Connection[tuple[object, ...]], sql: str) -> Reading:
    """What PostgreSQL answers to ``sql`` as a simple Query: the rows of each statement,
    or its error message."""
    try:
        cursor = conn.execute(sql.encode())
    except psycopg.Error as error:
        return error.diag.message_primary or ""
    results = [cursor.fetchall()]
    while cursor.nextset():
        results.append(cursor.fetchall())
    return results


def kinds(sql: str) -> list[tuple[str, str]]:
    return [(lexeme.kind, sql[lexeme.start : lexeme.end]) for lexeme in lex(sql)]


# --- Where the scanners disagreed: PostgreSQL decides ---------------------------------

# A string constant goes on after white space with a newline, read as it began: an
# E'...' goes on in escape mode, so \' is a quote there and the -- after it a comment.
E_CONTINUED = "SELECT E'a'\n'\\'';SELECT 2 -- '"


def test_an_escape_string_goes_on_in_escape_mode(
    postgresql: psycopg.Connection[tuple[object, ...]],
) -> None:
    assert pg_reads(postgresql, E_CONTINUED) == [[("a'",)], [(2,)]]
    assert scan(E_CONTINUED).spans == ((0, 16), (17, 30))  # was one statement
    assert strip_sql("SELECT E'a'\n'\\'' -- '") == "SELECT E'a'\n'\\''"  # kept the comment
    sql = "SELECT E'a'\n'\\'', $1 -- '"
    result = postgresql.pgconn.prepare(b"", sql.encode())
    assert result.error_message == b""
    assert postgresql.pgconn.describe_prepared(b"").nparams == 1
    assert [p.number for p in scan(sql).placeholders] == [1]  # was none
    assert sql_tokens("SET application_name = E'a'\n'\\''") == [
        Token("word", "set"),
        Token("word", "application_name"),
        Token("symbol", "="),
        Token("string", "a'"),
    ]


@pytest.mark.parametrize("line_end", ["\n", "\r"])
def test_a_string_goes_on_after_a_comment_on_its_line(
    postgresql: psycopg.Connection[tuple[object, ...]], line_end: str
) -> None:
    """sql_tokens read 'a' -- c<newline>'b' as two strings (a SET of it was refused)."""
    assert pg_reads(postgresql, f"SELECT 'a' -- c{line_end}'b'") == [[("ab",)]]
    tokens = sql_tokens(f"SET application_name = 'a' -- c{line_end}'b'")
    assert tokens[-1] == Token("string", "ab")
    assert len(tokens) == 4


def test_a_block_comment_ends_a_string_constant(
    postgresql: psycopg.Connection[tuple[object, ...]],
) -> None:
    assert pg_reads(postgresql, "SELECT 'a' /* c */\n'b'") == "syntax error at or near \"'b'\""
    assert [k for k, _ in kinds("SELECT 'a' /* c */\n'b'")] == [CODE, STRING, COMMENT, STRING]


@pytest.mark.parametrize(
    ("sql", "postgresql_says", "stripped"),
    [
        # A dollar quote's tag may hold any non-ASCII character (strip_sql knew only the
        # BMP's): the -- is inside the constant.
        ("SELECT $😀$ -- $😀$", [[(" -- ",)]], "SELECT $😀$ -- $😀$"),
        # A dollar quote may follow a number right away (strip_sql took 1$a$ for a name).
        ("SELECT 1$a$--$a$", 'syntax error at or near "$a$--$a$"', "SELECT 1$a$--$a$"),
        # An E'...' may follow a dollar quote right away (strip_sql took $e for a name).
        ("SELECT $$x$$e'\\' -- '", "syntax error at or near \"e'\\' -- '\"", None),
        # A name may end in any non-ASCII character, then e: no E'...' (strip_sql took 😀
        # for no name, and the -- for part of an E'...').
        ("SELECT 😀e'\\' -- '", 'type "😀e" does not exist', "SELECT 😀e'\\'"),
    ],
)
def test_strip_sql_reads_quotes_as_postgresql(
    postgresql: psycopg.Connection[tuple[object, ...]],
    sql: str,
    postgresql_says: Reading,
    stripped: str | None,
) -> None:
    assert pg_reads(postgresql, sql) == postgresql_says
    assert strip_sql(sql) == (sql if stripped is None else stripped)


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        # PostgreSQL 15 reads no 0x, 0o, 0b or _ in numbers (16 does): trailing junk.
        ("SELECT 0x1F; SELECT 1", 'trailing junk after numeric literal at or near "0x1F"'),
        ("SELECT 1_000; SELECT 1", 'trailing junk after numeric literal at or near "1_000"'),
        ("SELECT 1e+; SELECT 1", 'trailing junk after numeric literal at or near "1e+"'),
        ('SELECT 1 AS ""; SELECT 2', 'zero-length delimited identifier at or near """"'),
        ('SELECT 1 AS U&""; SELECT 2', 'zero-length delimited identifier at or near "U&"""'),
        ("SELECT B'1; SELECT 2", 'unterminated bit string literal at or near "B\'1; SELECT 2"'),
        ("SELECT X'1; SELECT 2", "unterminated hexadecimal string literal at or near \"X'1; "),
        ("SELECT 'a'\n'b; SELECT 2", "unterminated quoted string at or near \"'a'\n'b; SELECT"),
    ],
)
def test_scan_refuses_what_postgresql_lexer_refuses(
    postgresql: psycopg.Connection[tuple[object, ...]], sql: str, message: str
) -> None:
    said = pg_reads(postgresql, sql)
    assert isinstance(said, str) and said.startswith(message)
    with pytest.raises(QueryError) as caught:
        scan(sql)
    assert caught.value.sqlstate == "42601"
    assert caught.value.message.startswith(message)


def test_a_vertical_tab_is_not_white_space_before_postgresql_16(
    postgresql: psycopg.Connection[tuple[object, ...]],
) -> None:
    """All three scanners took \\v for white space, as PostgreSQL 16 does, not 15."""
    assert pg_reads(postgresql, "SELECT 1;\v") == 'syntax error at or near "\v"'
    assert pg_reads(postgresql, "SELECT 'a'\v\n'b'") == 'syntax error at or near "\v"'
    assert scan("SELECT 1;\v").statements == 2  # the second, "\v", is refused later
    assert strip_sql("\v") == "\v"  # not an empty query
    assert kinds("SELECT 'a'\v\n'b'") == [
        (CODE, "SELECT"),
        (STRING, "'a'"),
        (CODE, "\v"),
        (STRING, "'b'"),
    ]
    with pytest.raises(QueryError, match='syntax error at or near "\v"'):
        sql_tokens("SET application_name = 'a'\v")


# --- The lexemes ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sql", "lexemes"),
    [
        ("SELECT a, b1 FROM t", [(CODE, "SELECT a, b1 FROM t")]),
        ("  x;; y ", [(CODE, "x"), (SEMICOLON, ";"), (SEMICOLON, ";"), (CODE, "y")]),
        ("a -- c\nb", [(CODE, "a"), (COMMENT, "-- c"), (CODE, "b")]),
        ("a --c\rb", [(CODE, "a"), (COMMENT, "--c"), (CODE, "b")]),
        ("a/* x /* y */ z */b", [(CODE, "a"), (COMMENT, "/* x /* y */ z */"), (CODE, "b")]),
        ("a+--c", [(CODE, "a+"), (COMMENT, "--c")]),
        ("a */* c */", [(CODE, "a *"), (COMMENT, "/* c */")]),
        ("'it''s'", [(STRING, "'it''s'")]),
        ("'a\\'", [(STRING, "'a\\'")]),
        ("N'a''b'", [(STRING, "N'a''b'")]),
        ("E'a\\'b''c'", [(ESCAPE_STRING, "E'a\\'b''c'")]),
        ("e'\\\\' -- c", [(ESCAPE_STRING, "e'\\\\'"), (COMMENT, "-- c")]),
        ("xe'a'", [(CODE, "xe"), (STRING, "'a'")]),
        ("U&'a''b' UESCAPE '!'", [(UNICODE_STRING, "U&'a''b'"), (CODE, "UESCAPE"),
                                  (STRING, "'!'")]),
        ("U& 'a'", [(CODE, "U&"), (STRING, "'a'")]),
        ("B'1''0'", [(BIT_STRING, "B'1'"), (STRING, "'0'")]),
        ("x'1F'", [(BIT_STRING, "x'1F'")]),
        ("'a'\n'b'", [(STRING, "'a'"), (CONTINUATION, "'b'")]),
        ("'a' -- c\n -- d\n'b'", [(STRING, "'a'"), (COMMENT, "-- c"), (COMMENT, "-- d"),
                                  (CONTINUATION, "'b'")]),
        ("'a' 'b'", [(STRING, "'a'"), (STRING, "'b'")]),
        ('"a""b" U&"c"', [(QUOTED_IDENTIFIER, '"a""b"'), (UNICODE_IDENTIFIER, 'U&"c"')]),
        ("$$ ' $$ $q$ $$ $q$", [(DOLLAR_STRING, "$$ ' $$"), (DOLLAR_STRING, "$q$ $$ $q$")]),
        ("$a$ $b$a$", [(DOLLAR_STRING, "$a$ $b$a$")]),
        ("$_1$x$_1$", [(DOLLAR_STRING, "$_1$x$_1$")]),
        ("$1,$2", [(PARAMETER, "$1"), (CODE, ","), (PARAMETER, "$2")]),
        ("a$1 x1$b$", [(CODE, "a$1 x1$b$")]),
        ("1$a$ $a$", [(CODE, "1"), (DOLLAR_STRING, "$a$ $a$")]),
        ("$ a", [(CODE, "$ a")]),
        ("$e'\\''", [(CODE, "$"), (ESCAPE_STRING, "e'\\''")]),
        ("1.5e3 .5 1. 1..2", [(CODE, "1.5e3 .5 1. 1..2")]),
        ("x\u00a0y", [(CODE, "x\u00a0y")]),
    ],
)  # fmt: skip
def test_lexemes(sql: str, lexemes: list[tuple[str, str]]) -> None:
    assert kinds(sql) == lexemes


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT 'a", 'unterminated quoted string at or near "\'a"'),
        ("SELECT N'a", 'unterminated quoted string at or near "\'a"'),  # (N is a key word)
        ("SELECT E'a\\'", "unterminated quoted string at or near \"E'a\\'\""),
        ("SELECT U&'a", 'unterminated quoted string at or near "U&\'a"'),
        ('SELECT "a', 'unterminated quoted identifier at or near ""a"'),
        ("SELECT $q$ a", 'unterminated dollar-quoted string at or near "$q$ a"'),
        ("SELECT /* /* */", 'unterminated /* comment at or near "/* /* */"'),
        ("SELECT $1a", 'trailing junk after parameter at or near "$1a"'),
        ("SELECT .5x", 'trailing junk after numeric literal at or near ".5x"'),
        ("SELECT 1.x", 'trailing junk after numeric literal at or near "1.x"'),
        ("SELECT 1e'x'", 'trailing junk after numeric literal at or near "1e"'),
        ("SELECT 1\u00a0", 'trailing junk after numeric literal at or near "1\u00a0"'),
    ],
)
def test_errors_are_postgresql_lexer_errors(
    postgresql: psycopg.Connection[tuple[object, ...]], sql: str, message: str
) -> None:
    assert pg_reads(postgresql, sql) == message
    errors = [lexeme for lexeme in lex(sql) if lexeme.kind == ERROR]
    assert errors[0].message == message


def test_an_unterminated_quote_or_comment_runs_to_the_end() -> None:
    sql = "SELECT 'a -- b"
    assert lex(sql)[-1] == Lexeme(ERROR, 7, len(sql), "unterminated quoted string at or near "
                                  "\"'a -- b\"")  # fmt: skip
    assert strip_sql(sql) == sql  # kept as it is; it fails later
    assert strip_sql("SELECT 1 /* open") == "SELECT 1 /* open"


def test_without_code_only_quotes_and_comments_are_given() -> None:
    sql = "SELECT 'a';$1 -- c\n FROM t"
    assert lex(sql, code=False) == [
        lexeme for lexeme in lex(sql) if lexeme.kind not in (CODE, SEMICOLON)
    ]


@pytest.mark.parametrize(
    ("sql", "value", "constant"),
    [
        ("SELECT 'a\\'' -- '", "a'", "'a\\''"),
        ("SELECT 'a\\\\' -- '", "a\\", "'a\\\\'"),
        ("SELECT N'\\''", "'", "N'\\''"),
    ],
)
def test_without_standard_conforming_strings_backslashes_escape(
    postgresql: psycopg.Connection[tuple[object, ...]], sql: str, value: str, constant: str
) -> None:
    postgresql.execute("SET standard_conforming_strings = off")
    postgresql.execute("SET escape_string_warning = off")
    try:
        assert pg_reads(postgresql, sql) == [[(value,)]]
        assert pg_reads(postgresql, "SELECT U&'a'") == (
            "unsafe use of string constant with Unicode escapes"
        )
    finally:
        postgresql.execute("RESET standard_conforming_strings")
        postgresql.execute("RESET escape_string_warning")
    read = lex(sql, standard_conforming_strings=False)[1]
    assert (read.kind, sql[read.start : read.end]) == (ESCAPE_STRING, constant)
    assert lex("SELECT U&'a'", standard_conforming_strings=False)[-1].message == (
        "unsafe use of string constant with Unicode escapes at or near \"U&'a'\""
    )
    assert lex(sql)[1].kind in (STRING, ERROR)  # on, as dpproxy's sessions keep it
