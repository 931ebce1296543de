"""Portals end with their transaction: at Sync outside a transaction block, at COMMIT
inside one (needs proxy/server.py to call ExtendedQueries.sync at ReadyForQuery)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.server import RunningServer
from tests.integration.test_binary_formats import (
    SYNC,
    Client,
    bind,
    describe,
    execute,
    fields,
    parse,
    query,
)

pytestmark = pytest.mark.integration

PATIENTS = 500
DIRECTORY_PREFIX = "sync-"
COUNT = "SELECT COUNT(*) FROM visits"


@pytest.fixture
def client(server: RunningServer) -> Iterator[Client]:
    connected = Client(server)
    yield connected
    connected.close()


def test_portals_end_at_sync_outside_a_transaction_block(client: Client) -> None:
    assert [k for k, _ in client.exchange(parse(COUNT, "st") + bind("st", portal="p1") + SYNC)] == [
        b"1", b"2", b"Z",
    ]  # fmt: skip
    # As PostgreSQL: p1 ended with the implicit transaction, so its name is free again.
    assert [k for k, _ in client.exchange(bind("st", portal="p1") + SYNC)] == [b"2", b"Z"]
    answer = client.exchange(execute("p1") + SYNC)
    assert fields(answer[0][1])["C"] == "34000"


def test_portals_outlive_sync_in_a_transaction_block(client: Client) -> None:
    assert client.exchange(query("BEGIN"))[-1] == (b"Z", b"T")
    client.exchange(parse(COUNT, "st") + bind("st", portal="p1") + SYNC)
    answer = client.exchange(execute("p1") + SYNC)
    assert [k for k, _ in answer] == [b"D", b"C", b"Z"]
    assert client.exchange(query("COMMIT"))[-1] == (b"Z", b"I")
    answer = client.exchange(execute("p1") + SYNC)
    assert fields(answer[0][1])["C"] == "34000"


def test_a_protocol_error_in_a_transaction_block_fails_the_block(client: Client) -> None:
    """Errors of the extended protocol itself (here: columns changed since Describe) fail
    the transaction block as any error does in PostgreSQL: ReadyForQuery says E, and a
    finished portal cannot be run again until ROLLBACK (review: it said T, and SELECT 0)."""
    assert client.exchange(query("BEGIN"))[-1] == (b"Z", b"T")
    client.exchange(parse(COUNT, "st") + bind("st", portal="done") + execute("done") + SYNC)
    client.exchange(parse(COUNT, "q") + bind("q", portal="pp") + describe(b"P", "pp") + SYNC)
    assert client.exchange(query("SET dpproxy.report = columns"))[-1] == (b"Z", b"T")
    answer = client.exchange(execute("pp") + SYNC)
    assert fields(answer[0][1])["C"] == "0A000"
    assert answer[-1] == (b"Z", b"E")
    answer = client.exchange(execute("done") + SYNC)
    assert fields(answer[0][1])["C"] == "25P02"
    assert client.exchange(query("ROLLBACK"))[-1] == (b"Z", b"I")
