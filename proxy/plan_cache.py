"""What the pipeline remembers of plans: the plans themselves (:class:`PlanCache`) and values
computed from a plan (:class:`PerPlan`: its columns, its cost).

Apart from ``proxy.pipeline`` because these are plain bounded caches, with no part in
whether a query is charged or answered.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from rewriter import Plan, PlanRequest

PLAN_CACHE_SIZE = 1024


class PlanCache:
    """Recently made plans. A plan is a pure value of (SQL, request) over a fixed catalog,
    so it can be reused; rejections are never cached (each one is audited). Kept for each
    analyst apart: a remembered plan answers a Describe in a fraction of the time a new
    one takes, and that time, free of charge, would tell one analyst which queries (and
    which constants in them) another has asked."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._plans: OrderedDict[tuple[str, str, PlanRequest], Plan] = OrderedDict()

    def get(self, analyst: str, sql: str, request: PlanRequest) -> Plan | None:
        found = self._plans.get((analyst, sql, request))
        if found is not None:
            self._plans.move_to_end((analyst, sql, request))
        return found

    def put(self, analyst: str, sql: str, request: PlanRequest, made: Plan) -> None:
        self._plans[(analyst, sql, request)] = made
        if len(self._plans) > self._size:
            self._plans.popitem(last=False)


T = TypeVar("T")


class PerPlan(Generic[T]):
    """Values that depend only on a plan (and a small extra key), computed once per plan
    object while it is among the ``size`` most recently computed. Plans from the PlanCache
    come back as the same object, so a repeated query skips the work (describing its
    columns in DuckDB, recomputing its privacy loss)."""

    def __init__(self, size: int) -> None:
        self._size = size
        # id(plan) -> (the plan itself, which keeps the id from being reused; extra; value)
        self._values: OrderedDict[int, tuple[Plan, Hashable, T]] = OrderedDict()

    def get(self, query_plan: Plan, extra: Hashable, compute: Callable[[], T]) -> T:
        found = self._values.get(id(query_plan))
        if found is not None and found[0] is query_plan and found[1] == extra:
            return found[2]
        value = compute()
        self._values[id(query_plan)] = (query_plan, extra, value)
        if len(self._values) > self._size:
            self._values.popitem(last=False)
        return value
