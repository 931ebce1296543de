"""An independent computation, in plain Python, of what the bounded query must return."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence

from tests.rewriter.tables import POLICY, Row

C = POLICY.max_rows_per_unit
COST_BOUNDS = (0.0, 100.0)
STAY_BOUNDS = (1, 10)
COST_STEP = 2.0**-13  # 100 < 2^7; 20 bits of resolution


def per_unit(rows: Sequence[Row], keep: Callable[[Row], bool]) -> dict[int, list[Row]]:
    units: dict[int, list[Row]] = defaultdict(list)
    for row in rows:
        if row[1] is not None and keep(row):
            units[row[1]].append(row)
    return units


def count_rows(rows: Sequence[Row], keep: Callable[[Row], bool] = lambda r: True) -> int:
    return sum(min(len(us), C) for us in per_unit(rows, keep).values())


def count_values(
    rows: Sequence[Row], column: int, keep: Callable[[Row], bool] = lambda r: True
) -> int:
    """COUNT(col) bounded per unit: values of field ``column`` that are neither NULL, NaN
    nor infinite."""
    return sum(
        min(sum(1 for r in us if r[column] is not None and math.isfinite(r[column])), C)
        for us in per_unit(rows, keep).values()
    )


def sum_cost_steps(rows: Sequence[Row], keep: Callable[[Row], bool] = lambda r: True) -> int:
    lower, upper = COST_BOUNDS
    hi = round(upper / COST_STEP)
    total = 0
    for us in per_unit(rows, keep).values():
        values = [r[3] for r in us if r[3] is not None and math.isfinite(r[3])]
        steps = [
            min(max(math.floor(min(max(v, lower), upper) / COST_STEP + 0.5), 0), hi) for v in values
        ]
        if steps:
            total += min(max(sum(steps), 0), C * hi)
    return total


def sum_stay(rows: Sequence[Row], keep: Callable[[Row], bool] = lambda r: True) -> int:
    lower, upper = STAY_BOUNDS
    total = 0
    for us in per_unit(rows, keep).values():
        values = [min(max(r[4], lower), upper) for r in us if r[4] is not None]
        if values:
            total += min(max(sum(values), 0), C * upper)
    return total


def sum_stay_squares(rows: Sequence[Row], keep: Callable[[Row], bool] = lambda r: True) -> int:
    lower, upper = STAY_BOUNDS
    total = 0
    for us in per_unit(rows, keep).values():
        values = [min(max(r[4], lower), upper) ** 2 for r in us if r[4] is not None]
        if values:
            total += min(max(sum(values), 0), C * upper**2)
    return total


Key = Callable[[Row], object]


def grouped(
    rows: Sequence[Row],
    key: Key,
    domain: Sequence[object],
    measure: Callable[..., int],
    *args: object,
) -> list[list[object]]:
    """[key, measure] per domain value, assuming no unit is in more groups than allowed."""
    return [[value, measure(rows, *args, lambda r, v=value: key(r) == v)] for value in domain]


def count_units(rows: Sequence[Row], keep: Callable[[Row], bool] = lambda r: True) -> int:
    return len(per_unit(rows, keep))
