"""Session statements that dpproxy answers itself, without touching data.

BEGIN/START TRANSACTION, COMMIT/END, ROLLBACK/ABORT, SAVEPOINT, RELEASE, ROLLBACK TO,
SET, SHOW, RESET, DISCARD, DEALLOCATE and UNLISTEN (dpproxy has no LISTEN: a no-op,
which a client's reset sends). They are recognised
by a small hand-written scanner (no data-bearing SQL ever goes through here): anything
else is a query for the rewriter. BEGIN, COMMIT, ROLLBACK, SET TRANSACTION and SET
SESSION CHARACTERISTICS (the SET of "transaction") are read again, with their modes and
AND CHAIN, by proxy.transaction_statements. DECLARE, FETCH, MOVE and CLOSE (cursors) are
recognised by their first word alone, and read by proxy.cursor_statements.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from enum import Enum

from proxy.sql_escapes import read_unicode_escapes
from proxy.sql_lexer import (
    CODE,
    COMMENT,
    CONTINUATION,
    DOLLAR_STRING,
    ERROR,
    ESCAPE_STRING,
    QUOTED_IDENTIFIER,
    SEMICOLON,
    SQL_SPACE,
    STRING,
    UNICODE_IDENTIFIER,
    UNICODE_STRING,
    lex,
    lexer_error,
    token_text,
)
from rewriter.parse import MAX_SQL_LENGTH


class Kind(Enum):
    BEGIN = "BEGIN"
    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    SET = "SET"
    SHOW = "SHOW"
    RESET = "RESET"
    SAVEPOINT = "SAVEPOINT"
    RELEASE = "RELEASE"
    ROLLBACK_TO = "ROLLBACK TO"
    DISCARD = "DISCARD"
    DEALLOCATE = "DEALLOCATE"
    DECLARE = "DECLARE"
    FETCH = "FETCH"
    MOVE = "MOVE"
    CLOSE = "CLOSE"
    UNLISTEN = "UNLISTEN"


@dataclass(frozen=True)
class SessionStatement:
    kind: Kind
    # SET/SHOW/RESET: the parameter, lower-cased ("all" for RESET ALL); SAVEPOINT, RELEASE,
    # ROLLBACK TO: the savepoint; DISCARD: all, plans, temp or sequences; DEALLOCATE: the
    # prepared statement (None for DEALLOCATE ALL); UNLISTEN: the channel (None for *).
    name: str | None = None
    value: str | None = None  # SET: the value as text (quotes removed); None = DEFAULT
    local: bool = False  # SET LOCAL: the value lasts until the end of the transaction
    #: SET TRANSACTION or SET SESSION CHARACTERISTICS (name "transaction"), read again by
    #: proxy.transaction_statements; not SET transaction = 1, a parameter's SET.
    transaction: bool = False


class StatementSyntaxError(Exception):
    """A session statement that could not be understood; the message says the right form."""


class SeveralStatements(StatementSyntaxError):
    """A session statement followed by another in one text (``SET a = 1; SELECT 1``). The
    server splits a Query's statements first (proxy.several_statements) and hands them
    over one by one, so this is met only if that split and this scanner read a text
    differently: it is refused, as the rewriter refuses a text it reads as several."""

    def __init__(self) -> None:
        super().__init__("expected one statement, got several")


#: A token in the code between proxy.sql_lexer's lexemes, and the white space after it: a
#: name (a.b is one; a letter, _ or any character above U+007F, then digits and $ too, as
#: PostgreSQL reads names), a number (its sign with it), =, , or . (between quoted names).
_TOKEN = re.compile(
    r"(?:(?P<word>[A-Za-z_\x80-\U0010ffff][A-Za-z0-9_$.\x80-\U0010ffff]*+)"
    r"|(?P<number>[-+]?+(?:[0-9]++\.?+[0-9]*+|\.[0-9]++)(?:[eE][-+]?+[0-9]++)?+)"
    r"|(?P<symbol>[=,.]))"
    f"[{SQL_SPACE}]*+"
)
#: The lexemes that are tokens as they are: a string constant ('...', E'...', U&'...',
#: $$...$$, read by set_statement; each part of one continued on the next line apart) or
#: quoted identifier ("...", U&"...").
_QUOTED = frozenset(
    {
        STRING,
        ESCAPE_STRING,
        UNICODE_STRING,
        DOLLAR_STRING,
        CONTINUATION,
        QUOTED_IDENTIFIER,
        UNICODE_IDENTIFIER,
    }
)
_FIRST_WORD = re.compile(r"[A-Za-z_\x80-\U0010ffff][A-Za-z0-9_$\x80-\U0010ffff]*")
#: White space between words, as PostgreSQL 15's lexer knows it (not \v, nor Unicode's).
_GAP = f"[{SQL_SPACE}]+"
_BEGIN = {"begin", "start"}
_COMMIT = {"commit", "end"}
_ROLLBACK = {"rollback", "abort"}
_CURSOR_WORDS = frozenset({"declare", "fetch", "move", "close"})


#: What trailing semicolons may come with: removed with them, at once (not one by one).
_TRAILING = SQL_SPACE + ";"

# Clients repeat their statements: short ones are remembered (errors are not: they raise).
_CACHE_SIZE = 1024
_CACHED_LENGTH = 4096


def strip_sql(sql: str) -> str:
    """Remove comments, surrounding whitespace and trailing semicolons. A text longer than
    MAX_SQL_LENGTH, which no statement may be (the rewriter refuses it, free), is only
    trimmed: reading its comments, up to a message's megabyte of them, would hold the
    server's event loop for seconds."""
    if len(sql) > MAX_SQL_LENGTH:
        return sql.strip(SQL_SPACE)
    return _strip_cached(sql) if len(sql) <= _CACHED_LENGTH else _strip(sql)


def recognize(sql: str) -> SessionStatement | None:
    """A SessionStatement if ``sql`` is one, else None. Raises StatementSyntaxError."""
    return _recognize_cached(sql) if len(sql) <= _CACHED_LENGTH else _recognize(sql)


def _strip(sql: str) -> str:
    return _without_comments(sql).strip(SQL_SPACE).rstrip(_TRAILING)


def _without_comments(sql: str) -> str:
    """``sql`` with each comment proxy.sql_lexer finds (-- and nested /* */) replaced by a
    space, and the rest kept as it is: a -- inside a quoted text is not a comment, and from
    a quote or comment left open the rest is kept (it fails later)."""
    if "--" not in sql and "/*" not in sql:  # no comment can begin anywhere
        return sql
    parts: list[str] = []
    position = 0
    for kind, start, end, _ in lex(sql, code=False):
        if kind == COMMENT:
            parts += (sql[position:start], " ")
            position = end
    parts.append(sql[position:])
    return "".join(parts)


def _recognize(sql: str) -> SessionStatement | None:
    text = strip_sql(sql)
    leading = _FIRST_WORD.match(text)  # BEGIN, (a syntax error) begins with BEGIN too
    first = leading.group().lower() if leading else ""
    if first in _BEGIN:  # START is START TRANSACTION or a syntax error, as in PostgreSQL
        return SessionStatement(Kind.BEGIN)
    if first in _COMMIT:
        return SessionStatement(Kind.COMMIT)
    if first in _ROLLBACK:
        to = re.match(
            rf"(?is)rollback{_GAP}(?:work{_GAP}|transaction{_GAP})?to{_GAP}(?:savepoint{_GAP})?(.*)",
            text,
        )
        if to:
            if to.group(1).strip().lower() == "savepoint":
                raise StatementSyntaxError("expected ROLLBACK TO SAVEPOINT <name>")
            return SessionStatement(Kind.ROLLBACK_TO, _single_name(to.group(1), "ROLLBACK TO"))
        return SessionStatement(Kind.ROLLBACK)
    if first == "savepoint":
        return SessionStatement(Kind.SAVEPOINT, _single_name(text[len(first) :], "SAVEPOINT"))
    if first == "release":
        rest = re.sub(rf"(?is)^[{SQL_SPACE}]*savepoint\b", "", text[len(first) :])
        return SessionStatement(Kind.RELEASE, _single_name(rest, "RELEASE SAVEPOINT"))
    if first == "discard":
        return _parse_discard(text)
    if first == "unlisten":
        return _parse_unlisten(text)
    if first == "deallocate":
        return _parse_deallocate(text)
    if first in _CURSOR_WORDS:  # read by proxy.cursor_statements
        return SessionStatement(Kind(first.upper()))
    if first == "set":
        return _parse_set(text)
    if first == "show":
        return _parse_show(text)
    if first == "reset":
        words = _tokens(text)[1:]
        name, length = _var_name(words, "RESET <parameter> or RESET ALL")
        if length != len(words):
            raise _syntax_error_at(words[length])
        return SessionStatement(Kind.RESET, name)
    return None


_strip_cached = functools.lru_cache(maxsize=_CACHE_SIZE)(_strip)
_recognize_cached = functools.lru_cache(maxsize=_CACHE_SIZE)(_recognize)


def _tokens(text: str) -> list[str]:
    """The tokens of ``text`` as proxy.sql_lexer reads it, with PostgreSQL's white space
    (not Python's: \\v or U+00A0 is none): its string constants and quoted identifiers as
    written, and :data:`_TOKEN`'s in the code between. Raise StatementSyntaxError for
    anything else (SeveralStatements for a ;), and PostgreSQL's error (QueryError) where
    its lexer fails."""
    tokens: list[str] = []
    for kind, start, end, message in lex(text):
        if kind == CODE:
            position = start
            while position < end:
                match = _TOKEN.match(text, position, end)
                if match is None:
                    raise _syntax_error_at(token_text(text, position, end))
                tokens.append(match.group(match.lastgroup or "word"))
                position = match.end()
        elif kind in _QUOTED and text[start] not in "nN":
            tokens.append(text[start:end])
        elif kind == SEMICOLON:
            raise SeveralStatements
        elif kind == ERROR:
            raise lexer_error(message)
        elif kind == STRING:  # N'...': NCHAR, then the string, at which PostgreSQL fails
            raise _syntax_error_at(text[start + 1 : end])
        elif kind != COMMENT:  # B'...', X'...', $1
            raise _syntax_error_at(text[start:end])
    return tokens


def _syntax_error_at(near: str) -> StatementSyntaxError:
    return StatementSyntaxError(f'syntax error at or near "{near}"')


def _name(token: str) -> str:
    if token.startswith('"'):
        return token[1:-1].replace('""', '"').lower()
    return token.lower()


def _is_name(token: str) -> bool:
    """A word or a quoted identifier ("..." or U&"..."), not a constant or symbol."""
    first = token[0]
    if first == '"' or token[:3] in ('U&"', 'u&"'):
        return True
    return (first.isalpha() or first == "_" or first >= "\x80") and "'" not in token[:3]


def _var_name(tokens: list[str], what: str) -> tuple[str, int]:
    """The parameter named at the start of ``tokens`` (PostgreSQL's var_name: names
    separated by dots, each a word or a quoted identifier, "dpproxy"."epsilon" as
    dpproxy.epsilon) and how many tokens it takes; StatementSyntaxError if none."""
    parts: list[str] = []
    position = 0
    while True:
        if position >= len(tokens) or not _is_name(tokens[position]):
            near = tokens[position] if position < len(tokens) else None
            raise StatementSyntaxError(
                f"expected {what}" if near is None else f'syntax error at or near "{near}"'
            )
        token = tokens[position]
        position += 1
        if token[:3] in ('U&"', 'u&"'):
            escape = "\\"
            following = [t.lower() for t in tokens[position : position + 1]]
            if following == ["uescape"] and position + 1 < len(tokens):
                escape = _value([tokens[position + 1]]) or ""
                position += 2
            # (the lexer refused bad escapes and UESCAPE clauses)
            part = read_unicode_escapes(token[3:-1].replace('""', '"'), escape)[0].lower()
        else:
            part = _name(token)
        parts.append(part)
        if part.endswith(".") and not token.startswith(('"', "U&", "u&")):
            parts[-1] = part[:-1]  # a.b."c": the word a.b. and its dot
        elif position < len(tokens) and tokens[position] == ".":
            position += 1
        else:
            return ".".join(parts), position


def _value(tokens: list[str]) -> str | None:
    if len(tokens) == 1 and tokens[0].lower() == "default":
        return None
    parts = []
    for token in tokens:
        if token == ",":  # noqa: S105 (a list separator, not a password)
            continue
        if token.startswith("'"):
            parts.append(token[1:-1].replace("''", "'"))
        elif token.startswith('"'):
            parts.append(token[1:-1].replace('""', '"'))
        else:
            parts.append(token)
    return ", ".join(parts)


#: After these a word of SET (SESSION, LOCAL, TRANSACTION, CHARACTERISTICS) is a
#: parameter's name, as in PostgreSQL's grammar: SET transaction = 1 sets "transaction".
_AFTER_NAME = frozenset({"=", "to", "."})


def _parse_set(text: str) -> SessionStatement:
    tokens = _tokens(text)[1:]
    lowered = [t.lower() for t in tokens]

    def keyword(position: int, word: str) -> bool:
        """``word`` at ``position``, and not a parameter's name there."""
        following = lowered[position + 1 : position + 2]
        return lowered[position : position + 1] == [word] and not _AFTER_NAME & set(following)

    local = False
    characteristics = keyword(0, "session") and keyword(1, "characteristics")
    if not characteristics and (keyword(0, "session") or keyword(0, "local")):
        local = lowered[0] == "local"
        tokens, lowered = tokens[1:], lowered[1:]
    if keyword(0, "session") and keyword(1, "characteristics"):
        # SET [LOCAL | SESSION] SESSION CHARACTERISTICS AS TRANSACTION: read again later
        return SessionStatement(Kind.SET, "transaction", " ".join(tokens[2:]), local, True)
    if not tokens:
        raise StatementSyntaxError("expected SET <parameter> = <value>")
    if lowered[:2] == ["time", "zone"]:
        return SessionStatement(Kind.SET, "timezone", _value(tokens[2:]) or "UTC", local)
    if keyword(0, "transaction"):  # SET TRANSACTION: read again later
        return SessionStatement(Kind.SET, "transaction", " ".join(tokens[1:]), local, True)
    if lowered[0] in ("role", "session_authorization"):
        raise StatementSyntaxError(f"SET {tokens[0].upper()} is not supported by dpproxy")
    name, length = _var_name(tokens, "SET <parameter> = <value>")
    rest = tokens[length:]
    if not rest or rest[0].lower() not in ("=", "to"):
        raise StatementSyntaxError(f"expected SET {name} = <value> or SET {name} TO <value>")
    if len(rest) < 2:
        raise StatementSyntaxError(f"SET {name} needs a value")
    return SessionStatement(Kind.SET, name, _value(rest[1:]), local)


def _parse_show(text: str) -> SessionStatement:
    tokens = _tokens(text)[1:]
    lowered = [t.lower() for t in tokens]
    if lowered == ["time", "zone"]:
        return SessionStatement(Kind.SHOW, "timezone")
    if lowered[:3] == ["transaction", "isolation", "level"] and len(lowered) == 3:
        return SessionStatement(Kind.SHOW, "transaction_isolation")
    name, length = _var_name(tokens, "SHOW <parameter>")
    if length != len(tokens):
        raise _syntax_error_at(tokens[length])
    return SessionStatement(Kind.SHOW, name)


def _single_name(rest: str, statement: str) -> str:
    tokens = _tokens(rest)
    if len(tokens) != 1 or not _is_name(tokens[0]):
        raise StatementSyntaxError(f"expected {statement} <name>")
    return _name(tokens[0])


_DISCARD_TARGETS = frozenset({"all", "plans", "temp", "temporary", "sequences"})


def _parse_discard(text: str) -> SessionStatement:
    words = [t.lower() for t in _tokens(text)[1:]]
    if len(words) != 1 or words[0] not in _DISCARD_TARGETS:
        raise StatementSyntaxError(
            "expected DISCARD ALL, DISCARD PLANS, DISCARD SEQUENCES or DISCARD TEMP"
        )
    target = "temp" if words[0] == "temporary" else words[0]
    return SessionStatement(Kind.DISCARD, target)


def _parse_unlisten(text: str) -> SessionStatement:
    """UNLISTEN channel or UNLISTEN * (PostgreSQL's grammar: a ColId, or *)."""
    rest = text[len("unlisten") :].strip(SQL_SPACE)
    if rest == "*":
        return SessionStatement(Kind.UNLISTEN)
    if rest.startswith("*"):
        raise _syntax_error_at(_tokens(rest[1:])[0])  # what follows the *
    tokens = _tokens(rest)
    if not tokens:
        raise StatementSyntaxError("syntax error at end of input")
    name = tokens[0]
    dotted = "." in name and not name.startswith('"')  # a.b: one word to _tokens
    if dotted:
        raise _syntax_error_at(".")
    if not _is_name(name):
        raise _syntax_error_at(name)
    if len(tokens) > 1:
        raise _syntax_error_at(tokens[1])
    return SessionStatement(Kind.UNLISTEN, _name(name))


def _parse_deallocate(text: str) -> SessionStatement:
    tokens = _tokens(text)[1:]
    if tokens and tokens[0].lower() == "prepare":
        tokens = tokens[1:]
    if len(tokens) != 1 or not _is_name(tokens[0]):
        raise StatementSyntaxError("expected DEALLOCATE <name> or DEALLOCATE ALL")
    if tokens[0].lower() == "all":
        return SessionStatement(Kind.DEALLOCATE, None)
    token = tokens[0]
    if token.startswith('"'):  # a quoted name keeps its case
        return SessionStatement(Kind.DEALLOCATE, token[1:-1].replace('""', '"'))
    return SessionStatement(Kind.DEALLOCATE, token.lower())
