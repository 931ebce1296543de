"""A DP statement stopped by a cancel request or the statement timeout before it reaches
the pipeline is audited, as every attempt is (DESIGN.md).

Before, a statement stopped while the catalog responder classified it (waiting for the
analyst's translating thread, or translating), or at Describe (extended protocol) while
it was planned, left no audit record: only a stop inside the pipeline (just before the
charge) was recorded. Now each such stop is recorded once, as the pipeline records its
own: decision error, "canceled due to <reason> before the charge", nothing charged. A
statement stopped while it was classified may have been a catalog query: it is recorded
all the same (harmless); a catalog query stopped while it ran is not (it is known to be
one, and catalog queries leave no record). Real components: DuckDB, the state store, the
catalog responder and the workers' threads; a job that holds the analyst's turn on a
worker stands for another statement of the same analyst that takes long.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

import pytest

from accountant import AnalystBudget, Epsilon
from proxy.asker import Asker
from proxy.catalog.responder import CatalogResponder
from proxy.pipeline import Pipeline
from proxy.seam import QueryError
from proxy.selfservice import SelfServiceResponder
from proxy.session import AnalystSession
from proxy.workers import Workers
from tests.proxy.local_pipeline import local_pipeline

T = TypeVar("T")
CANCELED = "canceling statement due to user request"
#: Long enough for a statement to reach where it waits (a setup wait, not a measurement).
SETTLE_SECONDS = 0.2


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    made = local_pipeline(tmp_path_factory.mktemp("cancel_audit"))
    yield made
    made.ledger.close()


@pytest.fixture
def responder(pipeline: Pipeline) -> Iterator[CatalogResponder]:
    made = CatalogResponder(pipeline.catalog)
    yield made
    made.close()


def session(pipeline: Pipeline, responder: CatalogResponder) -> AnalystSession:
    budget = AnalystBudget(total=Epsilon(10), default_per_query=Epsilon(1))
    return AnalystSession(
        pipeline,
        Asker("alice", budget, "127.0.0.1"),
        "test",
        responders=(SelfServiceResponder(), responder),
    )


async def canceled_while_held(
    s: AnalystSession, workers: Workers, statement: Callable[[], Awaitable[T]]
) -> QueryError:
    """Run ``statement`` while another job holds alice's turn on ``workers``; cancel it
    while it waits; then let the job end (planning, which a cancel does not interrupt,
    goes on then). The error it ended with."""
    release = threading.Event()
    holder = asyncio.ensure_future(workers.run("alice", release.wait))
    await asyncio.sleep(SETTLE_SECONDS)
    waiting = asyncio.ensure_future(statement())
    await asyncio.sleep(SETTLE_SECONDS)
    assert not waiting.done()
    s.cancel()
    release.set()
    await holder
    with pytest.raises(QueryError) as caught:
        await asyncio.wait_for(waiting, 10)
    # The stopped statement's job may still end on its thread: its turn is given back on
    # this event loop, which must not close before (the next asyncio.run is another loop).
    deadline = asyncio.get_running_loop().time() + 10
    while "alice" in workers._turns and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)
    return caught.value


def audited(s: AnalystSession, sql: str) -> list[tuple[str | None, ...]]:
    """(decision, reason, ε) of alice's audit records of ``sql`` (dpproxy.my_queries)."""
    result = asyncio.run(s.execute("SELECT * FROM dpproxy.my_queries"))
    return [(row[4], row[5], row[6]) for row in result.rows if row[3] == sql]


def spent(s: AnalystSession) -> str:
    result = asyncio.run(s.execute("SELECT * FROM dpproxy.my_budget"))
    return str(result.rows[0][2])


def test_a_dp_query_stopped_while_it_is_classified_is_audited(
    pipeline: Pipeline, responder: CatalogResponder
) -> None:
    s = session(pipeline, responder)
    sql = "SELECT COUNT(*) FROM patients WHERE birth_year > 1931"
    before = spent(s)
    error = asyncio.run(canceled_while_held(s, responder._translating, lambda: s.execute(sql)))
    assert (error.sqlstate, error.message) == ("57014", CANCELED)
    assert audited(s, sql) == [("error", "canceled due to user request before the charge", "0")]
    assert spent(s) == before
    # The session goes on, and the statement is answered (and charged) when asked again.
    answer = asyncio.run(s.execute(sql))
    assert any("cost ε=1" in notice.message for notice in answer.notices)
    # A catalog query stopped while it runs (translated: known to be one; waiting for
    # alice's catalog thread) is a plain 57014, as before, and leaves no record.
    catalog_query = "SELECT 'not audited' AS fresh"
    running = responder._running
    error = asyncio.run(canceled_while_held(s, running, lambda: s.execute(catalog_query)))
    assert (error.sqlstate, error.message) == ("57014", CANCELED)
    assert audited(s, catalog_query) == []
    assert asyncio.run(s.execute(catalog_query)).rows == (("not audited",),)


def test_a_dp_query_stopped_at_describe_is_audited_once(
    pipeline: Pipeline, responder: CatalogResponder
) -> None:
    """Describe (extended protocol) plans the statement; a cancel that comes meanwhile
    ends the Describe with 57014, and the client's Execute never comes: one record."""
    s = session(pipeline, responder)
    sql = "SELECT COUNT(*) FROM patients WHERE birth_year > 1932"
    before = spent(s)
    error = asyncio.run(canceled_while_held(s, pipeline.planner, lambda: s.describe(sql)))
    assert (error.sqlstate, error.message) == ("57014", CANCELED)
    assert audited(s, sql) == [("error", "canceled due to user request before the charge", "0")]
    assert spent(s) == before
    # Described again without a cancel: described, and not audited again.
    columns = asyncio.run(s.describe(sql))
    assert columns is not None and [c.name for c in columns] == ["count"]
    assert len(audited(s, sql)) == 1
