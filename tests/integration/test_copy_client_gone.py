"""A client that goes away in the middle of a COPY (query) TO STDOUT: as for the same query
sent alone (tests/integration/test_client_disconnect.py, whose server and helpers these
tests share): gone while the database runs the charged query, the charge stands and the
query is recorded as failed; gone before the charge, it is free and recorded as an error."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tests.integration.test_client_disconnect import (
    EPSILON,
    GONE_BEFORE_THE_CHARGE,
    STOPPED_WITHIN_MS,
    Setup,
    ask_and_vanish,
    assert_failed_and_charged,
    charged,
    connect,
    send_query,
    setup,  # noqa: F401 (the fixture: a server whose visits take seconds to read)
    spent,
    the_record,
    unique,
    vanish,
    wait_until,
)

pytestmark = pytest.mark.integration


def test_gone_while_the_database_runs_the_copy(setup: Setup) -> None:  # noqa: F811
    sql = unique("visits")
    before = spent(setup)
    conn = connect(setup.server)
    sock = send_query(conn, f"COPY ({sql}) TO STDOUT (FORMAT csv, HEADER)")
    wait_until(lambda: bool(charged(setup.location, sql)), "the charge")
    vanish(conn, sock, "eof")
    record = the_record(setup, sql)  # the query's record, as if sent alone
    assert_failed_and_charged(setup, sql, record)
    assert spent(setup) == before + EPSILON
    assert record["duration_ms"] < STOPPED_WITHIN_MS, record


def test_gone_before_the_charge_of_a_copy_costs_nothing(setup: Setup) -> None:  # noqa: F811
    sql = unique("patients")
    before = spent(setup)
    conn = connect(setup.server)
    ask_and_vanish(conn, f"COPY ({sql}) TO STDOUT")
    record = the_record(setup, sql)
    assert (record["decision"], record["reason"]) == ("error", GONE_BEFORE_THE_CHARGE)
    assert Decimal(record["epsilon"]) == 0
    assert charged(setup.location, sql) == []
    assert spent(setup) == before
