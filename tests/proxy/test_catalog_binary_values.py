"""Binary results of json, jsonb, bytea and arrays (asyncpg asks for every column in
binary: SQLAlchemy's reflection reads pg_index.indkey, an int2[] here), compared with the
bytes a real PostgreSQL 15 sends for the same value. Before, each was refused (0A000)
when asked for in binary without a Describe."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg.pq import ExecStatus

from proxy.catalog.text import pg_text
from proxy.protocol import values
from proxy.protocol.array_values import BINARY_ARRAY_ELEMENTS

JSON, JSONB, BYTEA = 114, 3802, 17

#: Expressions whose value PostgreSQL sends in binary; dpproxy encodes its text.
EXPRESSIONS = [
    "'{}'::json",
    """'{"a": [1, 2.5], "b": "é"}'::json""",
    """'{"a": [1, 2.5]}'::jsonb""",
    "'[]'::jsonb",
    "'\\x00ff10'::bytea",
    "''::bytea",
    "'a\\001\\\\'::bytea",
    "ARRAY[1, 2]::int2[]",
    "'{}'::int2[]",
    "ARRAY[1, NULL, -3]::int4[]",
    "ARRAY[9223372036854775807]::int8[]",
    "ARRAY[1, 4294967295]::oid[]",
    """ARRAY['a', 'b c', NULL, '"q"', 'NULL', '', '{a}', 'b,c', 'x\\y']::text[]""",
    "ARRAY['pg_class']::name[]",
    "ARRAY[1.5, 'NaN', 'Infinity', '-Infinity', 1e300]::float8[]",
    "ARRAY[1.5]::float4[]",
    "ARRAY[true, false, NULL]::bool[]",
    "ARRAY['x']::varchar[]",
    "ARRAY['ab']::char(3)[]",
    """ARRAY['a']::"char"[]""",
    "ARRAY[1.25, -3, 'NaN']::numeric[]",
    "ARRAY['2024-01-02']::date[]",
    "ARRAY['2024-01-02 03:04:05.5']::timestamp[]",
    "ARRAY['2024-01-02 03:04:05+00']::timestamptz[]",
    "ARRAY['12:00:00']::time[]",
    "ARRAY['12:00:00+05:30']::timetz[]",
    "ARRAY['1 day 02:00:00']::interval[]",
    "ARRAY['a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11']::uuid[]",
    "ARRAY['{}']::json[]",
    "ARRAY['[1]']::jsonb[]",
    "ARRAY['\\x01']::bytea[]",
]


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        conn.execute("SET IntervalStyle = 'postgres'")
        yield conn


def _answer(conn: psycopg.Connection[tuple[object, ...]], sql: str, fmt: int) -> tuple[int, bytes]:
    result = conn.pgconn.exec_params(sql.encode(), [], result_format=fmt)
    assert result.status == ExecStatus.TUPLES_OK, result.error_message
    data = result.get_value(0, 0)
    assert data is not None
    return result.ftype(0), data


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_sent_as_postgresql_sends_them(
    postgres: psycopg.Connection[tuple[object, ...]], expression: str
) -> None:
    oid, binary = _answer(postgres, f"SELECT {expression}", 1)
    _, text = _answer(postgres, f"SELECT {expression}", 0)
    assert oid in values.BINARY_RESULT_TYPES
    assert values.encode_binary(oid, text.decode()) == binary


def test_every_array_of_a_type_sent_in_binary_is_sent_in_binary() -> None:
    # asyncpg's reflection reads int2[] (indkey), its type lookup text[] and oid[].
    assert {1005, 1007, 1016, 1009, 1028, 1003, 1000, 1022} <= values.BINARY_RESULT_TYPES
    for array, element in BINARY_ARRAY_ELEMENTS.items():
        assert element in values.BINARY_RESULT_TYPES, array
    assert {JSON, JSONB, BYTEA} <= values.BINARY_RESULT_TYPES


def test_bytea_from_the_catalog_s_text() -> None:
    # The catalog writes a bytea in hex (pg_text); the escape format is read too.
    assert values.encode_binary(BYTEA, pg_text(b"\x00\x01\xff") or "") == b"\x00\x01\xff"
    assert values.encode_binary(BYTEA, "a\\000\\\\b") == b"a\x00\\b"
    assert values.encode_binary(JSONB, '{"a": 1}') == b'\x01{"a": 1}'
    for malformed in ("\\xZZ", "\\x0", "a\\9", "a\\"):
        with pytest.raises(values.ValueFormatError):
            values.encode_binary(BYTEA, malformed)


def test_an_array_of_several_dimensions_is_refused_cleanly() -> None:
    with pytest.raises(values.ValueFormatError) as raised:
        values.encode_binary(1005, "{{1,2},{3,4}}")
    assert raised.value.sqlstate == values.INVALID_TEXT_REPRESENTATION
