"""Array parameters: a Python list that psycopg 3 sends for ``x = ANY(%s)`` (its documented
way to pass a list) arrives as a parameter of an array type, int4[] for ints, float8[] for
floats, text[] for strings, in binary or text. It is bound as ``CAST('{…}' AS type[])``,
the array's text as PostgreSQL writes it, which ``rewriter.passes.any_arrays`` reads as
PostgreSQL's array input does (and refuses what it does not read); the engines never see
an array.

No I/O here: bytes in, a syntax-tree literal out. Arrays of one dimension (or none: an
empty one) of numbers, booleans, texts, dates and timestamps, at most ``MAX_ELEMENTS``
elements (each is one comparison in the query).
"""

from __future__ import annotations

import datetime as dt
import math
import struct
from decimal import Decimal

from sqlglot import exp

from proxy.protocol import values
from proxy.protocol.values import ValueFormatError, decode_parameter

#: The array types accepted, by OID, and their element types.
ARRAY_ELEMENTS: dict[int, int] = {
    1000: values.BOOL,
    1005: values.INT2,
    1007: values.INT4,
    1016: values.INT8,
    1021: values.FLOAT4,
    1022: values.FLOAT8,
    1231: values.NUMERIC,
    1009: values.TEXT,
    1015: values.VARCHAR,
    1182: values.DATE,
    1115: values.TIMESTAMP,
    1028: values.OID,  # asyncpg's type lookup: ti.oid = any($1::oid[]) (a catalog query)
}
#: The array type of each element type (pg_type.typarray): ``$1`` of ``x = ANY($1)``
#: takes the array type of ``x``'s (``proxy.parameter_types``), and ``$1::int[]`` int[].
ARRAY_OF: dict[int, int] = {element: array for array, element in ARRAY_ELEMENTS.items()}
#: Their element types as SQL writes them in the cast.
_ELEMENT_SQL = {
    values.BOOL: "BOOLEAN",
    values.INT2: "SMALLINT",
    values.INT4: "INT",
    values.INT8: "BIGINT",
    values.FLOAT4: "REAL",
    values.FLOAT8: "DOUBLE PRECISION",
    values.NUMERIC: "NUMERIC",
    values.TEXT: "TEXT",
    values.VARCHAR: "VARCHAR",
    values.DATE: "DATE",
    values.TIMESTAMP: "TIMESTAMP",
}
#: oid[], which sqlglot reads only so (proxy.catalog.oid_arrays): pg_catalog.oid[].
OID_ARRAY_TYPE = exp.DataType(
    this=exp.DataType.Type.ARRAY,
    expressions=[
        exp.DataType(
            this=exp.DataType.Type.USERDEFINED,
            kind=exp.Dot(this=exp.to_identifier("pg_catalog"), expression=exp.to_identifier("oid")),
        )
    ],
    nested=True,
)
OID_ARRAY_SQL = OID_ARRAY_TYPE.sql(dialect="postgres")
MAX_ELEMENTS = 1000
_INT32 = struct.Struct("!i")
_HEADER = struct.Struct("!iiI")  # dimensions, has NULLs, element type
_DIMENSION = struct.Struct("!ii")  # length, lower bound
_UNSUPPORTED = "0A000"
_INVALID_BINARY = "22P03"  # PostgreSQL's invalid_binary_representation


def array_literal(oid: int, data: bytes, fmt: int) -> exp.Expr:
    """``CAST('{…}' AS element[])`` for an array parameter of type ``oid`` (one of
    ARRAY_ELEMENTS), sent as ``data`` in format ``fmt``. Raise ValueFormatError."""
    element = ARRAY_ELEMENTS[oid]
    if fmt == values.TEXT_FORMAT:
        text = decode_parameter(values.TEXT, data, values.TEXT_FORMAT)
        if not isinstance(text, str):
            raise ValueFormatError(_INVALID_BINARY, "an array's text is not text")
        _check_size(text.count(",") + 1 if text.strip() not in ("{}", "") else 0)
    elif fmt == values.BINARY_FORMAT:
        text = _text_of_binary(element, data)
    else:
        raise ValueFormatError("08P01", f"unsupported format code: {fmt}")
    if element == values.OID:
        kind = OID_ARRAY_TYPE.copy()
    else:
        kind = exp.DataType.build(f"{_ELEMENT_SQL[element]}[]", dialect="postgres")
    return exp.Cast(this=exp.Literal.string(text), to=kind)


def empty_array(oid: int) -> exp.Expr:
    """An empty array of type ``oid``: an array parameter's stand-in before its value is
    known (``x = ANY('{}')`` is false, and changes no output column)."""
    return array_literal(oid, b"{}", values.TEXT_FORMAT)


def within_cast(literal: exp.Expr, parent: exp.Expr | None) -> exp.Expr:
    """An array parameter's literal where the statement casts the parameter to its own
    type (``$1::int[]``, which gave it type int[]): the quoted text alone, which that cast
    reads (``CAST('{1,2}' AS INT[])``, once), as the cast's own value would be. Any other
    literal or place: ``literal``."""
    if (
        isinstance(literal, exp.Cast)
        and isinstance(parent, exp.Cast)
        and literal.to.is_type(exp.DataType.Type.ARRAY)
        and literal.to.sql(dialect="postgres") == parent.to.sql(dialect="postgres")
    ):
        text: exp.Expr = literal.this
        return text
    return literal


def _check_size(elements: int) -> None:
    if elements > MAX_ELEMENTS:
        raise ValueFormatError(
            "54000",
            f"an array parameter of {elements} elements is more than dpproxy compares with "
            f"({MAX_ELEMENTS}: each element is one comparison)",
        )


def _text_of_binary(element: int, data: bytes) -> str:
    """PostgreSQL's binary array format (array_send) as PostgreSQL's array text."""
    try:
        dimensions, _, sent_type = _HEADER.unpack_from(data, 0)
        position = _HEADER.size
        if dimensions == 0:
            return "{}"
        if dimensions != 1:
            raise ValueFormatError(
                _UNSUPPORTED,
                f"dpproxy compares with arrays of one dimension, not {dimensions}",
            )
        if sent_type != element:
            raise ValueFormatError(
                _INVALID_BINARY,
                f"wrong element type in the array: {values.type_name(sent_type)}, where the "
                f"parameter's type says {values.type_name(element)}",
            )
        length, _ = _DIMENSION.unpack_from(data, position)
        position += _DIMENSION.size
        _check_size(length)
        items: list[str] = []
        for _ in range(length):
            (size,) = _INT32.unpack_from(data, position)
            position += _INT32.size
            if size == -1:
                items.append("NULL")
                continue
            if size < 0 or position + size > len(data):
                raise struct.error("element beyond the data")
            value = decode_parameter(element, data[position : position + size], 1)
            position += size
            items.append(_element_text(value))
        if position != len(data):
            raise struct.error("data after the last element")
    except struct.error:
        raise ValueFormatError(
            _INVALID_BINARY, "incorrect binary data format in an array parameter"
        ) from None
    return "{" + ",".join(items) + "}"


def _element_text(value: values.Value) -> str:
    """One element as array_out writes it, always quoted where it holds text."""
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return repr(value)
    if isinstance(value, Decimal):
        return format(value, "f") if value.is_finite() else str(value)
    if isinstance(value, dt.datetime):
        return _quoted(value.isoformat(sep=" "))
    if isinstance(value, dt.date):
        return value.isoformat()
    return _quoted(str(value))


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
