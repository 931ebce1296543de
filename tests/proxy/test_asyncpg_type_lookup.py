"""The pieces of asyncpg's type lookup (asyncpg/introspection.py) that dpproxy reads:
``$1::oid[]`` (sqlglot cannot read ``oid[]``), the oid[] parameter bound from binary, and
text[] and oid[] result columns sent in binary as PostgreSQL sends them (asyncpg asks
for every column of the lookup's answer in binary)."""

from __future__ import annotations

import struct

import psycopg
import pytest
import sqlglot

from proxy import parameters
from proxy.catalog.oid_arrays import respell_oid_arrays
from proxy.catalog.pgtypes import result_type
from proxy.protocol.array_values import array_elements
from proxy.protocol.values import BINARY_RESULT_TYPES, encode_binary
from proxy.seam import QueryError

introspection = pytest.importorskip("asyncpg.introspection")


@pytest.mark.parametrize(
    ("sql", "respelt"),
    [
        ("SELECT 1 WHERE x = any($1::oid[])", "SELECT 1 WHERE x = any($1::pg_catalog.oid[])"),
        ("SELECT CAST(y AS OID [ ])", "SELECT CAST(y AS pg_catalog.oid [ ])"),
        ("SELECT x::regtype[]", "SELECT x::pg_catalog.regtype[]"),
        ("SELECT x::pg_catalog.oid[]", "SELECT x::pg_catalog.oid[]"),  # already
        ("SELECT t.oid[1], oid[2] FROM t", "SELECT t.oid[1], oid[2] FROM t"),  # subscripts
        ("SELECT 'oid[]', x::int[]", "SELECT 'oid[]', x::int[]"),  # a string, another type
    ],
)
def test_oid_arrays_are_respelt(sql: str, respelt: str) -> None:
    assert respell_oid_arrays(sql) == respelt
    sqlglot.parse_one(respelt, read="postgres")  # which sqlglot reads


def test_the_lookup_takes_an_oid_array_bound_from_binary() -> None:
    statement = parameters.prepare(introspection.INTRO_LOOKUP_TYPES, [])
    assert statement.parameter_types == (1028,)  # oid[]: was 42601, not read at all
    sent = struct.pack("!iiIii", 1, 0, 26, 2, 1) + struct.pack("!iIiI", 4, 1007, 4, 1016)
    bound = parameters.bind(statement, [1], [sent])
    assert "ti.oid = ANY(CAST('{1007,1016}' AS pg_catalog.oid[]))" in bound
    wrong = struct.pack("!iiIii", 1, 0, 23, 1, 1) + struct.pack("!ii", 4, 1007)
    with pytest.raises(QueryError, match="wrong element type"):
        parameters.bind(statement, [1], [wrong])  # an int4[] is not an oid[]


def test_the_catalogs_oid_lists_are_oid_arrays() -> None:
    assert result_type("BIGINT[]") == (1028, -1)  # was int8[], which asyncpg looks up again
    assert result_type("VARCHAR[]") == (1009, -1)
    assert {1009, 1028} <= BINARY_RESULT_TYPES


ARRAYS = [
    ("text[]", 1009, '{a,"b c",NULL,"","NULL","x\\"y","back\\\\slash",é}'),
    ("text[]", 1009, "{}"),
    ("oid[]", 1028, "{23,NULL,4294967295}"),
    ("oid[]", 1028, "{0}"),
]


@pytest.mark.parametrize(("name", "oid", "text"), ARRAYS)
def test_arrays_are_sent_in_binary_as_postgresql_sends_them(
    pg_dsn: str, name: str, oid: int, text: str
) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        shown = conn.execute(f"SELECT %s::{name}::text", [text]).fetchone()
        sent = conn.pgconn.exec_params(
            f"SELECT $1::{name}".encode(), [text.encode()], result_format=1
        )
        assert sent.status == psycopg.pq.ExecStatus.TUPLES_OK, sent.error_message
        theirs = sent.get_value(0, 0)
    assert shown is not None
    assert encode_binary(oid, shown[0]) == theirs  # from PostgreSQL's own text of it


@pytest.mark.parametrize("text", ["", "{", "{{1}}", "{a,{b}}", '{"a}', "{a,,b}", "[1:1]={1}"])
def test_other_array_texts_are_not_read(text: str) -> None:
    with pytest.raises(ValueError):
        array_elements(text)
