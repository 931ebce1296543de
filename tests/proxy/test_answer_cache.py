"""The answer cache: a repeated query returns the same noisy answer at no cost, audited as
'cached'; new data, another analyst, other privacy parameters or `dpproxy cache clear`
mean a new charge and new noise."""

from __future__ import annotations

import asyncio
import datetime
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from accountant import AdminChange, AnalystBudget, Decision, Epsilon, StateStore
from proxy.answers import AnswerCache, duckdb_file_version
from proxy.asker import Asker
from proxy.backends.duckdb import DuckDBBackend
from proxy.ledger import AsyncLedger
from proxy.pipeline import Pipeline
from proxy.postprocess import PostProcessor
from proxy.seam import QueryError
from proxy.selfservice import failed_reason
from proxy.session import AnalystSession
from rewriter import OpenDPNoise
from tests.rewriter.tables import catalog, duckdb_file

SQL = "SELECT COUNT(*) AS n, SUM(stay) AS s FROM visits"


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def database(tmp_path: Path) -> Path:
    return duckdb_file(tmp_path / "data.duckdb")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def pipeline(database: Path, tmp_path: Path, clock: Clock) -> Iterator[Pipeline]:
    ledger = AsyncLedger(tmp_path / "state.db")
    cache = AnswerCache(duckdb_file_version(database), ttl_seconds=60, clock=clock)
    backend = DuckDBBackend(database, timeout_seconds=10)
    yield Pipeline(catalog("main"), backend, ledger, OpenDPNoise(), PostProcessor(), answers=cache)
    ledger.close()


def session(pipeline: Pipeline, analyst: str = "alice") -> AnalystSession:
    budget = AnalystBudget(total=Epsilon(10), default_per_query=Epsilon("0.1"))
    return AnalystSession(pipeline, Asker(analyst, budget, "127.0.0.1"), "test")


def ask(s: AnalystSession, *statements: str) -> list:
    async def go() -> list:
        return [await s.execute(sql) for sql in statements]

    return asyncio.run(go())


def test_repeat_is_free_and_identical(pipeline: Pipeline, clock: Clock) -> None:
    s = session(pipeline)
    first, again, renamed = ask(s, SQL, SQL, "select count(*) as total, sum(stay) from visits")
    assert again.rows == first.rows and renamed.rows == first.rows
    assert "this answer was cached" in again.notices[0].message
    assert "ε=9.9 left" in again.notices[0].message
    records = asyncio.run(pipeline.ledger.records("alice", ()))
    assert [r.decision for r in records] == [Decision.ACCEPTED, Decision.CACHED, Decision.CACHED]
    assert [r.epsilon for r in records] == [Epsilon("0.1"), Epsilon(0), Epsilon(0)]
    assert "the same noisy answer as released at" in (records[1].reason or "")
    clock.now = 61  # the TTL passed: charged again
    ask(s, SQL)
    records = asyncio.run(pipeline.ledger.records("alice", ()))
    assert records[-1].decision is Decision.ACCEPTED


def test_other_analyst_or_parameters_pay(pipeline: Pipeline) -> None:
    ask(session(pipeline), SQL)
    ask(session(pipeline, "bob"), SQL)
    ask(
        session(pipeline), "SET dpproxy.epsilon = 0.2", SQL, "SET dpproxy.mechanism = gaussian", SQL
    )
    for analyst, decisions in (("alice", 3), ("bob", 1)):
        records = asyncio.run(pipeline.ledger.records(analyst, ()))
        assert [r.decision for r in records] == [Decision.ACCEPTED] * decisions


def test_other_analysts_queries_do_not_push_an_answer_out(
    database: Path, tmp_path: Path, clock: Clock
) -> None:
    ledger = AsyncLedger(tmp_path / "state.db")
    cache = AnswerCache(duckdb_file_version(database), ttl_seconds=60, size=2, clock=clock)
    backend = DuckDBBackend(database, timeout_seconds=10)
    pipeline = Pipeline(
        catalog("main"), backend, ledger, OpenDPNoise(), PostProcessor(), answers=cache
    )
    alice = session(pipeline)
    (first,) = ask(alice, SQL)
    ask(
        session(pipeline, "bob"),
        "SELECT COUNT(*) FROM visits",
        "SELECT SUM(stay) FROM visits",
        "SELECT AVG(stay) FROM visits",
    )
    (again,) = ask(alice, SQL)
    ask(alice, "SELECT COUNT(*) FROM visits", "SELECT SUM(stay) FROM visits")
    (third,) = ask(alice, SQL)  # alice's own queries do push it out
    decisions = [r.decision for r in asyncio.run(ledger.records("alice", ()))]
    ledger.close()
    assert again.rows == first.rows
    assert decisions == [Decision.ACCEPTED, Decision.CACHED, *[Decision.ACCEPTED] * 3]


def test_changed_data_or_admin_clear_pay(
    pipeline: Pipeline, database: Path, tmp_path: Path
) -> None:
    s = session(pipeline)
    ask(s, SQL)
    stat = database.stat()
    os.utime(database, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    ask(s, SQL, SQL)  # the file changed: charged once, then cached again
    with StateStore.open(tmp_path / "state.db") as store:
        store.clear_answer_cache(AdminChange("root", "dpproxy cache clear"))
    ask(s, SQL)
    decisions = [r.decision for r in asyncio.run(pipeline.ledger.records("alice", ()))]
    assert decisions == [Decision.ACCEPTED, Decision.ACCEPTED, Decision.CACHED, Decision.ACCEPTED]


def test_cache_off(database: Path, tmp_path: Path) -> None:
    ledger = AsyncLedger(tmp_path / "state.db")
    cache = AnswerCache(duckdb_file_version(database), ttl_seconds=0)
    backend = DuckDBBackend(database, timeout_seconds=10)
    pipeline = Pipeline(
        catalog("main"), backend, ledger, OpenDPNoise(), PostProcessor(), answers=cache
    )
    ask(session(pipeline), SQL, SQL)
    decisions = [r.decision for r in asyncio.run(ledger.records("alice", ()))]
    ledger.close()
    assert decisions == [Decision.ACCEPTED, Decision.ACCEPTED]


def test_removed_analyst_gets_no_cached_answer(pipeline: Pipeline, tmp_path: Path) -> None:
    s = session(pipeline)
    budget = AnalystBudget(total=Epsilon(10), default_per_query=Epsilon("0.1"))
    with StateStore.open(tmp_path / "state.db") as store:
        store.add_analyst("alice", "v", budget, AdminChange("root", "add"))
    ask(s, SQL)
    with StateStore.open(tmp_path / "state.db") as store:
        store.remove_analyst("alice", AdminChange("root", "remove"))
    with pytest.raises(QueryError, match="removed"):
        ask(s, SQL)


def test_the_same_totals_released_in_another_order_are_not_shared(pipeline: Pipeline) -> None:
    """AVG(cost), SUM(cost) and SUM(cost), AVG(cost) run the same bounded SQL (one centred
    sum and one count): the second must not get the first's columns in the wrong order."""
    s = session(pipeline)
    first, second = ask(
        s,
        "SELECT AVG(cost) AS a, SUM(cost) AS t FROM visits",
        "SELECT SUM(cost), AVG(cost) FROM visits",
    )
    assert [c.name for c in second.columns] == ["sum", "avg"]
    records = asyncio.run(pipeline.ledger.records("alice", ()))
    assert [r.decision for r in records] == [Decision.ACCEPTED, Decision.ACCEPTED]
    # Each is its own release: the average lies within cost's bounds [0, 100] in both.
    assert 0 <= float(first.rows[0][0]) <= 100 and 0 <= float(second.rows[0][1]) <= 100


def test_the_same_query_spelled_with_a_table_alias_shares_the_answer(pipeline: Pipeline) -> None:
    s = session(pipeline)
    first, aliased = ask(s, SQL, "SELECT COUNT(*) AS n, SUM(v.stay) AS s FROM visits v")
    assert aliased.rows == first.rows
    assert "this answer was cached" in aliased.notices[0].message


def test_an_answer_whose_record_failed_is_not_given_again(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The answer is cached only once its release is on record: a state store that fails
    to complete the record leaves nothing that a retry could be given for free."""
    complete = pipeline.ledger.complete
    failures = [OSError("disk full")]

    async def failing_once(*args: Any, **kwargs: Any) -> Any:
        if failures:
            raise failures.pop()
        return await complete(*args, **kwargs)

    monkeypatch.setattr(pipeline.ledger, "complete", failing_once)
    s = session(pipeline)
    with pytest.raises(OSError, match="disk full"):
        ask(s, SQL)
    ask(s, SQL)
    records = asyncio.run(pipeline.ledger.records("alice", ()))
    assert records[-1].decision is Decision.ACCEPTED


def test_a_file_copied_over_with_its_size_and_mtime_is_another_version(tmp_path: Path) -> None:
    """``cp -p`` of another file of the same size keeps size and mtime: ctime tells."""
    path = tmp_path / "data.duckdb"
    other = tmp_path / "other.duckdb"
    path.write_bytes(b"a" * 4096)
    other.write_bytes(b"b" * 4096)
    stat = path.stat()
    os.utime(other, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    version = duckdb_file_version(path)
    before = version()
    path.write_bytes(other.read_bytes())  # in place: same inode and size
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_mtime_ns == stat.st_mtime_ns
    assert version() != before


def test_a_query_of_the_current_date_is_charged_once_a_day(
    database: Path, tmp_path: Path, clock: Clock
) -> None:
    """CURRENT_DATE is written into the query as the day's date (rewriter.passes.current_time):
    asked again the same day, the same answer, free; the next day, another query. The
    local time (LOCALTIMESTAMP) is another query each time."""
    days = [datetime.datetime(2026, 11, 23, 10, tzinfo=datetime.UTC)]
    ledger = AsyncLedger(tmp_path / "clock.db")
    cache = AnswerCache(duckdb_file_version(database), ttl_seconds=3600 * 48, clock=clock)
    backend = DuckDBBackend(database, timeout_seconds=10)
    clocked = Pipeline(
        catalog("main"), backend, ledger, OpenDPNoise(), PostProcessor(), answers=cache,
        wall_clock=lambda: days[-1],
    )  # fmt: skip
    today = "SELECT COUNT(*) FROM visits WHERE stay > 0 OR CURRENT_DATE < DATE '2026-11-24'"
    s = session(clocked)
    first, again = ask(s, today, today)
    days.append(days[-1] + datetime.timedelta(hours=13))  # 23:00: the same day
    (later,) = ask(s, today)
    days.append(days[-1] + datetime.timedelta(hours=2))  # 01:00 the next day
    (tomorrow,) = ask(s, today)
    now = "SELECT COUNT(*) FROM visits WHERE stay > 0 OR LOCALTIMESTAMP < TIMESTAMP '2000-01-01'"
    ask(s, now)
    days.append(days[-1] + datetime.timedelta(microseconds=1))
    ask(s, now)
    records = asyncio.run(ledger.records("alice", ()))
    ledger.close()
    assert again.rows == first.rows == later.rows
    assert [r.decision for r in records] == [
        Decision.ACCEPTED,
        Decision.CACHED,
        Decision.CACHED,
        Decision.ACCEPTED,
        Decision.ACCEPTED,
        Decision.ACCEPTED,
    ]
    assert tomorrow.rows


def test_a_release_whose_post_processing_failed_is_kept(pipeline: Pipeline) -> None:
    """A noisy count charged but not answered (its square does not fit a smallint) is
    kept: the query corrected, or the count alone, is answered from it at no new cost,
    and the same failing query again is refused free. Never a new draw for free."""
    s = session(pipeline)
    ask(s, "SET dpproxy.epsilon = 5")
    narrow = "SELECT CAST(COUNT(*) * COUNT(*) * 20000 AS SMALLINT) AS n FROM visits"
    with pytest.raises(QueryError) as failed:
        ask(s, narrow)
    assert "the charge of ε=5 stands" in failed.value.message
    assert "answered from it at no new cost" in (failed.value.hint or "")
    (wide,) = ask(s, "SELECT CAST(COUNT(*) * COUNT(*) * 20000 AS BIGINT) AS n FROM visits")
    (count,) = ask(s, "SELECT COUNT(*) AS n FROM visits")
    assert "this answer was cached" in wide.notices[0].message
    assert "this answer was cached" in count.notices[0].message
    (n,) = count.rows[0]
    assert wide.rows == ((str(int(n) * int(n) * 20000),),)
    with pytest.raises(QueryError) as again:
        ask(s, narrow)
    assert "nothing was charged" in again.value.message
    records = asyncio.run(pipeline.ledger.records("alice", ()))
    assert [r.decision for r in records] == [
        Decision.FAILED,
        Decision.CACHED,
        Decision.CACHED,
        Decision.ERROR,
    ]
    assert [r.epsilon for r in records] == [Epsilon(5), Epsilon(0), Epsilon(0), Epsilon(0)]


def test_a_failed_post_processing_is_audited_without_the_noisy_value(pipeline: Pipeline) -> None:
    """The audit reason says what failed in dpproxy's words: the database's message
    quotes the noisy value that did not fit, and the audit log holds no noisy answers."""
    s = session(pipeline)
    ask(s, "SET dpproxy.epsilon = 5")
    with pytest.raises(QueryError):
        ask(s, "SELECT CAST(COUNT(*) * COUNT(*) * 20000 AS SMALLINT) AS n FROM visits")
    (count,) = ask(s, "SELECT COUNT(*) AS n FROM visits")  # the same noisy count, cached
    (n,) = count.rows[0]
    noisy = str(int(n) * int(n) * 20000)
    records = asyncio.run(pipeline.ledger.records("alice", ()))
    failed = [r for r in records if r.decision is Decision.FAILED]
    assert len(failed) == 1
    reason = failed[0].reason or ""
    assert reason == (
        "PostProcessError: a noisy value did not fit its type (a CAST to a narrower type, "
        "or out of range); the database's message is in the server log"
    )
    assert noisy not in reason and "Conversion Error" not in reason
    assert failed_reason(reason) == (
        "the noisy answer could not be post-processed: a noisy value did not fit its type "
        "(a CAST to a narrower type, or out of range); the charge stands"
    )


def test_a_failed_post_processing_of_a_cached_answer_is_audited_without_the_noisy_value(
    pipeline: Pipeline,
) -> None:
    """The same for an answer from the cache: its record (an error at no cost) says what
    failed in dpproxy's words, never the database's message with the noisy value (found by
    helper-129)."""
    s = session(pipeline)
    ask(s, "SET dpproxy.epsilon = 5")
    (count,) = ask(s, "SELECT COUNT(*) AS n FROM visits")
    (n,) = count.rows[0]
    with pytest.raises(QueryError) as failed:
        ask(s, "SELECT CAST(COUNT(*) * COUNT(*) * 20000 AS SMALLINT) AS n FROM visits")
    assert "nothing was charged" in failed.value.message
    records = asyncio.run(pipeline.ledger.records("alice", ()))
    assert [r.decision for r in records] == [Decision.ACCEPTED, Decision.ERROR]
    reason = records[-1].reason or ""
    assert reason == (
        "post-processing a cached answer failed: PostProcessError: a noisy value did not fit "
        "its type (a CAST to a narrower type, or out of range); the database's message is in "
        "the server log"
    )
    assert str(int(n) * int(n) * 20000) not in reason and "Conversion Error" not in reason


def test_without_the_cache_nothing_is_promised(database: Path, tmp_path: Path) -> None:
    ledger = AsyncLedger(tmp_path / "state.db")
    backend = DuckDBBackend(database, timeout_seconds=10)
    pipeline = Pipeline(catalog("main"), backend, ledger, OpenDPNoise(), PostProcessor())
    try:
        s = session(pipeline)
        ask(s, "SET dpproxy.epsilon = 5")
        with pytest.raises(QueryError) as failed:
            ask(s, "SELECT CAST(COUNT(*) * COUNT(*) * 20000 AS SMALLINT) AS n FROM visits")
        assert "the charge of ε=5 stands" in failed.value.message
        assert "no new cost" not in (failed.value.hint or "")
    finally:
        ledger.close()
