"""SQL text read token by token as PostgreSQL's lexer reads it (proxy.sql_lexer).

``sql_tokens`` splits a statement (a SET, for proxy.set_statement) into string constants
(their values: '' quotes, E'...' backslash escapes, strings continued on the next line),
quoted identifiers, words (folded to lower case as PostgreSQL folds them), numbers and
symbols; white space and comments are skipped. Other constants (U&'...', B'...',
$$...$$), parameters and other characters are refused.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from proxy.protocol.values import CHARACTER_NOT_IN_REPERTOIRE, invalid_utf8_message
from proxy.seam import QueryError
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
)
from proxy.sqlstate import SYNTAX_ERROR

INVALID_ESCAPE_SEQUENCE = "22025"


class Token(NamedTuple):
    kind: str  # "string", "ident" (quoted identifier), "word", "number" or "symbol"
    text: str


_SYMBOLS = frozenset("=,();.+-")
_OCTAL = re.compile(r"[0-7]{1,3}")
_HEX_BYTE = re.compile(r"[0-9A-Fa-f]{1,2}")
_SIMPLE_ESCAPES = {"b": b"\b", "f": b"\f", "n": b"\n", "r": b"\r", "t": b"\t"}


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
    value: bytearray | None = None  # the string constant being read (it may go on)
    escapes = False
    for kind, start, end, message in lex(sql):
        if kind == COMMENT:
            continue
        if kind == CONTINUATION and value is not None:
            _read_string(sql[start + 1 : end - 1], escapes, value)
            continue
        if value is not None:
            append(Token("string", _decoded(value)))
            value = None
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
            value = bytearray()
            quote = start if sql[start] == "'" else start + 1  # after E or N
            _read_string(sql[quote + 1 : end - 1], escapes, value)
        elif kind == QUOTED_IDENTIFIER:
            append(Token("ident", sql[start + 1 : end - 1].replace('""', '"')))
        elif kind == SEMICOLON:
            append(Token("symbol", ";"))
        elif kind == ERROR:
            raise syntax_error(message)
        else:  # U&'...', B'...', $$...$$, U&"...", $1
            raise syntax_error(f'syntax error at or near "{sql[start:][:20]}"')
    if value is not None:
        append(Token("string", _decoded(value)))
    return tokens


def _read_string(text: str, escapes: bool, value: bytearray) -> None:
    """Append to ``value`` the value of ``text``, what is between the quotes of a string
    constant: '' is a quote, and with ``escapes`` backslash escapes are read (\\n, \\t,
    \\b, \\f, \\r, octal \\123, hex \\x41, \\u00e9, \\U0001F600, else the next character
    as is)."""
    position = 0
    while escapes and (backslash := text.find("\\", position)) >= 0:
        value += text[position:backslash].replace("''", "'").encode("utf-8")
        position = _escape(text, backslash, value)
    value += text[position:].replace("''", "'").encode("utf-8")


def _decoded(value: bytearray) -> str:
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as error:
        raise QueryError(
            CHARACTER_NOT_IN_REPERTOIRE, invalid_utf8_message(bytes(value), error.start)
        ) from None
    if "\x00" in text:
        raise QueryError(
            CHARACTER_NOT_IN_REPERTOIRE, 'invalid byte sequence for encoding "UTF8": 0x00'
        )
    return text


def _escape(text: str, position: int, data: bytearray) -> int:
    """Append the value of the backslash escape at ``text[position]``; the position after
    it (``text`` is a string constant's inside: an escape never runs past it)."""
    following = text[position + 1 : position + 2]
    if not following:  # the lexer pairs every backslash with what follows it
        raise syntax_error("unterminated quoted string")
    simple = _SIMPLE_ESCAPES.get(following)
    if simple is not None:
        data += simple
        return position + 2
    if octal := _OCTAL.match(text, position + 1):
        data.append(int(octal.group(), 8) & 0xFF)
        return octal.end()
    if following == "x" and (hexadecimal := _HEX_BYTE.match(text, position + 2)):
        data.append(int(hexadecimal.group(), 16))
        return hexadecimal.end()
    if following in "uU":
        code, position = _unicode_escape(text, position)
        if 0xD800 <= code <= 0xDBFF:  # a UTF-16 surrogate pair, as PostgreSQL accepts
            if text[position : position + 2] != "\\u":
                raise syntax_error("invalid Unicode surrogate pair")
            low, position = _unicode_escape(text, position)
            if not 0xDC00 <= low <= 0xDFFF:
                raise syntax_error("invalid Unicode surrogate pair")
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
        if code == 0 or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            raise syntax_error("invalid Unicode escape value")
        data += chr(code).encode("utf-8")
        return position
    data += following.encode("utf-8")
    return position + 2


def _unicode_escape(text: str, position: int) -> tuple[int, int]:
    """The code point of the \\uXXXX or \\UXXXXXXXX at ``position``, and what follows."""
    digits = 4 if text[position + 1] == "u" else 8
    hexadecimal = text[position + 2 : position + 2 + digits]
    if len(hexadecimal) != digits or not all(c in "0123456789abcdefABCDEF" for c in hexadecimal):
        raise QueryError(
            INVALID_ESCAPE_SEQUENCE,
            "invalid Unicode escape",
            hint="Unicode escapes must be \\uXXXX or \\UXXXXXXXX.",
        )
    return int(hexadecimal, 16), position + 2 + digits
