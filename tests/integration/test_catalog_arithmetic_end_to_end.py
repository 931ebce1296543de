"""Arithmetic in catalog queries through the real server, with psql and psycopg: values,
types (text and binary) and errors as the real PostgreSQL 15 sends them, and the session
going on after each error."""

from __future__ import annotations

import psycopg
import pytest
from psycopg.pq import ExecStatus

from tests.integration.server import Connection, RunningServer

pytestmark = pytest.mark.integration

ZERO = psycopg.errors.DivisionByZero
RANGE = psycopg.errors.NumericValueOutOfRange
VALUES = (
    "SELECT 7/2, -7/2, 7.0/2, 1.0/3, 2147483647/2, 9223372036854775807/2, 7::int2/2::int2, "
    "7.5::float4/2, 7::float8/2, 5 % 3, -7 % 3, 2^10, 2.0^10, div(7, 2), round(2.5::float8), "
    "round(2.5, 3), 1e5, 9223372036854775808 / 2"
)
ERRORS = [
    ("SELECT 1/0", ZERO, "division by zero"),
    ("SELECT 1.0/0", ZERO, "division by zero"),
    ("SELECT 1.0::float8/0", ZERO, "division by zero"),
    ("SELECT 5 % 0", ZERO, "division by zero"),
    ("SELECT 2147483647 + 1", RANGE, "integer out of range"),
    ("SELECT 9223372036854775807 + 1", RANGE, "bigint out of range"),
    ("SELECT 40000::smallint", RANGE, "smallint out of range"),
    ("SELECT 2147483648::int", RANGE, "integer out of range"),
    ("SELECT 1e308::float8 * 10", RANGE, "value out of range: overflow"),
    ("SELECT 12345.678::numeric(5,2)", RANGE, "numeric field overflow"),
    ("SELECT 'abc'::int", psycopg.errors.InvalidTextRepresentation,
     'invalid input syntax for type integer: "abc"'),
    ("SELECT typlen / 0 FROM pg_type WHERE typname = 'int8'", ZERO,
     "division by zero"),
]  # fmt: skip


@pytest.fixture(scope="module")
def server(duckdb_server: RunningServer) -> RunningServer:
    # Catalog queries never reach the database: one backend is enough, the shared server.
    return duckdb_server


def sent(conn: Connection, sql: str, result_format: int) -> list[tuple[int, bytes | None]]:
    """(type OID, bytes) of each column of the first row, as the server sends them."""
    result = conn.pgconn.exec_params(sql.encode(), [], result_format=result_format)
    assert result.status == ExecStatus.TUPLES_OK, result.error_message
    return [(result.ftype(i), result.get_value(0, i)) for i in range(result.nfields)]


def test_values_are_sent_as_postgresql_sends_them(proxy: Connection, postgres: Connection) -> None:
    for result_format in (0, 1):  # text, binary
        assert sent(proxy, VALUES, result_format) == sent(postgres, VALUES, result_format)


@pytest.mark.parametrize(("sql", "error", "message"), ERRORS)
def test_errors_are_postgresqls(
    proxy: Connection, postgres: Connection, sql: str, error: type[Exception], message: str
) -> None:
    for conn in (proxy, postgres):
        with pytest.raises(error) as raised:
            conn.execute(sql)
        assert isinstance(raised.value, psycopg.Error)
        assert raised.value.diag.message_primary == message
    assert proxy.execute("SELECT 7/2").fetchone() == (3,)  # the session goes on


def test_psql(server: RunningServer) -> None:
    answered = server.psql("alice", "SELECT 7/2 AS half, 7.0/2 AS exact, -7/2 AS toward_zero")
    assert answered.returncode == 0, answered.stderr
    assert "    3 | 3.5000000000000000 |          -3" in answered.stdout
    failed = server.psql("alice", "SELECT 1/0")
    assert failed.returncode != 0
    assert "ERROR:  division by zero" in failed.stderr
    overflow = server.psql("alice", "SELECT 2147483647 + 1")
    assert "ERROR:  integer out of range" in overflow.stderr
