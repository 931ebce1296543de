"""The Plan: SQL to run, the measurements it yields, and how to release them.

A Plan is a pure value made by ``rewriter.planner.plan``. The proxy runs ``plan.sql`` on
the backend, which returns one row of exact integers (one per measurement, in order), then
calls :meth:`Plan.release` with that row and a noise source.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import Enum

from rewriter.catalog import ColumnType
from rewriter.mechanisms import DiscreteLaplace, NoiseSource
from rewriter.passes.check_shape import Aggregate
from rewriter.passes.measurements import MeasurementSpec, OutputSpec, grid_for


class OutputType(Enum):
    BIGINT = "bigint"
    DOUBLE = "double precision"


@dataclass(frozen=True)
class Measurement:
    spec: MeasurementSpec
    mechanism: DiscreteLaplace
    epsilon: float  # the share of the query's epsilon this measurement spends


@dataclass(frozen=True)
class ReleasedValue:
    name: str
    type: OutputType
    value: int | float | None
    half_width_95: float | None  # half-width of the 95% interval of the noise, if known
    note: str | None = None


@dataclass(frozen=True)
class Release:
    values: tuple[ReleasedValue, ...]


class ReleaseError(Exception):
    """The backend's answer does not have the shape the plan expects."""


@dataclass(frozen=True)
class Plan:
    sql: str
    dialect: str
    table: str
    measurements: tuple[Measurement, ...]
    outputs: tuple[OutputSpec, ...]
    epsilon: float  # what the query costs (pure ε, basic composition of its measurements)
    max_rows_per_unit: int  # the contribution bound applied to each privacy unit

    def privacy_loss(self) -> float:
        """The sum of the measurements' privacy maps: never more than ``epsilon``."""
        return sum(m.mechanism.epsilon() for m in self.measurements)

    @property
    def output_types(self) -> tuple[OutputType, ...]:
        return tuple(_output_type(o) for o in self.outputs)

    def release(self, exact_row: Sequence[object], noise: NoiseSource) -> Release:
        if len(exact_row) != len(self.measurements):
            raise ReleaseError(f"expected {len(self.measurements)} values, got {len(exact_row)}")
        noisy: dict[str, int] = {}
        for measurement, raw in zip(self.measurements, exact_row, strict=True):
            noisy[measurement.spec.key] = measurement.mechanism.release(_as_int(raw), noise)
        by_key = {m.spec.key: m for m in self.measurements}
        return Release(tuple(self._value(o, noisy, by_key) for o in self.outputs))

    def _value(
        self, output: OutputSpec, noisy: dict[str, int], by_key: dict[str, Measurement]
    ) -> ReleasedValue:
        measured = by_key[output.numerator]
        width = measured.mechanism.half_width()
        otype = _output_type(output)
        if output.aggregate in (Aggregate.COUNT_ROWS, Aggregate.COUNT_VALUES):
            # Post-processing: a count is never negative.
            return ReleasedValue(output.name, otype, max(0, noisy[output.numerator]), width)
        grid = measured.spec.grid
        if grid is None:
            raise ReleaseError(f"measurement {measured.spec.key} has no grid")
        total = noisy[output.numerator] * grid.step
        if output.aggregate is Aggregate.SUM:
            value: int | float = int(total) if otype is OutputType.BIGINT else float(total)
            return ReleasedValue(output.name, otype, value, width * grid.step)
        if output.denominator is None:
            raise ReleaseError("an average needs a count")
        count = noisy[output.denominator]
        lower, upper = grid.lower * grid.step, grid.upper * grid.step
        # Post-processing: ratio of two noisy values, kept within the column's bounds.
        average = min(upper, max(lower, total / max(count, 1)))
        note = "noisy sum / noisy count, clamped to the column's bounds"
        return ReleasedValue(output.name, otype, average, None, note)


def _output_type(output: OutputSpec) -> OutputType:
    if output.aggregate in (Aggregate.COUNT_ROWS, Aggregate.COUNT_VALUES):
        return OutputType.BIGINT
    column = output.column
    if (
        output.aggregate is Aggregate.SUM
        and column is not None
        and column.type is ColumnType.INTEGER
        and grid_for(column).step == 1.0
    ):
        return OutputType.BIGINT
    return OutputType.DOUBLE


def _as_int(raw: object) -> int:
    if raw is None:
        return 0
    if isinstance(raw, bool):
        raise ReleaseError("expected an integer aggregate, got a boolean")
    if isinstance(raw, int):
        return raw
    if isinstance(raw, Decimal) and raw == raw.to_integral_value():
        return int(raw)
    if isinstance(raw, float) and raw.is_integer():
        return int(raw)
    raise ReleaseError(f"expected an integer aggregate, got {raw!r}")
