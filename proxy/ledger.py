"""The state store seen from the event loop: every call runs on one dedicated thread.

State store calls block (and fsync, in SQLite or PostgreSQL); running them on a single
worker thread keeps the event loop free and gives the store one connection that never
crosses threads. Password lookups during a login and the answer cache's epoch use a
separate read-only connection on a second thread, so they never wait behind a charge
being written, and a state store that is slow or unreachable stalls only the login or
query waiting for it, never the event loop (other sessions, cancel requests, TLS
handshakes).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from accountant import (
    AdminChange,
    AnalystBudget,
    Attempt,
    AuditRecord,
    Cost,
    Decision,
    Epsilon,
    Reservation,
    StateLocation,
    StateReader,
    StateStore,
    StoredAnalyst,
)
from accountant.outcomes import CachedAttempt
from proxy.group_commit import GroupWriter

T = TypeVar("T")


class AsyncLedger:
    def __init__(self, location: StateLocation, *, lock_timeout: float = 30.0) -> None:
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dpproxy-ledger")
        self._reads = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dpproxy-reader")
        opened = self._executor.submit(StateStore.open, location, timeout=lock_timeout)
        self._store: StateStore = opened.result()
        try:
            self._reader = StateReader(location)
        except BaseException:
            self._executor.submit(self._store.close).result()
            self._executor.shutdown(wait=True)
            self._reads.shutdown(wait=True)
            raise
        # The records of cached answers are frequent: concurrent sessions share commits.
        self._cached: GroupWriter[CachedAttempt, AuditRecord] = GroupWriter(
            self._executor, self._store.record_cached_many
        )

    async def _call(self, work: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, work)

    def recover_interrupted(self) -> int:
        return self._executor.submit(self._store.recover_interrupted).result()

    async def reserve(
        self, attempt: Attempt, cost: Epsilon | Cost, budget: AnalystBudget
    ) -> Reservation:
        return await self._call(lambda: self._store.reserve(attempt, cost, budget))

    async def complete(
        self,
        reservation: Reservation,
        *,
        decision: Decision,
        reason: str | None,
        rows: int | None,
        duration_ms: float,
    ) -> AuditRecord:
        return await self._call(
            lambda: self._store.complete(
                reservation, decision=decision, reason=reason, rows=rows, duration_ms=duration_ms
            )
        )

    async def refuse(
        self, attempt: Attempt, decision: Decision, reason: str, budget: AnalystBudget | None
    ) -> AuditRecord:
        return await self._call(
            lambda: self._store.record_refusal(
                attempt, decision=decision, reason=reason, budget=budget
            )
        )

    async def cached(
        self, attempt: Attempt, reason: str, rows: int, duration_ms: float, budget: AnalystBudget
    ) -> AuditRecord:
        """Audit an answer from the answer cache (AnalystRemoved: nothing recorded)."""
        entry = CachedAttempt(attempt, reason, rows, duration_ms, budget)
        return await self._cached.write(entry)

    async def answer_cache_epoch(self) -> int:
        """The admin's answer-cache epoch, from the read-only connection (never behind a
        charge being written)."""
        return await asyncio.get_running_loop().run_in_executor(
            self._reads, self._reader.answer_cache_epoch
        )

    async def remaining(self, analyst: str, budget: AnalystBudget | None = None) -> Epsilon:
        return await self._call(lambda: self._store.remaining(analyst, budget))

    async def analyst(self, name: str) -> StoredAnalyst | None:
        """The analyst as stored now (None if unknown or removed)."""
        return await self._call(lambda: self._store.analyst(name))

    async def analyst_for_login(self, name: str) -> StoredAnalyst | None:
        """The same, from the read-only connection: a login never waits behind a charge
        being written."""
        return await asyncio.get_running_loop().run_in_executor(
            self._reads, lambda: self._reader.analyst(name)
        )

    async def records(self, analyst: str, decisions: tuple[Decision, ...]) -> list[AuditRecord]:
        return await self._call(
            lambda: self._store.audit_records(analyst=analyst, decisions=decisions)
        )

    def seed_analysts(
        self, configured: dict[str, tuple[str, AnalystBudget]], change: AdminChange
    ) -> list[str]:
        return self._executor.submit(self._store.seed_analysts, configured, change).result()

    def stored_analysts(self) -> list[StoredAnalyst]:
        return self._executor.submit(self._store.analysts).result()

    def close(self) -> None:
        self._reads.shutdown(wait=True)
        self._reader.close()
        self._executor.submit(self._store.close).result()
        self._executor.shutdown(wait=True)
