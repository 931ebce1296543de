"""Pass 5: turn the aggregates into bounded integer measurements.

Each aggregate needs one or two integer totals over the privacy units (AVG is a noisy SUM
over a noisy COUNT of the same values). Equal measurements are shared: ``SUM(cost),
AVG(cost)`` measure the sum of cost once. Real values are measured on a fixed-point grid
(a power of two), so the database sums integers and floating-point rounding cannot raise
the sensitivity.

Averages, variances and standard deviations measure centred sums: the sum of each
value's distance from the middle of its grid range, Σ(x − c), and of its square,
Σ(x − c)². One unit moves them by at most its rows times half the range (squared), not
times the largest bound: for values in [0, u], half the noise on the sum and a quarter on
the sum of squares. The mean is c + Σ(x − c)/n and the variance Σ(x − c)²/n − (Σ(x − c)/n)²
(post-processing). ``SUM(x)`` alone measures the plain sum Σx; asked with a count of the
same values (``AVG(x)``, ``VAR…(x)``, ``COUNT(x)``), it is c·n + Σ(x − c) from the centred
sum and that count: two noises of half the size instead of one of the full size.

A unit with more values than ``max_rows_per_unit`` in a group has its count clamped to that
many. Its centred sums (and sums of squares) are scaled to that many values at its own mean
(``per_value_rows``), not clamped: clamping Σ(x − c) would make it that many values at a
bound, and pull the average of a group with a few heavy users towards the bounds. Plain
sums stay clamped to that many values' worth, which keeps a unit's whole sum when its
values are small.

A quantile (MEDIAN, PERCENTILE_CONT …) is measured as counts of rows per bin of a fixed
grid over the declared range of its argument (:class:`Bins`, independent of the data):
each unit contributes at most ``max_rows_per_unit`` rows per group, chosen at random. The
proxy selects a bin from these counts with the exponential mechanism
(``rewriter.quantile_selection``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import Enum
from fractions import Fraction
from typing import Protocol

from sqlglot import exp

from rewriter.dialects import DEFAULT
from rewriter.errors import Rejected
from rewriter.intervals import Interval
from rewriter.passes.aggregates import Aggregate, AggregateSpec

GRID_RESOLUTION_BITS = 20  # values are measured to 1 part in 2^20 of their largest bound
MAX_EXACT_INTEGER_BOUND = 2**40
#: Candidates of a quantile: this many equal bins over the declared range (or one bin per
#: integer when an integer expression takes at most this many values).
MAX_BINS = 64


class MeasureKind(Enum):
    COUNT = "count"  # rows, or non-NULL values of an expression
    UNITS = "units"  # 1 for each privacy unit with a row
    SUM = "sum"
    BINS = "bins"  # rows per bin of a fixed grid (quantiles): one count per bin


@dataclass(frozen=True)
class Grid:
    """Values are clamped to [lower*step, upper*step] and measured as integers in steps."""

    step: float
    lower: int
    upper: int


@dataclass(frozen=True)
class Bins:
    """``count`` bins of ``width`` from ``lower``: bin j holds [lower + j·width, lower +
    (j+1)·width); values beyond the ends fall in the first or last bin. Fixed by the
    declared bounds alone, never by the data."""

    lower: float
    width: float
    count: int

    @property
    def inverse(self) -> float:
        """1 / width, as the database multiplies by it (the same float on every engine)."""
        return 1.0 / self.width

    @property
    def offset(self) -> float:
        """lower / width, as the database subtracts it."""
        return self.lower * self.inverse

    def index(self, value: float) -> int:
        """The bin of a value, computed as the bounded SQL computes it."""
        steps = math.floor(value * self.inverse - self.offset)
        return min(max(steps, 0), self.count - 1)

    def midpoint(self, index: int) -> float:
        return self.lower + (index + 0.5) * self.width


def bins_for(bounds: Interval) -> Bins:
    """Integer expressions with at most MAX_BINS values: one bin per integer (its midpoint
    is the integer). Otherwise MAX_BINS equal bins over [lower, upper]."""
    lower, upper = bounds.lower, bounds.upper
    if upper <= lower:
        return Bins(lower - 0.5, 1.0, 1)
    if bounds.integer and upper - lower + 1 <= MAX_BINS:
        return Bins(lower - 0.5, 1.0, int(upper - lower) + 1)
    made = Bins(lower, (upper - lower) / MAX_BINS, MAX_BINS)
    if not (made.width > 0 and math.isfinite(made.inverse) and math.isfinite(made.offset)):
        raise Rejected(
            f"the bounds [{lower:g}, {upper:g}] are too close together to cut into "
            f"{MAX_BINS} bins for a quantile",
            hint="declare a wider range for the column",
        )
    return made


@dataclass(frozen=True)
class MeasurementSpec:
    """One integer total over privacy units, and each unit's clamp in one group."""

    key: str
    kind: MeasureKind
    argument: exp.Expr | None  # COUNT of values / SUM: the resolved expression
    filter: exp.Expr | None
    bounds: Interval | None  # SUM: the range of the argument
    grid: Grid | None  # SUM only
    unit_lower: int  # each unit's partial is clamped to [unit_lower, unit_upper]
    unit_upper: int
    bins: Bins | None = None  # BINS: the candidates (each unit: at most unit_upper rows)
    alpha: Fraction | None = None  # BINS: the quantile selected from the counts
    centre: int = 0  # SUM: grid steps subtracted from each value before summing
    #: SUM of the values an average or variance counts (``per_value_partial``): a unit
    #: with more than this many values in a group counts as this many values at its own
    #: mean, its partial scaled by rows / n; 0 for plain sums (clamped, not scaled).
    per_value_rows: int = 0
    #: With ``per_value_rows``: the key of the COUNT measurement of the same values (the
    #: average's denominator), whose partial is each unit's n.
    values: str = ""

    @property
    def unit_bound(self) -> int:
        """How much one unit can change the total of one group."""
        return max(abs(self.unit_lower), abs(self.unit_upper))


@dataclass(frozen=True)
class OutputSpec:
    """How one released aggregate is computed from the noisy measurements."""

    name: str
    label: str
    aggregate: Aggregate
    numerator: str  # measurement key (COUNT: the count, SUM/AVG/VAR…: the sum)
    denominator: str | None  # AVG, VAR…, a SUM from a centred sum: the count of values
    bounds: Interval | None
    squares: str | None = None  # VAR…/STDDEV…: the sum of squared distances from the centre


def grid_for(bounds: Interval) -> Grid:
    lower, upper = bounds.lower, bounds.upper
    largest = max(abs(lower), abs(upper))
    if bounds.integer and largest <= MAX_EXACT_INTEGER_BOUND:
        return Grid(step=1.0, lower=math.floor(lower), upper=math.ceil(upper))
    if largest == 0:
        return Grid(step=1.0, lower=0, upper=0)
    exponent = math.ceil(math.log2(largest)) - GRID_RESOLUTION_BITS
    step = math.ldexp(1.0, exponent)
    return Grid(step=step, lower=math.floor(lower / step), upper=math.ceil(upper / step))


def centre_of(grid: Grid) -> int:
    """The middle of the grid's range, in steps (0 when the range is symmetric)."""
    return (grid.lower + grid.upper) // 2


def plan_measurements(
    aggregates: tuple[AggregateSpec, ...], max_rows: int
) -> tuple[tuple[MeasurementSpec, ...], tuple[OutputSpec, ...]]:
    measurements: dict[str, MeasurementSpec] = {}
    identity_of = _Identities()
    counted = {  # (argument, filter) whose values are counted anyway
        identity_of(s.argument, s.filter) for s in aggregates if s.aggregate in COUNTED_AGGREGATES
    }

    def measure(
        kind: MeasureKind,
        argument: exp.Expr | None,
        condition: exp.Expr | None,
        bounds: Interval | None,
        *,
        alpha: Fraction | None = None,
        centred: bool = False,
        per_value: bool = False,
    ) -> str:
        centre = centre_of(grid_for(bounds)) if centred and bounds is not None else 0
        per_value = per_value or centred
        identity = (
            f"{kind.value}|{identity_of(argument, condition)}"
            + ("" if alpha is None else f"|{alpha}")
            + ("" if centre == 0 else f"|centre {centre}")
            + ("|per value" if per_value and kind is MeasureKind.SUM else "")
        )
        found = measurements.get(identity)
        if found is not None:
            return found.key
        key = f"m{len(measurements)}"
        if kind is MeasureKind.BINS:
            if bounds is None or alpha is None:
                raise ValueError("a quantile needs bounds and a quantile")
            made = MeasurementSpec(
                key,
                kind,
                argument,
                condition,
                bounds,
                None,
                0,
                max_rows,
                bins=bins_for(bounds),
                alpha=alpha,
            )
        elif kind is MeasureKind.SUM:
            if bounds is None:
                raise ValueError("a sum needs bounds")
            grid = grid_for(bounds)
            made = MeasurementSpec(
                key,
                kind,
                argument,
                condition,
                bounds,
                grid,
                unit_lower=min(0, max_rows * (grid.lower - centre)),
                unit_upper=max(0, max_rows * (grid.upper - centre)),
                centre=centre,
                # its values: counted_by; scaled in DOUBLE, so its limits must be exact
                # there (below 2^53), else it is clamped as a plain sum is
                per_value_rows=max_rows
                if per_value and _exact_double(grid, centre, max_rows)
                else 0,
            )
        elif kind is MeasureKind.UNITS:
            made = MeasurementSpec(key, kind, None, condition, None, None, 0, 1)
        else:
            made = MeasurementSpec(key, kind, argument, condition, None, None, 0, max_rows)
        measurements[identity] = made
        return key

    def counted_by(key: str, count: str) -> None:
        """The per-value sum ``key`` counts its values with the measurement ``count``."""
        for identity, made in measurements.items():
            if made.key == key and made.per_value_rows:
                measurements[identity] = replace(made, values=count)

    outputs = []
    for spec in aggregates:
        centred = identity_of(spec.argument, spec.filter) in counted
        numerator, denominator = _measure_aggregate(spec, measure, centred)
        if denominator is not None:
            counted_by(numerator, denominator)
        squares = None
        if spec.aggregate in SPREAD_AGGREGATES:
            if spec.argument is None or spec.bounds is None:
                raise ValueError("a variance needs an argument and bounds")
            found = next(m for m in measurements.values() if m.key == numerator)
            step = 1.0 if found.grid is None else found.grid.step
            centre = found.centre * step  # a whole number of steps: exact in floating point
            bounds = _square(_shifted(spec.bounds, centre))
            squares = measure(
                MeasureKind.SUM,
                _squared(spec.argument, centre, bounds),
                spec.filter,
                bounds,
                per_value=True,
            )
            if denominator is None:
                raise ValueError("a variance needs a count")
            counted_by(squares, denominator)
        outputs.append(
            OutputSpec(
                spec.name,
                spec.label,
                spec.aggregate,
                numerator,
                denominator,
                spec.bounds,
                squares,
            )
        )
    return tuple(measurements.values()), tuple(outputs)


def _measure_aggregate(
    spec: AggregateSpec, measure: _Measure, centred: bool
) -> tuple[str, str | None]:
    """The numerator and denominator measurements of an aggregate. ``centred``: the values
    of its argument are counted anyway, so a sum is measured centred (a SUM then needs the
    count too: c·n + Σ(x − c))."""
    if spec.aggregate is Aggregate.COUNT_ROWS:
        return measure(MeasureKind.COUNT, None, spec.filter, None), None
    if spec.aggregate is Aggregate.COUNT_UNITS:
        return measure(MeasureKind.UNITS, None, spec.filter, None), None
    if spec.aggregate is Aggregate.COUNT_VALUES:
        return measure(MeasureKind.COUNT, spec.argument, spec.filter, None), None
    if spec.aggregate is Aggregate.QUANTILE:
        return measure(
            MeasureKind.BINS, spec.argument, spec.filter, spec.bounds, alpha=spec.quantile
        ), None
    if spec.aggregate is Aggregate.SUM and not centred:
        return measure(MeasureKind.SUM, spec.argument, spec.filter, spec.bounds), None
    total = measure(MeasureKind.SUM, spec.argument, spec.filter, spec.bounds, centred=True)
    return total, measure(MeasureKind.COUNT, spec.argument, spec.filter, None)


class _Identities:
    """``argument|condition`` by their SQL: equal for the same argument and condition.
    Each expression's SQL is generated once (the expressions are kept, so their ids stay
    theirs while this lives)."""

    def __init__(self) -> None:
        self._sql: dict[int, tuple[exp.Expr, str]] = {}

    def __call__(self, argument: exp.Expr | None, condition: exp.Expr | None) -> str:
        return f"{self._of(argument)}|{self._of(condition)}"

    def _of(self, node: exp.Expr | None) -> str:
        if node is None:
            return ""
        found = self._sql.get(id(node))
        if found is None:
            found = self._sql[id(node)] = (node, node.sql(dialect=DEFAULT))
        return found[1]


def _exact_double(grid: Grid, centre: int, max_rows: int) -> bool:
    """Whether a unit's limits, ``max_rows`` times the grid's ends from the centre, are
    integers a DOUBLE holds exactly (the scaled partial is clamped to them in DOUBLE)."""
    return max_rows * max(abs(grid.lower - centre), abs(grid.upper - centre)) < 2**53


def _squared(argument: exp.Expr, centre: float, bounds: Interval) -> exp.Expr:
    """``(argument - centre) * (argument - centre)``, in DOUBLE unless the square is an
    integer measured exactly (at most MAX_EXACT_INTEGER_BOUND), then in BIGINT: an integer
    product beyond its type (2^63, or 2^31 for an INTEGER column) would fail in the
    database, an error that would depend on the data.

    No underflow (``rewriter.underflow``): the argument is 0 or at least its quantum
    (>= 2^-450) in magnitude and the centre a whole number of grid steps (a power of two
    at least that large, or 0), so a non-zero difference is at least 2^-450 in magnitude
    and its square at least 2^-900, a normal double."""
    value: exp.Expr = exp.Paren(this=argument.copy())
    exact = bounds.integer and bounds.upper <= MAX_EXACT_INTEGER_BOUND
    value = exp.cast(value, exp.DataType.Type.BIGINT if exact else exp.DataType.Type.DOUBLE)
    if centre != 0:
        magnitude = abs(centre)
        literal = exp.Literal.number(int(magnitude) if magnitude.is_integer() else repr(magnitude))
        shift = exp.Sub if centre > 0 else exp.Add
        value = exp.Paren(this=shift(this=value, expression=literal))
    return exp.Mul(this=value, expression=value.copy())


def _shifted(bounds: Interval, centre: float) -> Interval:
    return Interval(bounds.lower - centre, bounds.upper - centre, bounds.integer)


SPREAD_AGGREGATES = frozenset(
    {Aggregate.VAR_POP, Aggregate.VAR_SAMP, Aggregate.STDDEV_POP, Aggregate.STDDEV_SAMP}
)
#: Aggregates that count the values of their argument (a COUNT measurement).
COUNTED_AGGREGATES = SPREAD_AGGREGATES | {Aggregate.AVG, Aggregate.COUNT_VALUES}


def _square(bounds: Interval) -> Interval:
    corners = [bounds.lower**2, bounds.upper**2]
    low = 0.0 if bounds.lower <= 0 <= bounds.upper else min(corners)
    return Interval(low, max(corners), bounds.integer)


class _Measure(Protocol):
    def __call__(
        self,
        kind: MeasureKind,
        argument: exp.Expr | None,
        condition: exp.Expr | None,
        bounds: Interval | None,
        *,
        alpha: Fraction | None = None,
        centred: bool = False,
        per_value: bool = False,
    ) -> str: ...
