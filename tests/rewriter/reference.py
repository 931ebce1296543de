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


#: SUM(cost) with a count of cost in the query measures Σ(steps - centre) (measurements).
COST_CENTRE = round(COST_BOUNDS[1] / COST_STEP) // 2


def per_value(partial: int, values: int) -> int:
    """A centred sum's partial over more than C values, as C values at the patient's mean:
    scaled by C / n in doubles, as the bounded query computes it, rounded half up."""
    if values <= C:
        return partial
    return math.floor(float(partial) / float(values) * float(C) + 0.5)


def sum_cost_steps(
    rows: Sequence[Row], keep: Callable[[Row], bool] = lambda r: True, centre: int = 0
) -> int:
    """Σ(steps of cost - centre), each patient's partial clamped to C rows' worth; centred
    (an average's, or a SUM's beside COUNT(cost)), a patient's partial over more than C
    values is first scaled to C of them (``per_value``)."""
    lower, upper = COST_BOUNDS
    hi = round(upper / COST_STEP)
    total = 0
    for us in per_unit(rows, keep).values():
        values = [r[3] for r in us if r[3] is not None and math.isfinite(r[3])]
        steps = [
            min(max(math.floor(min(max(v, lower), upper) / COST_STEP + 0.5), 0), hi) - centre
            for v in values
        ]
        if steps:
            partial = per_value(sum(steps), len(steps)) if centre else sum(steps)
            total += min(max(partial, min(0, -C * centre)), C * (hi - centre))
    return total


#: AVG, VAR… of stay measure sums centred on the middle of its bounds (measurements).
STAY_CENTRE = (STAY_BOUNDS[0] + STAY_BOUNDS[1]) // 2


def sum_stay(
    rows: Sequence[Row], keep: Callable[[Row], bool] = lambda r: True, centre: int = 0
) -> int:
    """Σ(stay - centre), each patient's partial clamped to C rows' worth; centred, first
    scaled to C values when there are more (``per_value``)."""
    lower, upper = STAY_BOUNDS
    total = 0
    for us in per_unit(rows, keep).values():
        values = [min(max(r[4], lower), upper) - centre for r in us if r[4] is not None]
        if values:
            partial = per_value(sum(values), len(values)) if centre else sum(values)
            total += min(max(partial, min(0, C * (lower - centre))), C * (upper - centre))
    return total


def sum_stay_squares(
    rows: Sequence[Row], keep: Callable[[Row], bool] = lambda r: True, centre: int = 0
) -> int:
    """Σ(stay - centre)², each patient's partial scaled to C values when there are more
    (``per_value``, as for every variance), then clamped to C rows' worth."""
    lower, upper = STAY_BOUNDS
    largest = max((lower - centre) ** 2, (upper - centre) ** 2)
    total = 0
    for us in per_unit(rows, keep).values():
        values = [(min(max(r[4], lower), upper) - centre) ** 2 for r in us if r[4] is not None]
        if values:
            total += min(max(per_value(sum(values), len(values)), 0), C * largest)
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


def kept(
    rows: Sequence[Row],
    key: Key,
    keep: Callable[[Row], bool] = lambda r: True,
    *,
    groups: int = POLICY.max_groups_per_unit,
    rows_per_unit: int = C,
) -> list[Row]:
    """The rows (passing ``keep``) of the groups each unit keeps, its groups taken in the
    order of their keys (NULL last; tests.rewriter.coupling): at most ``groups`` of them,
    while their rows, each group's counted as at most ``rows_per_unit``, add up to at most
    ``rows_per_unit``."""
    result: list[Row] = []
    for unit_rows in per_unit(rows, keep).values():
        by_group: dict[object, list[Row]] = defaultdict(list)
        for row in unit_rows:
            by_group[key(row)].append(row)
        so_far = 0
        ordered = sorted(by_group, key=lambda k: (k is None, k))
        for rank, group in enumerate(ordered, start=1):
            so_far += min(len(by_group[group]), rows_per_unit)
            if rank <= groups and so_far <= rows_per_unit:
                result.extend(by_group[group])
    return result
