"""SQL text read token by token as PostgreSQL's lexer reads it (proxy.sql_lexer).

``sql_tokens`` splits a statement (a SET, for proxy.set_statement) into string constants
(their values: '' quotes, E'...' backslash escapes as proxy.sql_escapes reads them,
strings continued on the next line), quoted identifiers, words (folded to lower case as
PostgreSQL folds them), numbers and symbols; white space and comments are skipped. Other
constants (U&'...', B'...', $$...$$), parameters and other characters are refused, and
what PostgreSQL's lexer refuses with its error.
"""

from __future__ import annotations

from typing import NamedTuple

from proxy.protocol.values import CHARACTER_NOT_IN_REPERTOIRE
from proxy.seam import QueryError
from proxy.sql_escapes import read_escape_string
from proxy.sql_lexer import (
    CODE,
    CODE_TOKEN,
    COMMENT,
    CONTINUATION,
    ERROR,
    ESCAPE_STRING,
    QUOTED_IDENTIFIER,
    SEMICOLON,
    STRING,
    lex,
    lexer_error,
)
from proxy.sqlstate import SYNTAX_ERROR


class Token(NamedTuple):
    kind: str  # "string", "ident" (quoted identifier), "word", "number" or "symbol"
    text: str


_SYMBOLS = frozenset("=,();.+-")


def syntax_error(message: str, hint: str | None = None) -> QueryError:
    return QueryError(SYNTAX_ERROR, message, hint=hint)


def lower_identifier(word: str) -> str:
    """PostgreSQL folds unquoted identifiers to lower case, ASCII letters only."""
    return word.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def sql_tokens(sql: str) -> list[Token]:
    tokens: list[Token] = []
    append = tokens.append
    new = tuple.__new__  # makes a Token faster than its constructor
    insides: list[str] | None = None  # the string constant being read (it may go on)
    escapes = False
    for kind, start, end, message in lex(sql):
        if kind == COMMENT:
            continue
        if kind == CONTINUATION and insides is not None:
            insides.append(sql[start + 1 : end - 1])
            continue
        if insides is not None:
            append(Token("string", _value(insides, escapes)))
            insides = None
        if kind == CODE:
            for word, number, other in CODE_TOKEN.findall(sql, start, end):
                if word:
                    append(new(Token, ("word", word.translate(_ASCII_LOWER))))
                elif number:
                    append(new(Token, ("number", number)))
                elif other in _SYMBOLS:
                    append(new(Token, ("symbol", other)))
                else:
                    position = sql.index(other, start)
                    raise syntax_error(f'syntax error at or near "{sql[position:][:20]}"')
        elif kind in (STRING, ESCAPE_STRING):
            escapes = kind == ESCAPE_STRING
            quote = start if sql[start] == "'" else start + 1  # after E or N
            insides = [sql[quote + 1 : end - 1]]
        elif kind == QUOTED_IDENTIFIER:
            append(Token("ident", sql[start + 1 : end - 1].replace('""', '"')))
        elif kind == SEMICOLON:
            append(Token("symbol", ";"))
        elif kind == ERROR:
            raise lexer_error(message)
        else:  # U&'...', B'...', $$...$$, U&"...", $1
            raise syntax_error(f'syntax error at or near "{sql[start:][:20]}"')
    if insides is not None:
        append(Token("string", _value(insides, escapes)))
    return tokens


def _value(insides: list[str], escapes: bool) -> str:
    """The value of a string constant whose parts hold ``insides`` between their quotes:
    '' is a quote, and with ``escapes`` (E'...') backslash escapes are read."""
    if escapes:
        value, problem = read_escape_string(insides)
        if problem is not None:  # (the lexer gives an ERROR lexeme for it first)
            raise lexer_error(problem)
        return value
    value = "".join(inside.replace("''", "'") for inside in insides)
    if "\x00" in value:  # (no Query message holds one: as PostgreSQL would say)
        raise QueryError(
            CHARACTER_NOT_IN_REPERTOIRE, 'invalid byte sequence for encoding "UTF8": 0x00'
        )
    return value
