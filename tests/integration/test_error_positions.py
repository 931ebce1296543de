"""A syntax error in a Query of several statements names where it is in the Query's whole
text, as PostgreSQL does: the same line, and the same token PostgreSQL points at.

A real `dpproxy serve` (DuckDB) and the real PostgreSQL, each sent the same simple Query
by libpq (psycopg.pq). PostgreSQL gives the position as the ErrorResponse's P field (the
character where the token begins, counted from 1 in the whole text); dpproxy says "(line
L, column C)" in its message (sqlglot's: the column of the token's last character). Before,
dpproxy counted from the start of the statement: the second statement's error was on
"line 1", at a column of that statement alone.
"""

from __future__ import annotations

import re

import psycopg
import pytest
from psycopg import pq

from tests.integration.server import RunningServer

pytestmark = [pytest.mark.integration, pytest.mark.postgres]


@pytest.fixture(scope="module")
def server(duckdb_server: RunningServer) -> RunningServer:
    return duckdb_server  # the package's: these tests leave nothing the others could see


def syntax_error(dsn: str, sql: str) -> tuple[str, str | None]:
    """The message and the P field of the error that the simple Query ``sql`` gets."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        result = conn.pgconn.exec_(sql.encode())
        assert pq.ExecStatus(result.status) is pq.ExecStatus.FATAL_ERROR, sql
        fields = {
            name: result.error_field(code)
            for name, code in (
                ("code", pq.DiagnosticField.SQLSTATE),
                ("message", pq.DiagnosticField.MESSAGE_PRIMARY),
                ("position", pq.DiagnosticField.STATEMENT_POSITION),
            )
        }
    assert fields["code"] == b"42601", fields
    message = (fields["message"] or b"").decode()
    return message, fields["position"].decode() if fields["position"] else None


def position_in(text: str, line: int, column: int) -> int:
    """The index in ``text`` of (line, column), lines ending at \\r\\n, \\r or \\n."""
    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
    return starts[line - 1] + column - 1


NEAR = re.compile(r'^syntax error at or near "(?P<near>[^"]*)"')
WHERE = re.compile(r"\(line (?P<line>\d+), column (?P<column>\d+)\)")


@pytest.mark.parametrize(
    "sql",
    [
        # One statement: the whole text is the statement (as before).
        "SELECT COUNT(*) FORM patients",
        "SET dpproxy.epsilon = 0.5; SELECT COUNT(*) FORM patients",
        "SET dpproxy.epsilon = 0.5; SELECT COUNT(*) AS n FROM patients GROUP sex",
        "SET dpproxy.epsilon = 0.5;\nSELECT 1;\n  SELECT COUNT(*)\n  FORM patients",
        "\n\n  SELECT COUNT(*) FORM patients; SELECT 1",
        "SET dpproxy.epsilon = 0.5;\r\nSELECT COUNT(*) FROM patients GROUP sex",
        # Characters, not bytes, before the error.
        "SET application_name = 'é'; SELECT COUNT(*) FORM patients",
    ],
)
def test_a_syntax_error_is_where_postgresql_says(
    server: RunningServer, pg_dsn: str, sql: str
) -> None:
    message, position = syntax_error(server.dsn("alice"), sql)
    expected, pg_position = syntax_error(pg_dsn, sql)
    assert pg_position is not None
    near = NEAR.match(message)
    pg_near = NEAR.match(expected)
    assert near is not None and pg_near is not None, (message, expected)
    assert near["near"] == pg_near["near"]
    where = WHERE.search(message)
    assert where is not None, message
    # dpproxy's column is the token's last character, PostgreSQL's P its first: between
    # them, in the whole text, is the token they both name.
    end = position_in(sql, int(where["line"]), int(where["column"]))
    start = int(pg_position) - 1
    assert sql[start : end + 1] == near["near"], (sql, message, pg_position)
    # The line: as PostgreSQL's (the lines of the whole text up to its position).
    assert int(where["line"]) == len(re.findall(r"\r\n|\r|\n", sql[:start])) + 1
    assert position is None  # dpproxy gives no P field: its message says where
