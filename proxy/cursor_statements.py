"""DECLARE, FETCH, MOVE and CLOSE read by PostgreSQL 15's grammar.

proxy.statements recognises them by their first word; ``read_cursor_statement`` reads
them again from their text, token by token (proxy.sql_tokens), as PostgreSQL's parser
does:

- ``DECLARE name [BINARY | ASENSITIVE | INSENSITIVE | [NO] SCROLL]... CURSOR
  [{WITH | WITHOUT} HOLD] FOR query``: only the words up to FOR are read here. The query
  is never tokenized by this module: it is handed on as written (from the first token
  after FOR), to be answered as the same query sent alone. It must begin as PostgreSQL's
  SelectStmt does (SELECT, WITH, VALUES, TABLE or a parenthesis);
- ``FETCH`` / ``MOVE [direction] [FROM | IN] name``, with the directions NEXT, PRIOR,
  FIRST, LAST, ABSOLUTE n, RELATIVE n, n, ALL, FORWARD [n | ALL] and BACKWARD [n | ALL],
  turned into PostgreSQL's FetchStmt (a direction and a count, FETCH_ALL for ALL). n is
  PostgreSQL's SignedIconst: an integer constant of the int4 range with an optional sign;
- ``CLOSE name | ALL``.

Anything else is a syntax error (42601) worded as PostgreSQL's. What they do is
proxy.cursors'.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TypeVar

from proxy.catalog.keywords import KEYWORDS
from proxy.seam import QueryError
from proxy.sql_lexer import CODE, CODE_TOKEN, COMMENT, lex
from proxy.sql_tokens import Token, TokenReader, sql_tokens, syntax_error

INVALID_CURSOR_DEFINITION = "42P11"
#: PostgreSQL's FETCH_ALL (LONG_MAX): the count of ALL, FORWARD ALL and BACKWARD ALL.
FETCH_ALL = 2**63 - 1
#: The largest integer constant PostgreSQL's lexer reads as one (ICONST, int4).
_MAX_ICONST = 2**31 - 1

#: Key words that cannot name a cursor (PostgreSQL's reserved and type_func_name ones: a
#: cursor's name is a ColId).
_NOT_NAMES = frozenset(
    word
    for (category, _), words in KEYWORDS.items()
    if category in ("R", "T")
    for word in words.split()
)
#: The words a SelectStmt begins with (and "(").
_QUERY_STARTS = frozenset({"select", "with", "values", "table", "("})
_T = TypeVar("_T")


class Direction(Enum):
    FORWARD = "FORWARD"
    BACKWARD = "BACKWARD"
    ABSOLUTE = "ABSOLUTE"
    RELATIVE = "RELATIVE"


@dataclass(frozen=True)
class Declare:
    name: str
    query: str  # the query after FOR, as written (to the end of the statement's text)
    query_start: int  # where ``query`` begins in the statement's text
    #: Where ``query`` begins: the line breaks before it, the characters before it on its line.
    place: tuple[int, int]
    scroll: bool | None  # SCROLL: True, NO SCROLL: False, neither: None
    hold: bool  # WITH HOLD
    binary: bool
    #: The whole statement's text, as read (pg_cursors shows it).
    text: str = field(default="", compare=False)


@dataclass(frozen=True)
class Fetch:
    name: str
    direction: Direction
    count: int  # FETCH_ALL for ALL; may be negative (PostgreSQL turns it around)
    move: bool  # MOVE: the cursor moves, and no rows are returned

    @property
    def command(self) -> str:
        return "MOVE" if self.move else "FETCH"


@dataclass(frozen=True)
class Close:
    name: str | None  # None: CLOSE ALL


CursorStatement = Declare | Fetch | Close


def read_cursor_statement(sql: str) -> CursorStatement:
    """The cursor statement ``sql`` (one proxy.statements recognised as DECLARE, FETCH,
    MOVE or CLOSE), read by PostgreSQL's grammar. Raises QueryError: 42601 for a syntax
    error, 42P11 for options that contradict each other."""
    start = query_start(sql)
    tokens = sql_tokens(sql if start is None else sql[:start])
    while tokens and tokens[-1] == Token("symbol", ";"):
        tokens.pop()
    reader = _Reader(tokens)
    first = reader.word()
    if first == "declare":
        return _declare(reader, sql, start)
    if first in ("fetch", "move"):
        return _fetch(reader, move=first == "move")
    if first == "close":
        name = None if reader.take("all") else reader.name()
        reader.finish()
        return Close(name)
    raise reader.error(back=1)


def query_start(sql: str) -> int | None:
    """Where the query of ``DECLARE … FOR query`` begins in ``sql`` (past the white space
    and comments after FOR); None if ``sql`` is no DECLARE or nothing follows its FOR.
    Never raises: a text it cannot read so is read again, and refused, by
    ``read_cursor_statement``. FOR is a reserved key word, so the first one in the code
    (outside quotes and comments) ends the DECLARE's head."""
    first = True
    after_for = False
    for kind, start, end, _ in lex(sql):
        if kind == COMMENT:
            continue
        if after_for:
            return start
        if kind != CODE:
            if first:
                return None
            continue
        for match in CODE_TOKEN.finditer(sql, start, end):
            if after_for:
                return match.start()
            word = (match.group(1) or "").lower()
            if first and word != "declare":
                return None
            first = False
            after_for = word == "for"
    return None


def _declare(reader: _Reader, sql: str, start: int | None) -> Declare:
    name = reader.name()
    scroll: bool | None = None
    sensitivity: str | None = None
    binary = False
    while True:
        if reader.take("no"):
            reader.expect("scroll")
            scroll = _option(scroll, False, "SCROLL", "NO SCROLL")
        elif reader.take("scroll"):
            scroll = _option(scroll, True, "SCROLL", "NO SCROLL")
        elif reader.take("binary"):
            binary = True
        elif reader.take("asensitive"):
            sensitivity = _option(sensitivity, "asensitive", "ASENSITIVE", "INSENSITIVE")
        elif reader.take("insensitive"):
            sensitivity = _option(sensitivity, "insensitive", "ASENSITIVE", "INSENSITIVE")
        else:
            break
    reader.expect("cursor")
    hold = False
    if reader.take("with"):
        reader.expect("hold")
        hold = True
    elif reader.take("without"):
        reader.expect("hold")
    reader.expect("for")
    reader.finish()  # (the tokens end at FOR: query_start)
    if start is None:
        raise syntax_error("syntax error at end of input")
    query = sql[start:]
    _check_query_start(query)
    return Declare(name, query, start, _place(sql[:start]), scroll, hold, binary, sql)


def _place(head: str) -> tuple[int, int]:
    """The line breaks in ``head`` (\\r\\n, \\r or \\n) and the characters after the last."""
    line, line_start, position = 0, 0, 0
    while position < len(head):
        if head[position] in "\r\n":
            position += 2 if head.startswith("\r\n", position) else 1
            line, line_start = line + 1, position
        else:
            position += 1
    return line, len(head) - line_start


def _option(current: _T | None, wanted: _T, first: str, second: str) -> _T:
    """A cursor option set to ``wanted``; 42P11 if it was set to the other value."""
    if current is not None and current != wanted:
        raise QueryError(INVALID_CURSOR_DEFINITION, f"cannot specify both {first} and {second}")
    return wanted


def _check_query_start(query: str) -> None:
    """As PostgreSQL's grammar: DECLARE's query is a SelectStmt (SHOW, INSERT ... are
    syntax errors at their first word)."""
    for kind, start, end, _ in lex(query):
        if kind == COMMENT:
            continue
        if kind == CODE:
            match = CODE_TOKEN.match(query, start, end)
            if match is not None:
                first = match.group()
                if first.lower() in _QUERY_STARTS:
                    return
                raise syntax_error(f'syntax error at or near "{first}"')
        raise syntax_error(f'syntax error at or near "{query[start:end]}"')
    raise syntax_error("syntax error at end of input")


_FIXED = {
    "next": (Direction.FORWARD, 1),
    "prior": (Direction.BACKWARD, 1),
    "first": (Direction.ABSOLUTE, 1),
    "last": (Direction.ABSOLUTE, -1),
    "all": (Direction.FORWARD, FETCH_ALL),
}


def _fetch(reader: _Reader, *, move: bool) -> Fetch:
    """PostgreSQL's fetch_args: a cursor's name alone is one (FETCH next fetches from the
    cursor "next"); else a direction, then [FROM | IN], then the name."""
    if reader.remaining() == 1 and reader.is_name():
        return Fetch(reader.name(), Direction.FORWARD, 1, move)
    direction, count = Direction.FORWARD, 1
    token = reader.peek()
    word = token.text if token is not None and token.kind == "word" else ""
    if word in _FIXED:
        reader.word()
        direction, count = _FIXED[word]
    elif word in ("absolute", "relative"):
        reader.word()
        direction = Direction.ABSOLUTE if word == "absolute" else Direction.RELATIVE
        count = reader.signed_integer()
    elif word in ("forward", "backward"):
        reader.word()
        direction = Direction.FORWARD if word == "forward" else Direction.BACKWARD
        if reader.take("all"):
            count = FETCH_ALL
        elif reader.at_integer():
            count = reader.signed_integer()
    elif reader.at_integer():
        count = reader.signed_integer()
    if not reader.take("from"):
        reader.take("in")
    name = reader.name()
    reader.finish()
    return Fetch(name, direction, count, move)


class _Reader(TokenReader):
    """Also cursor names and PostgreSQL's signed integer constants."""

    def is_name(self) -> bool:
        token = self.peek()
        if token is None:
            return False
        return token.kind == "ident" or (token.kind == "word" and token.text not in _NOT_NAMES)

    def name(self) -> str:
        """A cursor's name: a quoted identifier as written, else a word (folded to lower
        case) that is not a reserved key word."""
        if not self.is_name():
            raise self.error()
        self._position += 1
        return self._tokens[self._position - 1].text

    def at_integer(self) -> bool:
        token = self.peek()
        return token is not None and (
            token.kind == "number" or token in (Token("symbol", "+"), Token("symbol", "-"))
        )

    def signed_integer(self) -> int:
        """PostgreSQL's SignedIconst: [+ | -] an integer constant up to 2^31 - 1 (a larger
        one is a numeric constant to PostgreSQL's lexer, and a syntax error here)."""
        sign = 1
        if self.peek() in (Token("symbol", "+"), Token("symbol", "-")):
            sign = -1 if self.peek() == Token("symbol", "-") else 1
            self._position += 1
        token = self.peek()
        if (
            token is None
            or token.kind != "number"
            or not token.text.isascii()
            or not token.text.isdigit()
            or int(token.text) > _MAX_ICONST
        ):
            raise self.error()
        self._position += 1
        return sign * int(token.text)
