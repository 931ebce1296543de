"""A quoted text cast to bytea, read as PostgreSQL's byteain reads it.

DuckDB reads ``'\\x01'`` in a blob as its own escape of one byte and the rest as text
(``'\\x0102'::BLOB`` is 01 30 32); PostgreSQL reads the hex format (``\\x`` then pairs of
hex digits, blanks between pairs) and the escape format (``\\\\`` a backslash, ``\\ooo`` an
octal byte, any other character its UTF-8 bytes). The bytes are computed here and given
to DuckDB as hex; text PostgreSQL refuses is refused with its error.
"""

from __future__ import annotations

from sqlglot import exp

from proxy.catalog.refusal import CatalogRefused

INVALID_TEXT_REPRESENTATION = "22P02"
INVALID_PARAMETER_VALUE = "22023"
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_BLANKS = frozenset(" \t\n\r")


def bytea_literal(text: str) -> exp.Expression:
    """DuckDB's BLOB of the bytes PostgreSQL reads ``text`` as."""
    data = byteain(text)
    return exp.Anonymous(this="from_hex", expressions=[exp.Literal.string(data.hex())])


def byteain(text: str) -> bytes:
    """The bytes of ``text`` read as a bytea; CatalogRefused with PostgreSQL's error."""
    if text.startswith("\\x"):
        return _hex(text[2:])
    return _escaped(text)


def _hex(digits: str) -> bytes:
    out = bytearray()
    index = 0
    while index < len(digits):
        first = digits[index]
        if first in _BLANKS:
            index += 1
            continue
        if first not in _HEX_DIGITS:
            raise _bad_digit(first)
        if index + 1 >= len(digits):
            raise CatalogRefused(
                "invalid hexadecimal data: odd number of digits",
                sqlstate=INVALID_PARAMETER_VALUE,
            )
        second = digits[index + 1]
        if second not in _HEX_DIGITS:
            raise _bad_digit(second)
        out.append(int(first + second, 16))
        index += 2
    return bytes(out)


def _bad_digit(character: str) -> CatalogRefused:
    return CatalogRefused(
        f'invalid hexadecimal digit: "{character}"', sqlstate=INVALID_PARAMETER_VALUE
    )


def _escaped(text: str) -> bytes:
    out = bytearray()
    index = 0
    while index < len(text):
        character = text[index]
        if character != "\\":
            out += character.encode("utf-8")
            index += 1
        elif text[index + 1 : index + 2] == "\\":
            out.append(ord("\\"))
            index += 2
        elif _is_octal(text[index + 1 : index + 4]):
            out.append(int(text[index + 1 : index + 4], 8))
            index += 4
        else:
            raise CatalogRefused(
                "invalid input syntax for type bytea", sqlstate=INVALID_TEXT_REPRESENTATION
            )
    return bytes(out)


def _is_octal(digits: str) -> bool:
    return (
        len(digits) == 3
        and digits[0] in "0123"
        and digits[1] in "01234567"
        and digits[2] in "01234567"
    )
