"""The Plan: SQL to run, the measurements it yields, and how to release them.

A Plan is a pure value made by ``rewriter.planner.plan``. The proxy runs ``plan.sql`` on
the backend, which returns one row per group present (the keys, then one exact integer per
measurement), calls :meth:`Plan.release` with those rows and a noise source, and finally
runs ``plan.post_sql`` over the released relation (post-processing).

With GROUP BY keys found in the data (``selection`` set), each row ends with one more
integer, the group's count of privacy units, and only the groups that pass partition
selection (``rewriter.partition_selection``) are released, in the order of their keys.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

from rewriter.bias import Check, average_hints, check_findings, combined
from rewriter.derived_intervals import DerivedInterval, Noisy, Span, level
from rewriter.mechanisms import DiscreteGaussian, DiscreteLaplace, NoiseSource
from rewriter.no_rows import NoRows
from rewriter.partition_selection import PartitionSelection
from rewriter.passes.aggregates import Aggregate
from rewriter.passes.constants import Constant
from rewriter.passes.group_keys import DomainValue, GroupKey, domain_cells
from rewriter.passes.measurements import MeasureKind, MeasurementSpec, OutputSpec
from rewriter.quantile_selection import QuantileSelection


@dataclass(frozen=True)
class Measurement:
    spec: MeasurementSpec
    mechanism: DiscreteLaplace | DiscreteGaussian | QuantileSelection
    epsilon: float  # the share of the query's epsilon this measurement spends (Laplace)
    rho: float = 0.0  # the share of the query's rho (Gaussian)


@dataclass(frozen=True)
class Accuracy:
    label: str  # the aggregate as written, e.g. COUNT(*)
    half_width_95: float | None  # of the noise, if known in closed form
    note: str | None = None


ReleasedValue = DomainValue | float | int


@dataclass(frozen=True)
class Release:
    """The released relation: keys and noisy aggregates, one row per domain cell."""

    columns: tuple[tuple[str, str], ...]  # (name, DuckDB type)
    rows: tuple[tuple[ReleasedValue, ...], ...]
    accuracy: tuple[Accuracy, ...]
    #: Hints that clamping may have biased an answer (``rewriter.bias.average_hints``).
    warnings: tuple[str, ...] = ()
    #: Per aggregate: flagged as possibly biased (True), checked and not (False), or not
    #: checked (None); see ``rewriter.bias``.
    bias: tuple[bool | None, ...] = ()
    #: What the bias checks found, one sentence each (``SET dpproxy.bias_check = on``).
    checks: tuple[str, ...] = ()
    #: Per row, per aggregate: the 95% span of an average, variance or standard deviation,
    #: from that row's noisy totals (``rewriter.derived_intervals``); None for the others,
    #: whose half-width is the same for every row (``accuracy``). Empty when no aggregate
    #: has one.
    spans: tuple[tuple[Span | None, ...], ...] = ()


class ReleaseError(Exception):
    """The backend's answer does not have the shape the plan expects."""


@dataclass(frozen=True)
class Plan:
    sql: str
    dialect: str
    table: str
    keys: tuple[GroupKey, ...]
    measurements: tuple[Measurement, ...]
    outputs: tuple[OutputSpec, ...]
    post_sql: str  # DuckDB SQL over the relation "released"
    epsilon: float  # what the query costs in pure ε (Laplace; basic composition)
    max_rows_per_unit: int
    max_groups_per_unit: int  # groups one unit can affect (1 without GROUP BY)
    rho: float = 0.0  # what the query costs in zCDP ρ (Gaussian; ρ adds up)
    #: GROUP BY keys from the data: which groups are released (its ε or ρ is one share of
    #: the query's, its δ all of the query's δ); None when every key has a public domain.
    selection: PartitionSelection | None = None
    #: Bias checks (``SET dpproxy.bias_check = on``): their columns follow the measurements
    #: (and partition selection's count); each spends a share of the query's ε or ρ.
    checks: tuple[Check, ...] = ()
    #: With bias checks asked for: what they cannot see in this query (for the NOTICE).
    unchecked: tuple[str, ...] = ()
    #: The constant expressions of ``sql``: the proxy evaluates them on their own before
    #: charging and refuses the query if one fails (``rewriter.passes.constants``).
    constants: tuple[Constant, ...] = ()
    #: The session's TimeZone the query reads its timestamps with time zone in (their
    #: dates, times and literals compared with them: ``rewriter.zones``); None when it
    #: reads none, and its answer does not depend on the zone.
    time_zone: str | None = None
    #: The time the query read CURRENT_DATE, now() … at (``rewriter.passes.current_time``);
    #: None when it reads no clock, and its answer does not depend on the time.
    now: dt.datetime | None = None
    #: With every GROUP BY key from a public domain: the cells released, when WHERE rules
    #: some out by the keys and constants alone (``rewriter.passes.where_cells``); None:
    #: every cell of the domains.
    cells: tuple[tuple[DomainValue, ...], ...] | None = None
    #: The SQL text alone shows that the answer has no rows (``rewriter.no_rows``): the
    #: proxy answers its columns, free, and runs nothing. None for every other query.
    no_rows: NoRows | None = None
    #: The answer is the declared values of the GROUP BY keys' public domains, which the
    #: query asks for alone (``SELECT DISTINCT department``, no aggregate): the proxy
    #: answers them, post-processed, free, and runs nothing (``rewriter.domain_values``).
    domain_values: bool = False

    @property
    def gaussian(self) -> bool:
        return self.rho > 0

    def privacy_loss_delta(self) -> float:
        """The δ of partition selection (0 without it)."""
        return 0.0 if self.selection is None else self.selection.delta()

    def privacy_loss(self) -> float:
        """The sum of the Laplace measurements' maps (pure ε): never more than ``epsilon``."""
        return (
            sum(
                m.mechanism.epsilon()
                for m in self.measurements
                if isinstance(m.mechanism, DiscreteLaplace | QuantileSelection)
            )
            + (0.0 if self.selection is None else self.selection.epsilon())
            + sum(
                c.mechanism.epsilon()
                for c in self.checks
                if isinstance(c.mechanism, DiscreteLaplace)
            )
        )

    def privacy_loss_rho(self) -> float:
        """The sum of the Gaussian measurements' maps (ρ): never more than ``rho``."""
        return (
            sum(
                m.mechanism.rho()
                for m in self.measurements
                if isinstance(m.mechanism, DiscreteGaussian | QuantileSelection)
            )
            + (0.0 if self.selection is None else self.selection.rho())
            + sum(
                c.mechanism.rho() for c in self.checks if isinstance(c.mechanism, DiscreteGaussian)
            )
        )

    @property
    def released_columns(self) -> tuple[tuple[str, str], ...]:
        keys = tuple((k.name, k.sql_type) for k in self.keys)
        return keys + tuple((o.name, _output_type(o, self)) for o in self.outputs)

    def release(self, exact_rows: Sequence[Sequence[object]], noise: NoiseSource) -> Release:
        measured = len(self.keys) + len(self.measurements)
        checked = measured + (self.selection is not None)
        width = checked + len(self.checks)
        exact: dict[tuple[object, ...], list[Total]] = {}
        units: dict[tuple[object, ...], tuple[int, Sequence[object]]] = {}
        concerned = [0] * len(self.checks)  # each check's persons, over all groups
        for row in exact_rows:
            if len(row) != width:
                raise ReleaseError(f"expected {width} values per row, got {len(row)}")
            for i, value in enumerate(row[checked:]):
                concerned[i] += _as_count(value)
            cell = tuple(_canonical(v) for v in row[: len(self.keys)])
            totals = [
                _as_total(v, m)
                for v, m in zip(row[len(self.keys) : measured], self.measurements, strict=True)
            ]
            if self.selection is not None:
                # Merged keys keep the larger unit count: one unit still counts at most 1.
                count, keys = units.get(cell, (0, row[: len(self.keys)]))
                units[cell] = (max(count, _as_int(row[measured])), keys)
            earlier = exact.get(cell)
            if earlier is not None:
                # Keys that differ in the database but not here (-0.0 and 0.0; decimals
                # beyond a double's precision): one released group. Adding counts and
                # sums keeps each unit's contribution within its bound (L1, and L2 below
                # it); a count of units keeps the larger one, as partition selection does:
                # added, one unit in g merged groups would move the cell by g, beyond the
                # L2 bound of sqrt(groups) that Gaussian noise is calibrated to.
                totals = [
                    _merge(a, b, m)
                    for a, b, m in zip(earlier, totals, self.measurements, strict=True)
                ]
            exact[cell] = totals
        released = []
        zeros = [_as_total(None, m) for m in self.measurements]
        if self.selection is None:
            public = domain_cells(self.keys) if self.cells is None else self.cells
            cells = [(tuple(_canonical(v) for v in c), c) for c in public]
        else:
            cells = self._selected(self.selection, units, noise)
            exact = {cell: exact[cell] for cell, _ in cells}
        per_cell = [exact.pop(lookup, zeros) for lookup, _ in cells]
        # One measurement at a time over all cells: its noise drawn in one call.
        columns = [
            _release_column(m, [totals[i] for totals in per_cell], noise)
            for i, m in enumerate(self.measurements)
        ]
        derived = tuple(self._derived(o) for o in self.outputs)
        spans = []
        for index, (_, cell) in enumerate(cells):
            noisy = {
                m.spec.key: column[index]
                for m, column in zip(self.measurements, columns, strict=True)
            }
            values = tuple(self._value(o, noisy) for o in self.outputs)
            released.append((*cell, *values))
            spans.append(
                tuple(
                    None if d is None else d.span(noisy, float(v))
                    for d, v in zip(derived, values, strict=True)
                )
            )
        # Groups left in ``exact`` are values the database found in the domain but Python's
        # equality does not (a collation, a type the catalog did not foresee): they are
        # not released. Failing here would fail the query only when such a row exists,
        # after its charge: an error that would reveal it.
        rows = tuple(released)
        found = check_findings(self.checks, concerned, len(self.outputs), noise)
        hints, hinted = average_hints(self.outputs, len(self.keys), rows, found.flags)
        return Release(
            self.released_columns,
            rows,
            self.accuracy(),
            hints,
            combined(found.flags, hinted),
            found.sentences,
            tuple(spans) if any(d is not None for d in derived) else (),
        )

    def _selected(
        self,
        selection: PartitionSelection,
        units: dict[tuple[object, ...], tuple[int, Sequence[object]]],
        noise: NoiseSource,
    ) -> list[tuple[tuple[object, ...], tuple[DomainValue, ...]]]:
        """The groups whose noisy unit count passes the threshold, in the order of their
        keys (not the database's): (lookup key, released key values)."""
        chosen = []
        cells = sorted(units, key=_order)
        kept = selection.keep_many([units[cell][0] for cell in cells], noise)
        for cell, keep in zip(cells, kept, strict=True):
            if keep:
                raw = units[cell][1]
                values = tuple(_released_key(v, k) for v, k in zip(raw, self.keys, strict=True))
                chosen.append((cell, values))
        return chosen

    def _value(self, output: OutputSpec, noisy: dict[str, int]) -> int | float:
        if output.aggregate in (
            Aggregate.COUNT_ROWS,
            Aggregate.COUNT_VALUES,
            Aggregate.COUNT_UNITS,
        ):
            return max(0, noisy[output.numerator])  # post-processing: counts are not negative
        if output.aggregate is Aggregate.QUANTILE:
            bins = self._measurement(output.numerator).spec.bins
            if bins is None:
                raise ReleaseError(f"measurement {output.numerator} has no bins")
            return bins.midpoint(noisy[output.numerator])  # the selected bin's midpoint
        spec = self._measurement(output.numerator).spec
        grid = spec.grid
        if grid is None:
            raise ReleaseError(f"measurement {output.numerator} has no grid")
        total = noisy[output.numerator] * grid.step
        if output.aggregate is Aggregate.SUM:
            steps = noisy[output.numerator]
            if output.denominator is not None:  # c·n + Σ(x - c), in grid steps
                steps += spec.centre * noisy[output.denominator]
            # Post-processing: a sum of values clamped to a range of one sign has that
            # sign (values on [0, u] never sum below 0), as counts are never negative.
            if grid.lower >= 0:
                steps = max(steps, 0)
            elif grid.upper <= 0:
                steps = min(steps, 0)
            total = steps * grid.step
            return int(total) if grid.step == 1.0 else float(total)
        if output.denominator is None or output.bounds is None:
            raise ReleaseError("an average needs a count and bounds")
        count = max(noisy[output.denominator], 1)
        # Post-processing: the centre plus the noisy centred sum over the noisy count, kept
        # within the expression's bounds (measurements: Σ(x - c) for averages).
        centre = spec.centre * grid.step
        low, high = output.bounds.lower - centre, output.bounds.upper - centre
        offset = min(high, max(low, total / count))  # the mean's distance from the centre
        if output.aggregate is Aggregate.AVG:
            return centre + offset
        return self._spread(output, noisy, count, offset)

    def _spread(
        self, output: OutputSpec, noisy: dict[str, int], count: int, offset: float
    ) -> float:
        """Variance or standard deviation from noisy Σ(x - c), Σ(x - c)² and n
        (post-processing; ``offset`` is the mean's distance from the centre c)."""
        if output.squares is None or output.bounds is None:
            raise ReleaseError("a variance needs a sum of squares")
        grid = self._measurement(output.squares).spec.grid
        if grid is None:
            raise ReleaseError("the sum of squares has no grid")
        squares = noisy[output.squares] * grid.step
        largest = ((output.bounds.upper - output.bounds.lower) / 2) ** 2
        variance = min(largest, max(0.0, squares / count - offset * offset))
        if output.aggregate in (Aggregate.VAR_SAMP, Aggregate.STDDEV_SAMP):
            variance = min(largest * 2, variance * count / (count - 1)) if count > 1 else 0.0
        if output.aggregate in (Aggregate.STDDEV_POP, Aggregate.STDDEV_SAMP):
            return math.sqrt(variance)
        return variance

    def _measurement(self, key: str) -> Measurement:
        for m in self.measurements:
            if m.spec.key == key:
                return m
        raise ReleaseError(f"no measurement {key}")

    def _derived(self, output: OutputSpec) -> DerivedInterval | None:
        """How to bound an average's, variance's or standard deviation's noise from its
        noisy totals, each at its share of the 5% (None for the other aggregates)."""
        if output.aggregate in (Aggregate.SUM, Aggregate.QUANTILE) or output.denominator is None:
            return None
        if output.bounds is None:
            raise ReleaseError("an average needs bounds")
        keys = (output.numerator, output.denominator, output.squares)
        used = [key for key in keys if key is not None]
        totals = []
        for key in used:
            measured = self._measurement(key)
            if isinstance(measured.mechanism, QuantileSelection):
                raise ReleaseError(f"measurement {key} is not a noisy total")
            step = 1.0 if measured.spec.grid is None else measured.spec.grid.step
            totals.append(Noisy(key, step, measured.mechanism.half_width(level(len(used)))))
        centre = self._measurement(output.numerator).spec.centre * totals[0].step
        squares = totals[2] if len(totals) > 2 else None
        return DerivedInterval(
            output.aggregate, totals[0], totals[1], squares, centre, output.bounds
        )

    def accuracy(self) -> tuple[Accuracy, ...]:
        """Per output, the 95% half-width of its noise (known before any data is read)."""
        result = []
        for output in self.outputs:
            measured = self._measurement(output.numerator)
            if isinstance(measured.mechanism, QuantileSelection):
                result.append(Accuracy(output.label, None, _quantile_note(measured)))
                continue
            width = float(measured.mechanism.half_width())
            if output.aggregate is Aggregate.SUM and output.denominator is not None:
                result.append(Accuracy(output.label, self._centred_sum_width(output)))
            elif output.aggregate is Aggregate.AVG:
                result.append(Accuracy(output.label, None, _PER_GROUP + "sum and count"))
            elif output.squares is not None:
                result.append(Accuracy(output.label, None, _PER_GROUP + "Σx, Σx² and count"))
            elif measured.spec.grid is not None:
                result.append(Accuracy(output.label, width * measured.spec.grid.step))
            else:
                result.append(Accuracy(output.label, width))
        return tuple(result)

    def _centred_sum_width(self, output: OutputSpec) -> float:
        """A 95% half-width for c·n + Σ(x - c): each noise's 97.5% half-width, added (a
        union bound: both hold together with probability at least 95%)."""
        if output.denominator is None:
            raise ReleaseError("a sum from a centred sum needs its count")
        centred = self._measurement(output.numerator)
        count = self._measurement(output.denominator)
        grid = centred.spec.grid
        if grid is None or isinstance(centred.mechanism, QuantileSelection):
            raise ReleaseError("a centred sum needs a grid and a noisy total")
        if isinstance(count.mechanism, QuantileSelection):
            raise ReleaseError("a count needs a noisy total")
        steps = centred.mechanism.half_width(0.975) + abs(
            centred.spec.centre
        ) * count.mechanism.half_width(0.975)
        return float(steps) * grid.step


#: An average's, variance's or standard deviation's note when no group is released (each
#: released group has its own interval: ``Release.spans``).
_PER_GROUP = "an interval per group, from its noisy "


def _output_type(output: OutputSpec, plan: Plan) -> str:
    if output.aggregate in (Aggregate.COUNT_ROWS, Aggregate.COUNT_VALUES, Aggregate.COUNT_UNITS):
        return "BIGINT"
    grid = plan._measurement(output.numerator).spec.grid
    if output.aggregate is Aggregate.SUM and grid is not None and grid.step == 1.0:
        return "BIGINT"
    return "DOUBLE"


Total = int | tuple[int, ...]  # one exact total, or the counts per bin of a quantile


def _as_total(raw: object, measurement: Measurement) -> Total:
    """A measurement's exact value from the backend (None: a group with no rows)."""
    bins = measurement.spec.bins
    if bins is None:
        return _as_int(raw)
    if raw is None:
        return (0,) * bins.count
    if not isinstance(raw, list | tuple) or len(raw) != bins.count:
        raise ReleaseError(f"expected {bins.count} counts per bin, got {raw!r}")
    counts = tuple(_as_int(v) for v in raw)
    if any(c < 0 for c in counts):
        raise ReleaseError("a count per bin is negative")
    return counts


def _merge(a: Total, b: Total, measurement: Measurement) -> Total:
    if measurement.spec.kind is MeasureKind.UNITS and isinstance(a, int) and isinstance(b, int):
        return max(a, b)
    return _add(a, b)


def _add(a: Total, b: Total) -> Total:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b):
        return tuple(x + y for x, y in zip(a, b, strict=True))
    raise ReleaseError("totals of different shapes")


def _release_column(
    measurement: Measurement, totals: Sequence[Total], noise: NoiseSource
) -> list[int]:
    """``_release`` of each of ``totals`` (one per cell), counts and sums with their draws
    made in one call."""
    mechanism = measurement.mechanism
    if isinstance(mechanism, QuantileSelection):
        return [_release(measurement, total, noise) for total in totals]
    plain = [total for total in totals if not isinstance(total, tuple)]
    if len(plain) != len(totals):
        raise ReleaseError("expected one total, got counts per bin")
    return mechanism.release_many(plain, noise)


def _release(measurement: Measurement, total: Total, noise: NoiseSource) -> int:
    """The noisy total, or for a quantile the index of the selected bin."""
    mechanism = measurement.mechanism
    if isinstance(mechanism, QuantileSelection):
        if not isinstance(total, tuple):
            raise ReleaseError("a quantile needs counts per bin")
        try:
            return mechanism.release(total, noise)
        except ValueError as error:
            raise ReleaseError(str(error)) from None
    if isinstance(total, tuple):
        raise ReleaseError("expected one total, got counts per bin")
    return mechanism.release(total, noise)


def _quantile_note(measured: Measurement) -> str:
    bins = measured.spec.bins
    if bins is None:
        raise ReleaseError("a quantile measurement has no bins")
    low, high = bins.lower, bins.lower + bins.count * bins.width
    if bins.width == 1.0 and (low + 0.5).is_integer():
        chosen = f"one of the {bins.count} integers from {low + 0.5:g} to {high - 0.5:g}"
    else:
        chosen = (
            f"the midpoint of one of {bins.count} bins of width {bins.width:g} "
            f"over [{low:g}, {high:g}]"
        )
    return f"{chosen}, selected by the exponential mechanism (no closed-form interval)"


def _order(cell: tuple[object, ...]) -> tuple[tuple[bool, bool, str, object], ...]:
    """A sort key for canonical cells: NULL last, NaN just before it, the rest by type and
    value. A total order: with NaN compared as a number (never less, never greater), the
    order of the released groups would follow the database's rows, unreleased groups'
    included."""

    def rank(v: object) -> tuple[bool, bool, str, object]:
        nan = isinstance(v, float) and math.isnan(v)
        # ints and floats by value together (a whole double is released as an int).
        kind = (
            "number" if isinstance(v, int | float) and not isinstance(v, bool) else type(v).__name__
        )
        return (v is None, nan, kind, 0 if v is None or nan else v)

    return tuple(rank(v) for v in cell)


def _released_key(value: object, key: GroupKey) -> DomainValue:
    """A key value from the data, as released (in the form of the key's released type)."""
    if value is None:
        return None
    if key.sql_type == "BOOLEAN" and isinstance(value, bool):
        return value
    if key.sql_type in ("BIGINT", "DOUBLE") and isinstance(value, int | float | Decimal):
        if key.sql_type == "BIGINT" and isinstance(value, int) and not isinstance(value, bool):
            return value
        return _one_spelling(float(value))  # ±infinity stay as they are
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def _one_spelling(value: float) -> float:
    """-0.0 as 0.0, every NaN (DuckDB's -nan too) as one: the database returns whichever
    value of a group it met first (the bounded SQL maps them too: ``data_keys``)."""
    return _NAN if math.isnan(value) else value + 0.0


#: The one NaN of keys: one object, so that cells holding it are equal and hash alike.
_NAN = math.nan


def _canonical(value: object) -> object:
    """A key value in a form that compares equal across engines and the policy's domain.

    Whole numbers become exact ints (1, 1.0 and Decimal('1') are one key; 2^60 and 2^60 + 1
    stay two: as floats they would merge into one released cell, where one person could
    count several times); other numbers become floats (-0.0 is 0; every NaN the one
    ``_NAN``)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, Decimal):
        whole = value.is_finite() and value == value.to_integral_value()
        return int(value) if whole else _one_spelling(float(value))
    if isinstance(value, float):
        return int(value) if value.is_integer() else _one_spelling(value)  # NaN, ±inf
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return str(value)


def _as_count(raw: object) -> int:
    count = _as_int(raw)
    if count < 0:
        raise ReleaseError("a bias check's count is negative")  # its value stays private
    return count


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
