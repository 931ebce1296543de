"""A Query of up to a megabyte of semicolons or comments neither stalls other sessions nor
takes seconds of the server's event loop.

Reading such a text takes seconds (about 3 µs a lexeme: a megabyte of ";" is a million
of them). A reviewer measured, before: another client's `SHOW dpproxy.epsilon` waited
3.0 s behind one analyst's Query of a megabyte of ";", and 1.3 s behind 250,000 "/**/"
(the comments of a statement were read before its length was checked). Now a long Query
is split on a thread of its own, and a statement longer than the rewriter's limit is
refused without reading its comments. No timings are asserted: the other session's answer
comes first, which it could not while the event loop was held.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from rewriter.parse import MAX_SQL_LENGTH
from tests.integration.server import RunningServer

pytestmark = pytest.mark.integration

#: A megabyte's worth of statements that are empty (PostgreSQL answers EmptyQueryResponse).
SEMICOLONS = ";" * 1_000_000
#: Setup wait (not a measurement): long enough for a megabyte to reach the server.
SETTLE_SECONDS = 0.3


@pytest.fixture(scope="module")
def server(duckdb_server: RunningServer) -> RunningServer:
    return duckdb_server  # the package's: these tests leave nothing the others could see


def connect(server: RunningServer) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(server.dsn("alice"), autocommit=True, connect_timeout=10)


def test_a_megabyte_of_semicolons_does_not_hold_up_another_session(server: RunningServer) -> None:
    order: list[str] = []
    with connect(server) as other, connect(server) as heavy:
        other.execute("SELECT 1").fetchall()  # logged in and warm
        started = threading.Event()

        def send_heavy() -> None:
            started.set()
            heavy.execute(SEMICOLONS)  # only empty statements: no rows, no error
            order.append("heavy")

        thread = threading.Thread(target=send_heavy)
        thread.start()
        started.wait()
        time.sleep(SETTLE_SECONDS)  # the heavy Query reaches the server
        # The heavy Query is being read; the other session asks meanwhile.
        assert other.execute("SHOW dpproxy.epsilon").fetchall() == [("1",)]
        order.append("other")
        thread.join(timeout=60)
    assert order == ["other", "heavy"]


def test_a_statement_of_a_megabyte_of_comments_is_refused_by_its_length(
    server: RunningServer,
) -> None:
    with connect(server) as conn:
        before = conn.execute("SHOW dpproxy.budget").fetchall()
        with pytest.raises(psycopg.errors.ProgramLimitExceeded, match=str(MAX_SQL_LENGTH)):
            conn.execute("SELECT COUNT(*) FROM patients " + "/**/" * 250_000)
        assert conn.execute("SHOW dpproxy.budget").fetchall() == before  # free
        # A short statement with the same trailing semicolons is answered.
        assert conn.execute("SELECT 1" + ";" * 50_000).fetchall() == [(1,)]
