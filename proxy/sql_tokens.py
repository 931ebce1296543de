"""SQL text read token by token as PostgreSQL's lexer reads it.

``sql_tokens`` splits a statement (a SET, for proxy.set_statement) into string constants
(with E'...' backslash escapes, '' quotes, and strings continued on the next line),
quoted identifiers, words (folded to lower case as PostgreSQL folds them), numbers and
symbols, skipping white space and comments (-- and nested /* */).
"""

from __future__ import annotations

import re
from typing import NamedTuple

from proxy.protocol.values import CHARACTER_NOT_IN_REPERTOIRE, invalid_utf8_message
from proxy.seam import QueryError
from proxy.sql_comments import block_comment_end
from proxy.sqlstate import SYNTAX_ERROR

INVALID_ESCAPE_SEQUENCE = "22025"


class Token(NamedTuple):
    kind: str  # "string", "ident" (quoted identifier), "word", "number" or "symbol"
    text: str


_SQL_SPACE = " \t\n\r\f"
_NUMBER = re.compile(r"(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_WORD = re.compile(r"[A-Za-z_\u0080-\U0010ffff][A-Za-z0-9_$\u0080-\U0010ffff]*")
# Two string constants separated by white space with a newline are one (the SQL standard).
_CONTINUATION = re.compile(r"[ \t\f]*[\n\r](?:[ \t\n\r\f]|--[^\n\r]*[\n\r])*'")
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
    position = 0
    while position < len(sql):
        char = sql[position]
        following = sql[position + 1 : position + 2]
        if char in _SQL_SPACE or char == "\v":
            position += 1
        elif sql.startswith("--", position):
            newline = re.compile(r"[\n\r]").search(sql, position)
            position = len(sql) if newline is None else newline.end()
        elif sql.startswith("/*", position):
            position = _skip_comment(sql, position)
        elif char == "'" or (char in "eEnN" and following == "'"):
            start = position if char == "'" else position + 1
            text, position = _string_constant(sql, start, escapes=char in "eE")
            tokens.append(Token("string", text))
        elif char == '"':
            end = position + 1
            while True:
                end = sql.find('"', end)
                if end < 0:
                    raise syntax_error("unterminated quoted identifier")
                if not sql.startswith('""', end):
                    break
                end += 2
            name = sql[position + 1 : end].replace('""', '"')
            if not name:
                raise syntax_error("zero-length delimited identifier")
            tokens.append(Token("ident", name))
            position = end + 1
        elif number := _NUMBER.match(sql, position):
            position = number.end()
            if _WORD.match(sql, position):
                raise syntax_error(
                    f'trailing junk after numeric literal at "{sql[position:][:20]}"'
                )
            tokens.append(Token("number", number.group()))
        elif word := _WORD.match(sql, position):
            tokens.append(Token("word", lower_identifier(word.group())))
            position = word.end()
        elif char in "=,();.+-":
            tokens.append(Token("symbol", char))
            position += 1
        else:
            raise syntax_error(f'syntax error at or near "{sql[position:][:20]}"')
    return tokens


def _skip_comment(sql: str, position: int) -> int:
    """The position after the /* comment */ at ``position`` (they nest, as in PostgreSQL)."""
    end = block_comment_end(sql, position)
    if end is None:
        raise syntax_error("unterminated /* comment")
    return end


def _string_constant(sql: str, start: int, *, escapes: bool) -> tuple[str, int]:
    """The value of the string constant whose opening quote is at ``start``, and the
    position after it: '' is a quote, and in an E'...' string backslash escapes are read
    (\\n, \\t, \\b, \\f, \\r, octal \\123, hex \\x41, \\u00e9, \\U0001F600, else the next
    character as is)."""
    data = bytearray()
    position = start + 1
    while True:
        if position >= len(sql):
            raise syntax_error("unterminated quoted string")
        char = sql[position]
        if char == "'":
            if sql.startswith("''", position):
                data += b"'"
                position += 2
                continue
            continuation = _CONTINUATION.match(sql, position + 1)
            if continuation is None:
                position += 1
                break
            position = continuation.end()
        elif escapes and char == "\\":
            position = _escape(sql, position, data)
        else:
            data += char.encode("utf-8")
            position += 1
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise QueryError(
            CHARACTER_NOT_IN_REPERTOIRE, invalid_utf8_message(bytes(data), error.start)
        ) from None
    if "\x00" in text:
        raise QueryError(
            CHARACTER_NOT_IN_REPERTOIRE, 'invalid byte sequence for encoding "UTF8": 0x00'
        )
    return text, position


def _escape(sql: str, position: int, data: bytearray) -> int:
    """Append the value of the backslash escape at ``position``; the position after it."""
    following = sql[position + 1 : position + 2]
    if not following:
        raise syntax_error("unterminated quoted string")
    simple = _SIMPLE_ESCAPES.get(following)
    if simple is not None:
        data += simple
        return position + 2
    if octal := _OCTAL.match(sql, position + 1):
        data.append(int(octal.group(), 8) & 0xFF)
        return octal.end()
    if following == "x" and (hexadecimal := _HEX_BYTE.match(sql, position + 2)):
        data.append(int(hexadecimal.group(), 16))
        return hexadecimal.end()
    if following in "uU":
        code, position = _unicode_escape(sql, position)
        if 0xD800 <= code <= 0xDBFF:  # a UTF-16 surrogate pair, as PostgreSQL accepts
            if sql[position : position + 2] != "\\u":
                raise syntax_error("invalid Unicode surrogate pair")
            low, position = _unicode_escape(sql, position)
            if not 0xDC00 <= low <= 0xDFFF:
                raise syntax_error("invalid Unicode surrogate pair")
            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
        if code == 0 or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
            raise syntax_error("invalid Unicode escape value")
        data += chr(code).encode("utf-8")
        return position
    data += following.encode("utf-8")
    return position + 2


def _unicode_escape(sql: str, position: int) -> tuple[int, int]:
    """The code point of the \\uXXXX or \\UXXXXXXXX at ``position``, and what follows."""
    digits = 4 if sql[position + 1] == "u" else 8
    text = sql[position + 2 : position + 2 + digits]
    if len(text) != digits or not all(c in "0123456789abcdefABCDEF" for c in text):
        raise QueryError(
            INVALID_ESCAPE_SEQUENCE,
            "invalid Unicode escape",
            hint="Unicode escapes must be \\uXXXX or \\UXXXXXXXX.",
        )
    return int(text, 16), position + 2 + digits
