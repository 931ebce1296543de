"""Several processes share one state store (a SQLite file, or a PostgreSQL schema): no
overspending, and crash recovery."""

from __future__ import annotations

import multiprocessing
import os
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier

from accountant import (
    RECOVERED_REASON,
    AnalystBudget,
    Attempt,
    BudgetExhausted,
    Decision,
    Epsilon,
    StateLocation,
    StateStore,
)

# fork: pytest imports test modules in importlib mode, which spawned children cannot
# re-import. Each child opens its own store after the fork (none is open at fork time).
CONTEXT = multiprocessing.get_context("fork")
PROCESSES = 8
ATTEMPTS_EACH = 50
COST = Epsilon("0.1")
# Exactly 200 charges of 0.1 fit; 400 are attempted.
BUDGET = AnalystBudget(total=Epsilon(20), default_per_query=COST)


def hammer(location: StateLocation, worker: int, start: Barrier | None = None) -> int:
    """Reserve (and complete) ATTEMPTS_EACH times; return how many were charged."""
    charged = 0
    with StateStore.open(location) as store:
        if start is not None:
            start.wait(timeout=60)  # all workers begin together, so they really compete
        for i in range(ATTEMPTS_EACH):
            attempt = Attempt("alice", f"worker-{worker}", f"SELECT {i}")
            try:
                reservation = store.reserve(attempt, COST, BUDGET)
            except BudgetExhausted as exc:
                store.record_refusal(
                    attempt, decision="over_budget", reason=str(exc), budget=BUDGET
                )
                continue
            charged += 1
            store.complete(reservation, decision="accepted", reason=None, rows=1, duration_ms=0.1)
    return charged


def hammer_and_report(
    location: StateLocation, worker: int, start: Barrier, results: Queue[int]
) -> None:
    results.put(hammer(location, worker, start))


def run_workers(location: StateLocation, count: int) -> list[int]:
    start = CONTEXT.Barrier(count)
    results: Queue[int] = CONTEXT.Queue()
    workers = [
        CONTEXT.Process(target=hammer_and_report, args=(location, w, start, results))
        for w in range(count)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    return [results.get(timeout=5) for _ in workers]


def reserve_and_die(location: StateLocation) -> None:
    store = StateStore.open(location)
    store.reserve(Attempt("alice", "doomed", "SELECT 'lost'"), COST, BUDGET)
    os._exit(0)  # no close, no complete: as if killed


def test_processes_never_overspend(location: StateLocation) -> None:
    StateStore.open(location).close()  # create the schema once, up front
    charged = run_workers(location, PROCESSES)
    assert sum(charged) == 200
    assert sum(1 for c in charged if c > 0) > 1  # the processes did interleave
    with StateStore.open(location) as store:
        assert store.spent("alice") == BUDGET.total
        assert store.remaining("alice", BUDGET) == Epsilon.zero()
        records = store.audit_records()
        assert len(records) == PROCESSES * ATTEMPTS_EACH
        accepted = [r for r in records if r.decision is Decision.ACCEPTED]
        assert len(accepted) == 200
        assert sum((r.epsilon for r in records), Epsilon.zero()) == BUDGET.total
        # Remaining budgets recorded with each charge are all different: no double spending.
        assert len({r.remaining for r in accepted}) == 200
        verification = store.verify_audit()
        assert verification.intact and verification.records == 400


def test_processes_racing_to_create_the_store(location: StateLocation) -> None:
    assert sum(run_workers(location, 4)) == 200


def test_killed_process_is_recovered(location: StateLocation) -> None:
    child = CONTEXT.Process(target=reserve_and_die, args=(location,))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0
    with StateStore.open(location) as store:
        assert store.spent("alice") == COST
        assert store.recover_interrupted() == 1
        (record,) = store.audit_records()
        assert record.decision is Decision.FAILED
        assert record.reason == RECOVERED_REASON
        assert record.client_address == "doomed"
        assert store.spent("alice") == COST
        assert store.verify_audit().intact
