"""Generated texts mixing every construct of PostgreSQL's lexical rules: proxy.sql_lexer
reads them as they were built, the scanners read from it agree with it (strip_sql removes
exactly its comments, scan's statements and placeholders are where its lexemes say,
sql_tokens gives the values of its string constants), and the PostgreSQL 15 test server
reads them the same way.

Texts are built from items (names, numbers, operators, ;, string constants of each kind,
continued ones, dollar quotes, quoted identifiers, parameters) and separators (white
space, -- comments ending at \\n, \\r or the end, nested /* */ comments), each with what
it is, so what the lexer must find is known. A separator is never empty, and one between
a string constant and a quote holds a /* */ comment unless the constant is meant to go on.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.parameters import scan
from proxy.seam import QueryError
from proxy.sql_lexer import (
    BIT_STRING,
    CODE,
    CODE_TOKEN,
    COMMENT,
    CONTINUATION,
    DOLLAR_STRING,
    ERROR,
    ESCAPE_STRING,
    PARAMETER,
    QUOTED_IDENTIFIER,
    SEMICOLON,
    SQL_SPACE,
    STRING,
    UNICODE_IDENTIFIER,
    UNICODE_STRING,
    Lexeme,
    lex,
)
from proxy.sql_tokens import Token, lower_identifier, sql_tokens
from proxy.statements import _without_comments, strip_sql

# Characters that mean something to the lexer somewhere, and some that mean nothing.
TRICKY = "'\"$;-/*\\\n\r\t EeNnUuXxBb&0123456789._aé😀\u00a0\v"


@dataclass(frozen=True)
class Piece:
    """Text, the lexemes (kind, text) it holds, the tokens sql_tokens gives for it (None:
    sql_tokens refuses it) and the value a string constant has."""

    text: str
    lexemes: tuple[tuple[str, str], ...]
    tokens: tuple[Token, ...] | None = None
    value: str | None = None


def quoted(text: str, quote: str = "'") -> str:
    return quote + text.replace(quote, quote * 2) + quote


inside = st.text(st.sampled_from(TRICKY + "abc ()"), max_size=12)
line_text = st.text(st.sampled_from(TRICKY.replace("\n", "").replace("\r", "")), max_size=8)


@st.composite
def block_comment(draw: st.DrawFn, depth: int = 0) -> str:
    parts = draw(st.lists(st.text(st.sampled_from("'\"$;-\\\nab E"), max_size=5), max_size=3))
    if depth < 2 and draw(st.booleans()):
        parts.insert(draw(st.integers(0, len(parts))), draw(block_comment(depth + 1)))
    return "/*" + "".join(parts) + "*/"


@st.composite
def separator(draw: st.DrawFn) -> Piece:
    """White space and comments, never empty."""
    text, comments = "", []
    for _ in range(draw(st.integers(1, 3))):
        choice = draw(st.integers(0, 3))
        if choice == 0:
            text += draw(st.sampled_from([" ", "\t", "\f", "\n", "\r", "  "]))
        elif choice == 1:
            comment = draw(block_comment())
            text, comments = text + comment, [*comments, comment]
        else:
            comment = "--" + draw(line_text)
            text += comment + draw(st.sampled_from(["\n", "\r"]))
            comments.append(comment)
    return Piece(text, tuple((COMMENT, c) for c in comments))


name = st.builds(
    lambda first, rest: first + rest,
    st.sampled_from(list("aAzZ_éEeNnUuXxBb😀\u00a0")),
    st.text(st.sampled_from("aZ09_$é😀eE"), max_size=5),
)
number = st.sampled_from(["0", "12", "1.5", ".5", "7.", "1e5", "1.e-3", "2E+10"])


def code(text: str, tokens: tuple[Token, ...] | None) -> Piece:
    return Piece(text, ((CODE, text),), tokens)


@st.composite
def escape_body(draw: st.DrawFn) -> tuple[str, str]:
    """The inside of an E'...' constant, and its value."""
    pieces = draw(
        st.lists(
            st.sampled_from(
                [
                    ("a", "a"),
                    ("é😀", "é😀"),
                    ("-- ;", "-- ;"),
                    ("/*", "/*"),
                    ("$1", "$1"),
                    ("\n", "\n"),
                    ('"', '"'),
                    ("''", "'"),
                    ("\\'", "'"),
                    ("\\\\", "\\"),
                    ("\\n", "\n"),
                    ("\\t", "\t"),
                    ("\\x41", "A"),
                    ("\\101", "A"),
                    ("\\u00e9", "é"),
                    ("\\U0001F600", "😀"),
                    ("\\uD83D\\uDE00", "😀"),
                    ("\\q", "q"),
                    ("\\\n", "\n"),
                ]
            ),  # fmt: skip
            max_size=6,
        )
    )
    return "".join(p[0] for p in pieces), "".join(p[1] for p in pieces)


@st.composite
def unicode_body(draw: st.DrawFn) -> tuple[str, str]:
    """The inside of a U&'...' constant, and its value: its escapes are valid ones."""
    pieces = draw(
        st.lists(
            st.one_of(
                inside.map(lambda t: (t.replace("\\", "\\\\").replace("'", "''"), t)),
                st.sampled_from(
                    [
                        ("\\0041", "A"),
                        ("\\00e9", "é"),
                        ("\\+01F600", "😀"),
                        ("\\D83D\\DE00", "😀"),
                        ("\\\\", "\\"),
                    ]
                ),
            ),
            max_size=3,
        )
    )
    return "".join(p[0] for p in pieces), "".join(p[1] for p in pieces)


@st.composite
def string_constant(draw: st.DrawFn) -> Piece:
    """A string constant, maybe going on after white space with a newline."""
    kind = draw(st.sampled_from([STRING, STRING, ESCAPE_STRING, UNICODE_STRING, BIT_STRING]))
    segments: list[tuple[str, str]] = []  # (inside, value)
    for _ in range(draw(st.integers(1, 3))):
        if kind == ESCAPE_STRING:
            segments.append(draw(escape_body()))
        elif kind == UNICODE_STRING:
            segments.append(draw(unicode_body()))
        elif kind == BIT_STRING:
            bits = draw(st.text(st.sampled_from("01"), max_size=6))
            segments.append((bits, bits))
        else:
            text = draw(inside)
            segments.append((text.replace("'", "''"), text))
    prefix = {
        STRING: draw(st.sampled_from(["", "", "N", "n"])),
        ESCAPE_STRING: draw(st.sampled_from(["E", "e"])),
        UNICODE_STRING: draw(st.sampled_from(["U&", "u&"])),
        BIT_STRING: "B",
    }[kind]
    text = f"{prefix}'{segments[0][0]}'"
    lexemes = [(kind, text)]
    for inside_text, _ in segments[1:]:
        gap, comments = draw(st.sampled_from([" ", "", "\t"])), []
        for _ in range(draw(st.integers(1, 2))):
            if draw(st.booleans()):
                comment = "--" + draw(line_text)
                gap, comments = gap + comment, [*comments, comment]
            gap += draw(st.sampled_from(["\n", "\r", "\n  ", "\r\n"]))
        segment = f"'{inside_text}'"
        text += gap + segment
        lexemes += [*((COMMENT, c) for c in comments), (CONTINUATION, segment)]
    value = "".join(v for _, v in segments)
    # N'...' is NCHAR '...' to PostgreSQL's parser (no SET's value), B'...' a bit string.
    taken = kind in (ESCAPE_STRING, UNICODE_STRING) or (kind == STRING and not prefix)
    tokens = (Token("string", value),) if taken else None
    return Piece(text, tuple(lexemes), tokens, value)


@st.composite
def item(draw: st.DrawFn) -> Piece:
    choice = draw(st.integers(0, 9))
    if choice == 0:
        word = draw(name)
        return code(word, (Token("word", lower_identifier(word)),))
    if choice == 1:
        text = draw(number)
        return code(text, (Token("number", text),))
    if choice == 2:
        text = draw(st.sampled_from(["=", ",", "(", ")", ".", "+", "-", "*", "<>", "::", "&", "$"]))
        return code(text, (Token("symbol", text),) if text in "=,().+-" else None)
    if choice == 3:
        return Piece(";", ((SEMICOLON, ";"),), (Token("symbol", ";"),))
    if choice in (4, 5):
        return draw(string_constant())
    if choice == 6:
        tag = draw(st.sampled_from(["", "q", "_x1", "é", "😀"]))
        closing = f"${tag}$"
        body = draw(inside.filter(lambda t: (t + closing).find(closing) == len(t)))
        text = f"${tag}${body}${tag}$"
        return Piece(text, ((DOLLAR_STRING, text),), (Token("string", body),), body)
    if choice == 7:
        identifier = draw(inside.filter(bool))
        if draw(st.booleans()):  # (\ is the escape character there: \\ is one \)
            text = "U&" + quoted(identifier.replace("\\", "\\\\"), '"')
            return Piece(text, ((UNICODE_IDENTIFIER, text),), (Token("ident", identifier),))
        text = quoted(identifier, '"')
        return Piece(text, ((QUOTED_IDENTIFIER, text),), (Token("ident", identifier),))
    text = "$" + str(draw(st.integers(0, 999)))
    return Piece(text, ((PARAMETER, text),))


@dataclass(frozen=True)
class Text:
    sql: str
    lexemes: list[Lexeme]  # as the lexer must find them
    tokens: list[Token] | None  # as sql_tokens must give them (None: it refuses the text)


def comments_in(gap: Piece) -> list[tuple[int, str]]:
    """Where in ``gap.text`` each of its comments is."""
    found, position = [], 0
    for _, text in gap.lexemes:
        position = gap.text.index(text, position)
        found.append((position, text))
        position += len(text)
    return found


@st.composite
def texts(draw: st.DrawFn) -> Text:
    items = draw(st.lists(item(), max_size=10))
    pieces: list[tuple[Piece, Piece]] = []
    previous: Piece | None = None
    for current in items:
        gap = draw(separator())
        if previous is None and draw(st.booleans()):
            gap = Piece("", ())
        elif previous is not None:
            string_before = previous.lexemes[-1][0] in (
                STRING, ESCAPE_STRING, UNICODE_STRING, BIT_STRING, CONTINUATION,
            )  # fmt: skip
            if string_before and current.text.startswith("'") and "/*" not in gap.text:
                gap = Piece(" /**/" + gap.text, ((COMMENT, "/**/"), *gap.lexemes))
            if previous.text.endswith("-") and gap.text.startswith("-"):
                gap = Piece(" " + gap.text, gap.lexemes)
        pieces.append((gap, current))
        previous = current
    last = draw(st.sampled_from(["", "--" + draw(line_text)]))
    return joined(pieces, last)


def joined(pieces: list[tuple[Piece, Piece]], last: str) -> Text:
    """Items, each after its separator, then ``last`` (a -- comment without a newline, or
    nothing): the text, and what is in it."""
    sql = ""
    lexemes: list[Lexeme] = []
    tokens: list[Token] | None = []
    code_may_go_on = False  # the last lexeme is code, and only white space followed it
    for gap, piece in pieces:
        for offset, text in comments_in(gap):
            lexemes.append(Lexeme(COMMENT, len(sql) + offset, len(sql) + offset + len(text)))
            code_may_go_on = False
        sql += gap.text
        position = 0
        for kind, text in piece.lexemes:
            start = len(sql) + piece.text.index(text, position)
            position = start - len(sql) + len(text)
            if kind == CODE and code_may_go_on:
                lexemes[-1] = Lexeme(CODE, lexemes[-1].start, start + len(text))
            else:
                lexemes.append(Lexeme(kind, start, start + len(text)))
        code_may_go_on = piece.lexemes[-1][0] == CODE
        sql += piece.text
        tokens = None if tokens is None or piece.tokens is None else [*tokens, *piece.tokens]
    if last:
        lexemes.append(Lexeme(COMMENT, len(sql) + 1, len(sql) + 1 + len(last)))
        sql += " " + last
    return Text(sql, lexemes, tokens)


# --- What each scanner must make of a text, from its lexemes -------------------------------


def comments_replaced(sql: str, lexemes: list[Lexeme]) -> str:
    parts, position = [], 0
    for lexeme in lexemes:
        if lexeme.kind == COMMENT:
            parts += [sql[position : lexeme.start], " "]
            position = lexeme.end
    return "".join([*parts, sql[position:]])


def statement_spans(sql: str, lexemes: list[Lexeme]) -> list[tuple[int, int]]:
    spans, start, holds = [], 0, False
    for lexeme in lexemes:
        if lexeme.kind == SEMICOLON:
            if holds:
                spans.append((start, lexeme.start))
            start, holds = lexeme.end, False
        elif lexeme.kind != COMMENT:
            holds = True
    return [*spans, (start, len(sql))] if holds else spans


def check_scanners(sql: str, lexemes: list[Lexeme]) -> None:
    """strip_sql, scan and sql_tokens read ``sql`` as its ``lexemes`` say."""
    assert lex(sql, code=False) == [x for x in lexemes if x.kind not in (CODE, SEMICOLON)]
    # strip_sql: exactly the lexer's comments are gone, all else kept as it was.
    stripped = comments_replaced(sql, lexemes)
    assert _without_comments(sql) == stripped
    text = stripped.strip(SQL_SPACE)
    while text.endswith(";"):
        text = text[:-1].rstrip(SQL_SPACE)
    assert strip_sql(sql) == text
    errors = [lexeme for lexeme in lexemes if lexeme.kind == ERROR]
    if errors:
        with pytest.raises(QueryError) as caught:
            scan(sql)
        assert caught.value.message == errors[0].message
        with pytest.raises(QueryError):
            sql_tokens(sql)
        return
    # scan: statements between ;s outside quotes and comments, placeholders outside them.
    scanned = scan(sql)
    assert list(scanned.spans) == statement_spans(sql, lexemes)
    parameters = [lexeme for lexeme in lexemes if lexeme.kind == PARAMETER]
    assert [(p.start, p.end) for p in scanned.placeholders] == [
        (p.start, p.end) for p in parameters
    ]
    assert [p.number for p in scanned.placeholders] == [
        int(sql[p.start + 1 : p.end]) for p in parameters
    ]
    for placeholder in scanned.placeholders:
        assert not any(x.start < placeholder.start < x.end for x in lexemes if x.kind != CODE)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts())
def test_generated_texts_are_read_as_built(text: Text) -> None:
    lexemes = lex(text.sql)
    assert lexemes == text.lexemes, text.sql
    check_scanners(text.sql, lexemes)
    if text.tokens is None:
        with pytest.raises(QueryError):
            sql_tokens(text.sql)
    else:
        assert sql_tokens(text.sql) == text.tokens


@settings(max_examples=600, deadline=None)
@given(st.text(st.sampled_from(TRICKY + "/**/"), max_size=40))
def test_any_text_is_cut_into_lexemes_the_scanners_agree_with(sql: str) -> None:
    lexemes = lex(sql)
    position = 0
    for lexeme in lexemes:
        assert position <= lexeme.start < lexeme.end <= len(sql)
        assert sql[position : lexeme.start].strip(SQL_SPACE) == ""  # only white space between
        text = sql[lexeme.start : lexeme.end]
        if lexeme.kind == CODE:
            assert text == text.strip(SQL_SPACE)
        elif lexeme.kind == COMMENT:
            assert text.startswith(("--", "/*"))
            if text.startswith("/*"):
                assert text.endswith("*/")
            else:
                assert "\n" not in text and "\r" not in text
        elif lexeme.kind == ERROR:
            assert lexeme.message
        position = lexeme.end
    assert sql[position:].strip(SQL_SPACE) == ""
    check_scanners(sql, lexemes)
    try:
        tokens = sql_tokens(sql)
    except QueryError:
        return  # (a text that is no SET's: refused)
    constants = [
        x for x in lexemes if x.kind in (STRING, ESCAPE_STRING, UNICODE_STRING, DOLLAR_STRING)
    ]
    assert len([t for t in tokens if t.kind == "string"]) == len(constants)


# --- The PostgreSQL 15 test server reads the same -----------------------------------------


@pytest.fixture(scope="module")
def postgresql(pg_dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


def first_token(sql: str, offset: int) -> tuple[int, str]:
    """Where the first token at or after ``offset`` begins and its text, a string constant
    with its continuations, by the lexer."""
    lexemes = lex(sql)
    for index, lexeme in enumerate(lexemes):
        if lexeme.kind == COMMENT or lexeme.end <= offset:
            continue
        if lexeme.kind == CODE:
            for found in CODE_TOKEN.finditer(sql, max(offset, lexeme.start), lexeme.end):
                return found.start(), found.group()
        end = lexeme.end
        for following in lexemes[index + 1 :]:
            if following.kind == CONTINUATION:
                end = following.end
            elif following.kind != COMMENT:
                break
        return lexeme.start, sql[lexeme.start : end]
    raise AssertionError(sql)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(separator(), item(), texts())
def test_postgresql_reads_the_same_token(
    postgresql: psycopg.Connection[tuple[object, ...]], gap: Piece, token: Piece, rest: Text
) -> None:
    """PostgreSQL's syntax error names the token it could not take after SELECT 1 AS x:
    the one the lexer finds there."""
    if token.lexemes[0][0] == SEMICOLON or token.text in (",", "<>", "::"):
        return  # (PostgreSQL ends the statement, or goes on, or reads one operator)
    prefix = "SELECT 1 AS x " + gap.text
    if token.text.startswith("-") and gap.text.endswith("-"):
        prefix += " "
    sql = prefix + token.text + " /**/ " + rest.sql
    try:
        postgresql.execute(sql.encode())
    except psycopg.errors.SyntaxError as error:
        message = error.diag.message_primary or ""
        position = int(error.diag.statement_position or 0) - 1
    else:
        raise AssertionError(f"PostgreSQL took {sql!r}")
    start, text = first_token(sql, len(prefix))
    if text[:1] in "nN" and text[1:2] == "'":
        text = text[0]  # N'...' is the key word NCHAR, then '...', to PostgreSQL's parser
    assert (message, position) == (f'syntax error at or near "{text}"', start), sql


def answer(constant: Piece) -> str | None:
    """What PostgreSQL gives back for ``constant``::text: N'...' is a character(n), whose
    trailing spaces the cast drops."""
    if constant.text[:1] in "nN" and constant.value is not None:
        return constant.value.rstrip(" ")
    return constant.value


def constant_for_postgresql() -> st.SearchStrategy[Piece]:
    """A string constant PostgreSQL can give back (its escapes are all valid)."""
    return string_constant()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(constant_for_postgresql(), separator())
def test_postgresql_gives_string_constants_the_same_value(
    postgresql: psycopg.Connection[tuple[object, ...]], constant: Piece, gap: Piece
) -> None:
    sql = f"SELECT{gap.text}{constant.text}::text"
    rows = postgresql.execute(sql.encode()).fetchall()
    assert rows == [(answer(constant),)], sql
    if constant.tokens is not None:
        assert sql_tokens(f"SET application_name ={gap.text}{constant.text}")[-1] == (
            Token("string", constant.value or "")
        )


@st.composite
def scripts(draw: st.DrawFn) -> tuple[str, list[list[tuple[object, ...]]]]:
    """Statements (SELECT of string constants, or none: only comments) joined by ;, and
    what PostgreSQL answers to each."""
    sql, answers = "", []
    for _ in range(draw(st.integers(1, 4))):
        constants = draw(st.lists(constant_for_postgresql(), max_size=3))
        if constants:
            parts = [draw(separator()).text + c.text + "::text" for c in constants]
            sql += "SELECT" + ",".join(parts)
            answers.append([tuple(answer(c) for c in constants)])
        sql += draw(separator()).text + ";" + draw(separator()).text
    return sql, answers


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scripts())
def test_postgresql_finds_the_same_statements(
    postgresql: psycopg.Connection[tuple[object, ...]],
    script: tuple[str, list[list[tuple[object, ...]]]],
) -> None:
    sql, answers = script
    spans = scan(sql).spans
    assert len(spans) == len(answers)
    if not answers:
        return
    cursor = postgresql.execute(sql.encode())
    results = [cursor.fetchall()]
    while cursor.nextset():
        results.append(cursor.fetchall())
    assert [r for r in results if r] == answers, sql
