"""A catalog query lost with an engine killed for another query's sake is sent again,
once, to the new engine; the query that had the engine killed is not.

Before, when one analyst's catalog query would not stop (a function call DuckDB cannot
interrupt) and its engine was killed, every other catalog query running on that engine
failed too (53000), though it had done nothing wrong. Catalog queries read nothing and
cost nothing: they are now sent again, and only the query at fault fails.

A real engine process, stopped (SIGSTOP) so that no query ends on it by itself, as under
a call that cannot be interrupted; the query at fault is cancelled, and the engine is
killed 2 s later (KILL_GRACE_SECONDS).
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from proxy.catalog import engine_client
from proxy.catalog.database import (
    CatalogDatabase,
    CatalogEngineLost,
    CatalogQueryCanceled,
    CatalogQueryTimedOut,
    QueryStop,
)
from tests.proxy.test_catalog_engine import SLOW, Running, _catalog

#: Setup waits (not measurements): long enough for a query to reach the engine.
SETTLE_SECONDS = 0.3


def test_the_other_queries_are_answered_by_the_next_engine() -> None:
    database = CatalogDatabase(_catalog())
    try:
        engine = database.engine_pid
        os.kill(engine, signal.SIGSTOP)
        at_fault = QueryStop()
        culprit = Running(database, "SELECT 1 AS c", at_fault)
        others = [Running(database, f"SELECT {n} AS n", QueryStop()) for n in (2, 3)]
        time.sleep(SETTLE_SECONDS)
        at_fault.cancel()  # the engine is killed 2 s later, for this query
        for query in (culprit, *others):
            query.join()
        assert isinstance(culprit.error, CatalogQueryCanceled), culprit.error
        # Before: both failed with CatalogEngineLost ("did not stop when interrupted").
        assert [query.error for query in others] == [None, None]
        assert [query.output.rows for query in others if query.output] == [[(2,)], [(3,)]]
        assert database.engine_pid != engine
    finally:
        database.close()


def test_a_query_lost_twice_fails_and_is_not_sent_a_third_time() -> None:
    database = CatalogDatabase(_catalog())
    try:
        first = database.engine_pid
        os.kill(first, signal.SIGSTOP)
        at_fault = QueryStop()
        culprit = Running(database, "SELECT 1 AS c", at_fault)
        victim = Running(database, SLOW, QueryStop())  # runs for minutes, once it can
        time.sleep(SETTLE_SECONDS)
        at_fault.cancel()
        culprit.join()
        # The victim is sent to the second engine as soon as it is ready, as is this.
        assert database.run_blocking("SELECT 0 AS ready").rows == [(0,)]
        second = database.engine_pid
        time.sleep(SETTLE_SECONDS)
        os.kill(second, signal.SIGSTOP)
        at_fault = QueryStop()
        culprit = Running(database, "SELECT 1 AS c", at_fault)
        time.sleep(SETTLE_SECONDS)
        at_fault.cancel()
        victim.join()
        culprit.join()
        assert isinstance(victim.error, CatalogEngineLost), victim.error
        assert "did not stop when interrupted" in str(victim.error)
        assert database.engine_pid == second  # no third engine was started for it
        assert database.run_blocking("SELECT 42").rows == [(42,)]
        assert database.engine_pid not in (first, second)
    finally:
        database.close()


def test_a_query_that_had_run_past_its_time_is_not_sent_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Killed for another query, a query that had itself run past the timeout (it did not
    stop either) fails as timed out; one that had not is sent again. Before, both were
    sent again: a reviewer's two staggered levenshtein() calls killed two engines, and
    the second waited 13 s. The timeout is 2 s here (5 s in the server): the engine is
    killed 2 + 2 s after the first query was sent."""
    monkeypatch.setattr(engine_client, "TIMEOUT_SECONDS", 2.0)
    database = CatalogDatabase(_catalog())
    try:
        engine = database.engine_pid
        os.kill(engine, signal.SIGSTOP)  # nothing stops on it, as under levenshtein()
        first = Running(database, "SELECT 1 AS c", QueryStop())  # killed for at 4 s
        time.sleep(0.5)
        stuck = Running(database, "SELECT 2 AS c", QueryStop())  # 3.5 s old by then
        time.sleep(2.5)
        fresh = Running(database, "SELECT 3 AS c", QueryStop())  # 1 s old by then
        for query in (first, stuck, fresh):
            query.join()
        assert isinstance(first.error, CatalogQueryTimedOut), first.error
        assert isinstance(stuck.error, CatalogQueryTimedOut), stuck.error
        assert fresh.error is None and fresh.output is not None, fresh.error
        assert fresh.output.rows == [(3,)]
        assert database.engine_pid != engine
    finally:
        database.close()
