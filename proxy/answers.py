"""The answer cache: the same query asked again by the same analyst over unchanged data
gets the same noisy answer, at no cost.

Re-releasing a noisy answer already released is post-processing: it reveals nothing new,
so it costs nothing. Drawing *new* noise is never free: the cache holds the released
(noisy) relation itself, never the exact values, and only ever returns what was released.

Key: the analyst, the plan's SQL (the normalized bounded query, so differently written
queries with the same plan share an answer), the time zone a query over timestamps with
time zone reads them in (the session's TimeZone: an answer for UTC is never Paris's), and
the privacy parameters (mechanism, scales, sensitivities, ε or ρ, bias checks). An
entry is reused only while the data version is the same: the DuckDB file's size and
modification time (with its WAL), and for PostgreSQL nothing can be seen, so entries
expire after ``ttl_seconds``; and while the admin's cache epoch (``dpproxy cache clear``)
is unchanged. Entries live in this process only: after a restart
a repeated query is charged again (never answered for free with new noise).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from accountant import Cost
from rewriter import Plan, Release

DataVersion = Callable[[], Hashable]


def duckdb_file_version(path: Path) -> DataVersion:
    """The data version of a DuckDB file: the identity of the file and of its WAL (device,
    inode, size, mtime and ctime: ``cp -p`` over it keeps size and mtime, not ctime)."""

    def version() -> Hashable:
        found: list[tuple[int, ...] | None] = []
        for candidate in (path, path.with_name(path.name + ".wal")):
            try:
                stat = candidate.stat()
            except FileNotFoundError:
                found.append(None)
                continue
            found.append(
                (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
            )
        return tuple(found)

    return version


def no_version() -> Hashable:
    """For engines whose changes dpproxy cannot see (PostgreSQL): only the TTL applies."""
    return None


@dataclass(frozen=True)
class CacheKey:
    analyst: str
    sql: str
    dialect: str
    privacy: tuple[Hashable, ...]
    #: The session's TimeZone the plan reads timestamps with time zone in (its SQL names
    #: the zone too); None for a plan that reads none, whose answer any zone shares.
    time_zone: str | None = None

    @classmethod
    def of(cls, analyst: str, query_plan: Plan) -> CacheKey:
        privacy: tuple[Hashable, ...] = (
            query_plan.epsilon,
            query_plan.rho,
            *((type(m.mechanism).__name__, m.mechanism) for m in query_plan.measurements),
            query_plan.selection,  # partition selection's noise and threshold, if any
            # bias checks (SET dpproxy.bias_check = on): their noise; a checked plan's SQL
            # also differs from the unchecked one's (it computes the checks' counts)
            *(("check", type(c.mechanism).__name__, c.mechanism) for c in query_plan.checks),
        )
        # How the release is assembled from the noisy totals: two queries with the same
        # bounded SQL can release them in another order or form (AVG(x), SUM(x) and
        # SUM(x), AVG(x) measure the same totals), so their answers must not be shared.
        # (Not how the analyst spelled them: SUM(cost) and SUM(v.cost) share an answer.)
        shape = (
            tuple(
                (o.aggregate, o.numerator, o.denominator, o.squares, o.bounds)
                for o in query_plan.outputs
            ),
            tuple((k.name, k.sql_type, k.domain) for k in query_plan.keys),
            tuple((c.spec.kind, c.spec.outputs) for c in query_plan.checks),
        )
        privacy = (*privacy, shape)
        return cls(analyst, query_plan.sql, query_plan.dialect, privacy, query_plan.time_zone)


@dataclass(frozen=True)
class CachedAnswer:
    release: Release
    cost: Cost  # what the first answer was charged
    released_at: datetime
    version: Hashable
    stored_at: float  # monotonic seconds


class AnswerCache:
    """A bounded, in-memory map from CacheKey to the noisy release first answered.

    Each analyst has a least-recently-used map of their own, of ``size`` entries: one
    analyst's queries never push another's answers out (a flood of queries at ε = 1e-9
    would otherwise make everyone pay again for their repeated queries)."""

    def __init__(
        self,
        data_version: DataVersion,
        *,
        ttl_seconds: float,
        size: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._data_version = data_version
        self._ttl = ttl_seconds
        self._size = size
        self._clock = clock
        self._analysts: dict[str, OrderedDict[CacheKey, CachedAnswer]] = {}

    @property
    def enabled(self) -> bool:
        return self._ttl > 0 and self._size > 0

    def version(self, epoch: int) -> Hashable:
        """The version answers are valid for now: the data's and the admin's epoch."""
        return (self._data_version(), epoch)

    def get(self, key: CacheKey, version: Hashable) -> CachedAnswer | None:
        if not self.enabled:
            return None
        entries = self._analysts.get(key.analyst)
        found = None if entries is None else entries.get(key)
        if entries is None or found is None:
            return None
        if found.version != version or self._clock() - found.stored_at > self._ttl:
            del entries[key]
            return None
        entries.move_to_end(key)
        return found

    def put(
        self, key: CacheKey, release: Release, cost: Cost, released_at: datetime, version: Hashable
    ) -> None:
        if not self.enabled:
            return
        entries = self._analysts.setdefault(key.analyst, OrderedDict())
        entries[key] = CachedAnswer(release, cost, released_at, version, self._clock())
        entries.move_to_end(key)
        while len(entries) > self._size:
            entries.popitem(last=False)
