"""Pass 3: turn the requested aggregates into bounded integer measurements.

Each output needs one or two integer aggregates over the privacy units (AVG is a noisy
SUM over a noisy COUNT). Equal measurements are shared: ``SUM(cost), AVG(cost)`` measure
the sum of cost once. Real values are measured on a fixed-point grid (a power of two), so
the database sums integers and floating-point rounding cannot raise the sensitivity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from rewriter.catalog import ColumnInfo, ColumnType
from rewriter.passes.check_shape import Aggregate, QuerySpec

GRID_RESOLUTION_BITS = 20  # values are measured to 1 part in 2^20 of their largest bound
MAX_EXACT_INTEGER_BOUND = 2**40


class MeasureKind(Enum):
    COUNT = "count"
    SUM = "sum"


@dataclass(frozen=True)
class Grid:
    """Values are clamped to [lower*step, upper*step] and measured as integers in steps."""

    step: float
    lower: int
    upper: int


@dataclass(frozen=True)
class MeasurementSpec:
    """One integer aggregate over privacy units and its per-unit clamp."""

    key: str
    kind: MeasureKind
    column: ColumnInfo | None  # None: COUNT(*)
    grid: Grid | None  # SUM only
    unit_lower: int  # each unit's partial is clamped to [unit_lower, unit_upper]
    unit_upper: int

    @property
    def sensitivity(self) -> int:
        """How much adding or removing one privacy unit can change the total."""
        return max(abs(self.unit_lower), abs(self.unit_upper))


@dataclass(frozen=True)
class OutputSpec:
    name: str
    aggregate: Aggregate
    column: ColumnInfo | None
    numerator: str  # measurement key (COUNT: the count, SUM/AVG: the sum)
    denominator: str | None  # AVG: the count of values


def grid_for(column: ColumnInfo) -> Grid:
    bounds = column.policy.bounds
    if bounds is None:
        raise ValueError(f"column {column.name} has no bounds")
    lower, upper = bounds
    largest = max(abs(lower), abs(upper))
    if column.type is ColumnType.INTEGER and largest <= MAX_EXACT_INTEGER_BOUND:
        return Grid(step=1.0, lower=math.floor(lower), upper=math.ceil(upper))
    if largest == 0:
        return Grid(step=1.0, lower=0, upper=0)
    exponent = math.ceil(math.log2(largest)) - GRID_RESOLUTION_BITS
    step = math.ldexp(1.0, exponent)
    return Grid(step=step, lower=math.floor(lower / step), upper=math.ceil(upper / step))


def plan_measurements(
    spec: QuerySpec,
) -> tuple[tuple[MeasurementSpec, ...], tuple[OutputSpec, ...]]:
    max_rows = spec.table.policy.max_rows_per_unit
    measurements: dict[tuple[MeasureKind, str | None], MeasurementSpec] = {}

    def measure(kind: MeasureKind, column: ColumnInfo | None) -> str:
        identity = (kind, None if column is None else column.name)
        found = measurements.get(identity)
        if found is not None:
            return found.key
        key = f"m{len(measurements)}"
        if kind is MeasureKind.COUNT:
            made = MeasurementSpec(key, kind, column, None, 0, max_rows)
        else:
            if column is None:
                raise ValueError("a sum needs a column")
            grid = grid_for(column)
            made = MeasurementSpec(
                key,
                kind,
                column,
                grid,
                unit_lower=min(0, max_rows * grid.lower),
                unit_upper=max(0, max_rows * grid.upper),
            )
        measurements[identity] = made
        return key

    outputs = []
    for request in spec.outputs:
        column = request.column
        if request.aggregate is Aggregate.COUNT_ROWS:
            outputs.append(
                OutputSpec(
                    request.name, request.aggregate, None, measure(MeasureKind.COUNT, None), None
                )
            )
        elif request.aggregate is Aggregate.COUNT_VALUES:
            outputs.append(
                OutputSpec(
                    request.name,
                    request.aggregate,
                    column,
                    measure(MeasureKind.COUNT, column),
                    None,
                )
            )
        elif request.aggregate is Aggregate.SUM:
            outputs.append(
                OutputSpec(
                    request.name, request.aggregate, column, measure(MeasureKind.SUM, column), None
                )
            )
        else:
            total = measure(MeasureKind.SUM, column)
            count = measure(MeasureKind.COUNT, column)
            outputs.append(OutputSpec(request.name, request.aggregate, column, total, count))
    return tuple(measurements.values()), tuple(outputs)
