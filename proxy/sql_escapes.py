"""The escapes in string constants, read as PostgreSQL 15 reads them: the one place that
decides their values and which of them PostgreSQL refuses (proxy.sql_lexer refuses the
text then, proxy.sql_tokens reads the values).

- E'...' (src/backend/parser/scan.l): \\b \\f \\n \\r \\t, octal \\1 to \\377 (a byte),
  hex \\x1 to \\xff (a byte), \\uXXXX and \\UXXXXXXXX (a code point; a UTF-16 surrogate
  pair of two of them right after each other), any other character as it is. Errors:
  \\u or \\U without its 4 or 8 hex digits (22025), a surrogate not in a pair, a code
  point 0 or beyond U+10FFFF (42601), and bytes that are not UTF-8, or a NUL byte, in the
  whole constant (its continuations too; 22021).
- U&'...' and U&"..." (src/backend/parser/parser.c, str_udeescape): with the escape
  character (\\, else the one UESCAPE gives), XXXX or +XXXXXX hex digits give a code
  point, two escape characters one. Errors, all 42601: an escape character followed by
  anything else, code point 0 or beyond U+10FFFF, a surrogate not in a pair (22021 where
  PostgreSQL's cursor for the error falls inside a character: unicode_escapes_error); an
  escape character (valid_uescape) of more than one byte, a hex digit, +, a quote or
  white space (proxy.sql_lexer reads the UESCAPE clause).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from proxy.protocol.values import CHARACTER_NOT_IN_REPERTOIRE, invalid_utf8_message

SYNTAX_ERROR = "42601"
INVALID_ESCAPE_SEQUENCE = "22025"

E_ESCAPE_HINT = "Unicode escapes must be \\uXXXX or \\UXXXXXXXX."
U_ESCAPE_HINT = "Unicode escapes must be \\XXXX or \\+XXXXXX."


class ErrorMessage(str):
    """PostgreSQL's message for text its lexer refuses, with the SQLSTATE and the hint it
    gives with it (an ERROR lexeme's message; a plain str there is a 42601 without hint)."""

    sqlstate: str
    hint: str | None

    def __new__(
        cls, text: str, sqlstate: str = SYNTAX_ERROR, hint: str | None = None
    ) -> ErrorMessage:
        message = super().__new__(cls, text)
        message.sqlstate = sqlstate
        message.hint = hint
        return message


def at_or_near(what: str, text: str) -> ErrorMessage:
    """PostgreSQL's lexer's syntax error ``what`` at the token ``text`` ("" at the end)."""
    if not text:
        return ErrorMessage(f"{what} at end of input")
    return ErrorMessage(f'{what} at or near "{text}"')


_HEX = {4: re.compile(r"[0-9A-Fa-f]{4}"), 6: re.compile(r"[0-9A-Fa-f]{6}")}
_INVALID_E_ESCAPE = ErrorMessage("invalid Unicode escape", INVALID_ESCAPE_SEQUENCE, E_ESCAPE_HINT)
_BAD_PAIR = "invalid Unicode surrogate pair"
_BAD_VALUE = "invalid Unicode escape value"


def _high(code: int) -> bool:
    return 0xD800 <= code <= 0xDBFF


def _low(code: int) -> bool:
    return 0xDC00 <= code <= 0xDFFF


def _valid(code: int) -> bool:
    return 0 < code <= 0x10FFFF


def _pair(high: int, low: int) -> int:
    return 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)


def read_escape_string(
    insides: Sequence[str], *, terminated: bool = True
) -> tuple[str, ErrorMessage | None]:
    """The value of the E'...' constant whose parts (the first, then each continuation)
    hold ``insides`` between their quotes, or PostgreSQL's error for it: ("", error).
    Without ``terminated``, the last part is the rest of the text, whose closing quote is
    missing: only the errors PostgreSQL meets before the end are given (the value is "")."""
    pieces: list[str] = []
    last = len(insides) - 1
    for index, inside in enumerate(insides):
        error = _read_escapes(inside, terminated or index < last, pieces)
        if error is not None:
            return "", error
    if not terminated:
        return "", None
    text = "".join(pieces)
    if _RAW_BYTE.search(text) is None:  # (all is UTF-8)
        return (text, None) if "\x00" not in text else ("", _NUL)
    try:
        data = text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate in the text (no UTF-8 query holds one)
        data = text.encode("utf-8", "surrogatepass")  # (not UTF-8 either: refused)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as failure:
        bad: int | None = failure.start
    else:
        bad = None
    nul = data.find(0)
    if nul >= 0 and (bad is None or nul < bad):
        bad = nul
    if bad is not None:
        return "", ErrorMessage(invalid_utf8_message(data, bad), CHARACTER_NOT_IN_REPERTOIRE)
    return text, None


#: A backslash escape of E'...': octal (group 1), hex (2), \\u (3), \\U (4), \\u or \\U
#: without their digits (5), another character (6), or nothing: the end of the text.
_ESCAPE = re.compile(
    r"\\(?:([0-7]{1,3})|x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|([uU])|(.)|\Z)",
    re.DOTALL,
)
_OCTAL, _HEX_BYTE, _U4, _U8, _BAD_U, _OTHER = range(1, 7)
_SIMPLE = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
#: A byte 0x80 to 0xff that an octal or hex escape makes, held as Python's surrogateescape
#: error handler holds it (a byte below is its ASCII character).
_BYTES = [chr(byte if byte < 0x80 else 0xDC00 + byte) for byte in range(256)]
_RAW_BYTE = re.compile("[\udc80-\udcff]")
_NUL = ErrorMessage('invalid byte sequence for encoding "UTF8": 0x00', CHARACTER_NOT_IN_REPERTOIRE)


def _read_escapes(inside: str, closed: bool, pieces: list[str]) -> ErrorMessage | None:
    """Append the value of one part of an E'...' constant to ``pieces`` ('' is a quote);
    PostgreSQL's error for it, if any. ``closed``: a quote follows ``inside``."""
    position = 0
    search = _ESCAPE.search
    while (escape := search(inside, position)) is not None:
        pieces.append(inside[position : escape.start()].replace("''", "'"))
        position = escape.end()
        group = escape.lastindex
        if group == _OTHER:
            other = escape.group(_OTHER)
            pieces.append(_SIMPLE.get(other, other))
        elif group == _OCTAL:
            pieces.append(_BYTES[int(escape.group(_OCTAL), 8) & 0xFF])
        elif group == _HEX_BYTE:
            pieces.append(_BYTES[int(escape.group(_HEX_BYTE), 16)])
        elif group is None:  # a backslash at the very end (the constant is left open)
            pieces.append("\\")
        elif group == _BAD_U:
            return _INVALID_E_ESCAPE
        else:
            code = int(escape.group(group), 16)
            if _high(code):  # the low half must follow, right after it
                second = search(inside, position)
                if second is None or second.start() != position:
                    shown = inside[position : position + 1] or ("'" if closed else "")
                    return at_or_near(_BAD_PAIR, shown)
                low = second.lastindex
                if low == _BAD_U:
                    return _INVALID_E_ESCAPE
                if low not in (_U4, _U8) or not _low(int(second.group(low), 16)):
                    return at_or_near(_BAD_PAIR, "\\" if low not in (_U4, _U8) else second.group())
                code = _pair(code, int(second.group(low), 16))
                position = second.end()
            elif _low(code):
                return at_or_near(_BAD_PAIR, escape.group())
            elif not _valid(code):
                return at_or_near(_BAD_VALUE, escape.group())
            pieces.append(chr(code))
    pieces.append(inside[position:].replace("''", "'"))
    return None


def read_unicode_escapes(text: str, escape: str = "\\") -> tuple[str, ErrorMessage | None]:
    """The value of a U&'...' constant or U&"..." identifier whose text, quotes undoubled,
    is ``text``, read with the escape character ``escape``; or ("", PostgreSQL's error)."""
    value, error, _ = _read_unicode(text, escape)
    return value, error


def unicode_escapes_error(sql: str, start: int, text: str, escape: str) -> ErrorMessage | None:
    """PostgreSQL's error for the U&'...' or U&"..." at ``sql[start]`` whose text, quotes
    undoubled, is ``text``, read with ``escape``; None if it takes it.

    PostgreSQL gives the error a cursor: the byte ``start`` + 3 (U&') + the escape's byte
    offset in ``text``, which is not where it is in ``sql`` when a quote was doubled (or
    the constant goes on after a line break). When that byte is inside a character of
    more than one byte, PostgreSQL fails on it: 22021 with the bytes of the character
    before the cursor, instead of the error."""
    _, error, offset = _read_unicode(text, escape)
    if error is None:
        return None
    data = sql.encode("utf-8", "surrogatepass")
    cursor = len(sql[:start].encode("utf-8", "surrogatepass")) + 3
    cursor += len(text[:offset].encode("utf-8", "surrogatepass"))
    if cursor >= len(data) or data[cursor] & 0xC0 != 0x80:  # (a character begins there)
        return error
    begins = cursor
    while data[begins] & 0xC0 == 0x80:
        begins -= 1
    shown = " ".join(f"0x{byte:02x}" for byte in data[begins:cursor])
    return ErrorMessage(
        f'invalid byte sequence for encoding "UTF8": {shown}', CHARACTER_NOT_IN_REPERTOIRE
    )


def _read_unicode(text: str, escape: str) -> tuple[str, ErrorMessage | None, int]:
    """read_unicode_escapes's value or error, and where in ``text`` the error is."""
    if escape not in text:
        return text, None, 0
    parts: list[str] = []
    high = 0  # the first half of a surrogate pair, waiting for the second
    position = 0
    length = len(text)
    while position < length:
        found = text.find(escape, position)
        if found < 0:
            found = length
        if found > position:
            if high:
                return "", ErrorMessage(_BAD_PAIR), position
            parts.append(text[position:found])
            if found == length:
                break
        following = text[found + 1 : found + 2]
        if following == escape:
            if high:
                return "", ErrorMessage(_BAD_PAIR), found
            parts.append(escape)
            position = found + 2
            continue
        digits = _HEX[4].match(text, found + 1)
        if digits is None and following == "+":
            digits = _HEX[6].match(text, found + 2)
        if digits is None:
            return "", ErrorMessage("invalid Unicode escape", hint=U_ESCAPE_HINT), found
        code = int(digits.group(), 16)
        position = digits.end()
        if not _valid(code):
            return "", ErrorMessage(_BAD_VALUE), found
        if high:
            if not _low(code):
                return "", ErrorMessage(_BAD_PAIR), found
            code, high = _pair(high, code), 0
        elif _low(code):
            return "", ErrorMessage(_BAD_PAIR), found
        if _high(code):
            high = code
        else:
            parts.append(chr(code))
    if high:
        return "", ErrorMessage(_BAD_PAIR), length
    return "".join(parts), None, 0


def valid_uescape(value: str) -> bool:
    """Whether ``value``, the constant after UESCAPE, may be an escape character: one byte,
    not a hex digit, +, a quote or white space."""
    return (
        len(value) == 1
        and "\x00" < value < "\x80"
        and value not in "0123456789abcdefABCDEF+'\" \t\n\r\f"
    )
