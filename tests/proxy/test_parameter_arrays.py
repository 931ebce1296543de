"""Array parameters (proxy.parameter_arrays): psycopg 3 sends a Python list for
``x = ANY(%s)`` as an int4[], float8[], text[], date[] … parameter, in text or binary; it is
bound as CAST('{…}' AS type[]), PostgreSQL's array text, whichever format it came in. The
binary format is the one PostgreSQL's array_send writes (psycopg's own dumpers make it
here), and what dpproxy does not read is refused with PostgreSQL's SQLSTATE."""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal

import psycopg
import pytest
from psycopg.adapt import PyFormat

from proxy import parameters
from proxy.parameter_arrays import MAX_ELEMENTS, array_literal
from proxy.protocol import values
from proxy.protocol.values import ValueFormatError
from proxy.seam import QueryError

SQL = "SELECT COUNT(*) FROM visits WHERE x = ANY($1)"


def _dumped(value: list[object], binary: bool) -> tuple[int, bytes]:
    """The OID and bytes psycopg sends for ``value``, as a parameter."""
    transformer = psycopg.adapt.Transformer()
    dumper = transformer.get_dumper(value, PyFormat.BINARY if binary else PyFormat.TEXT)
    data = dumper.dump(value)
    if data is None:
        raise AssertionError("psycopg dumped no data")
    return dumper.oid, bytes(data)


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ([1, 2, 3], "CAST('{1,2,3}' AS SMALLINT[])"),
        ([1, 200000], "CAST('{1,200000}' AS INT[])"),
        ([1, 2**40], "CAST('{1,1099511627776}' AS BIGINT[])"),
        ([1.5, -2.25], "CAST('{1.5,-2.25}' AS DOUBLE PRECISION[])"),
        ([Decimal("1.50"), Decimal("-3")], "CAST('{1.50,-3}' AS DECIMAL[])"),
        ([True, False], "CAST('{t,f}' AS BOOLEAN[])"),
        ([dt.date(2024, 1, 2), None], "CAST('{2024-01-02,NULL}' AS DATE[])"),
    ],
)
def test_lists_bind_as_postgresql_s_array_text(
    value: list[object], expected: str, binary: bool
) -> None:
    oid, data = _dumped(value, binary)
    statement = parameters.prepare(SQL, [oid])
    bound = parameters.bind(statement, [1 if binary else 0], [data])
    assert bound == f"SELECT COUNT(*) FROM visits WHERE x = ANY({expected})"


def test_texts_are_quoted_as_array_out_quotes_them() -> None:
    texts = ["A", 'say "hi"', "back\\slash", "a,b", "{x}", "NULL", " ", "é"]
    oid, data = _dumped(texts, binary=True)
    literal = array_literal(oid, data, values.BINARY_FORMAT)
    text = literal.this.name
    assert text == ('{"A","say \\"hi\\"","back\\\\slash","a,b","{x}","NULL"," ","é"}')
    with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres") as conn:
        read = conn.execute("SELECT %s::text[]", (text,)).fetchone()
    assert read is not None and read[0] == texts


def test_an_empty_list_is_an_empty_array() -> None:
    """psycopg sends an empty list in text untyped ('{}': text, read by any_arrays as an
    empty array), in binary as an array of no dimension."""
    for binary in (False, True):
        oid, data = _dumped([], binary)
        statement = parameters.prepare(SQL, [oid])
        bound = parameters.bind(statement, [1 if binary else 0], [data])
        assert "ANY('{}')" in bound or "ANY(CAST('{}' AS " in bound, bound


def _binary(dimensions: int, element: int, items: list[bytes | None]) -> bytes:
    head = struct.pack("!iiI", dimensions, int(None in items), element)
    if dimensions:
        head += struct.pack("!ii", len(items), 1) * dimensions
    body = b"".join(
        struct.pack("!i", -1) if i is None else struct.pack("!i", len(i)) + i for i in items
    )
    return head + body


@pytest.mark.parametrize(
    ("data", "sqlstate", "words"),
    [
        (_binary(2, values.INT4, [struct.pack("!i", 1)]), "0A000", "one dimension"),
        (_binary(1, values.INT8, [struct.pack("!q", 1)]), "22P03", "wrong element type"),
        (_binary(1, values.INT4, [struct.pack("!i", 1)])[:-1], "22P03", "incorrect binary"),
        (_binary(1, values.INT4, [struct.pack("!i", 1)]) + b"x", "22P03", "incorrect binary"),
        (_binary(1, values.INT4, [b"\x00\x01"]), "22P03", ""),
    ],
)
def test_malformed_binary_arrays_are_refused(data: bytes, sqlstate: str, words: str) -> None:
    with pytest.raises(ValueFormatError) as refused:
        array_literal(1007, data, values.BINARY_FORMAT)
    assert refused.value.sqlstate == sqlstate and words in refused.value.message


def test_too_many_elements_are_refused_before_planning() -> None:
    oid, data = _dumped(list(range(MAX_ELEMENTS + 1)), binary=True)
    statement = parameters.prepare(SQL, [oid])
    with pytest.raises(QueryError) as refused:
        parameters.bind(statement, [1], [data])
    assert refused.value.sqlstate == "54000" and "1001 elements" in refused.value.message
    oid, data = _dumped(list(range(MAX_ELEMENTS)), binary=True)
    assert "999}" in parameters.bind(statement, [1], [data])


def test_a_statement_described_before_bind_compares_with_an_empty_array() -> None:
    statement = parameters.prepare(SQL, [1007])
    assert parameters.describe_sql(statement) == (
        "SELECT COUNT(*) FROM visits WHERE x = ANY(CAST('{}' AS INT[]))"
    )
