"""Arrays of one dimension in a result, sent in binary (array_send): text[] and oid[],
which asyncpg asks for in binary in the answer of its type lookup (its attrnames and
attrtypoids columns; proxy.catalog). No I/O: PostgreSQL's array text in, bytes out."""

from __future__ import annotations

import struct
from collections.abc import Callable

#: The array types sent in binary, by OID, and their element types (text, oid).
BINARY_ARRAY_ELEMENTS: dict[int, int] = {1009: 25, 1028: 26}
_HEADER = struct.Struct("!iiIii")  # dimensions, has NULLs, element type, length, lower bound
_EMPTY = struct.Struct("!iiI")
_LENGTH = struct.Struct("!i")


def array_elements(text: str) -> list[str | None]:
    """The elements of PostgreSQL's text of an array of one dimension (``{a,"b c",NULL}``),
    as array_out writes it: double quotes with backslash escapes, NULL unquoted. Raise
    ValueError for anything else (several dimensions, bounds)."""
    if len(text) < 2 or text[0] != "{" or text[-1] != "}":
        raise ValueError("not an array of one dimension")
    body = text[1:-1]
    items: list[str | None] = []
    if body == "":
        return items
    position = 0
    while True:
        if position < len(body) and body[position] == '"':
            position += 1
            chars: list[str] = []
            while position < len(body) and body[position] != '"':
                if body[position] == "\\":
                    position += 1
                if position >= len(body):
                    raise ValueError("unterminated quoted element")
                chars.append(body[position])
                position += 1
            if position >= len(body):
                raise ValueError("unterminated quoted element")
            position += 1
            items.append("".join(chars))
        else:
            end = body.find(",", position)
            end = len(body) if end == -1 else end
            word = body[position:end]
            if word == "" or any(c in word for c in '{}"\\'):
                raise ValueError("not an element of one dimension")
            items.append(None if word.upper() == "NULL" else word)
            position = end
        if position == len(body):
            return items
        if body[position] != ",":
            raise ValueError("elements not separated by commas")
        position += 1


def encode_array(element: int, text: str, encode: Callable[[int, str], bytes]) -> bytes:
    """array_send of the array ``text`` whose elements are of type ``element``, each
    encoded by ``encode(element, its text)``. Raise ValueError."""
    items = array_elements(text)
    if not items:
        return _EMPTY.pack(0, 0, element)
    has_nulls = any(item is None for item in items)
    parts = [_HEADER.pack(1, 1 if has_nulls else 0, element, len(items), 1)]
    for item in items:
        if item is None:
            parts.append(_LENGTH.pack(-1))
        else:
            data = encode(element, item)
            parts.append(_LENGTH.pack(len(data)) + data)
    return b"".join(parts)
