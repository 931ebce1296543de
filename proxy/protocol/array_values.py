"""Arrays of one dimension in a result, sent in binary (array_send): the arrays of the
types whose values proxy.protocol.values sends in binary, which asyncpg asks for in
binary (its type lookup's text[] and oid[]; SQLAlchemy's reflection reads pg_index.indkey,
int2[] here). No I/O: PostgreSQL's array text in, bytes out."""

from __future__ import annotations

import struct
from collections.abc import Callable

#: The array types sent in binary, by OID (pg_type.typarray), and their element types.
BINARY_ARRAY_ELEMENTS: dict[int, int] = {
    1000: 16,  # bool
    1001: 17,  # bytea
    1002: 18,  # "char"
    1003: 19,  # name
    1005: 21,  # int2
    1007: 23,  # int4
    1009: 25,  # text
    1014: 1042,  # bpchar
    1015: 1043,  # varchar
    1016: 20,  # int8
    1021: 700,  # float4
    1022: 701,  # float8
    1028: 26,  # oid
    1115: 1114,  # timestamp
    1182: 1082,  # date
    1183: 1083,  # time
    1185: 1184,  # timestamptz
    1187: 1186,  # interval
    1231: 1700,  # numeric
    1270: 1266,  # timetz
    199: 114,  # json
    2951: 2950,  # uuid
    3807: 3802,  # jsonb
}
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
