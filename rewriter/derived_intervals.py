"""95% intervals of the noise of values computed from several noisy totals: AVG(x) from
Σ(x − c) and the count, VAR…/STDDEV…(x) from Σ(x − c), Σ(x − c)² and the count.

Post-processing only (free): computed from the released noisy totals and the known noise
distributions, never from the exact totals. With m totals, each total's noise is within
its half-width at the level 1 − 5%/m (``level``) except with probability at most 5%/m, so
all m are within theirs at once with probability at least 95% (a union bound; the noises
are independent, so it is in fact at least (1 − 5%/m)^m, 95.06% for m = 2). On that event
each exact total lies within its noisy value ± its half-width, and the noise-free answer
(the same formula, clamps included, applied to the exact totals of the bounded query) lies
within the range the formula takes over that box of totals. So, for each released group:

    P(noise-free value ∈ [lower, upper]) ≥ 95%,

whatever the data (partition selection draws its own, independent noise, so the bound
holds for the groups it keeps too). The range is computed exactly: the formulas are
monotone in some totals and piecewise quadratic in 1/count (``_spread``). When the count's
interval reaches below 1 (below 2 for a sample variance), the group may hold no value at
all within the noise, nothing bounds the answer's noise but the declared bounds, and the
span is unbounded (−∞, ∞): the answer is unreliable. The ± stated for a group is the
larger side, max(value − lower, upper − value), so it covers both sides.

The bound is conservative: in the worst case (one total's noise dominates the others') the
coverage is about 1 − 5%/m (97.5% for an average), more when the noises weigh alike;
``tests/rewriter/test_derived_intervals.py`` measures it, and an interval 30% narrower
falls below 95% where one noise dominates.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from rewriter.intervals import Interval
from rewriter.passes.aggregates import Aggregate

#: The probability that the noise-free value lies within the stated span.
COVERAGE = 0.95


def level(totals: int) -> float:
    """The level of each total's half-width when ``totals`` totals share the 5%."""
    return 1.0 - (1.0 - COVERAGE) / totals


class Span(NamedTuple):
    """A released value and where its noise-free value lies with probability ≥ 95% (a
    named tuple: one per group and aggregate, made quickly)."""

    value: float
    lower: float  # -inf: unbounded (unreliable)
    upper: float  # inf: unbounded

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.lower) and math.isfinite(self.upper)

    @property
    def half_width(self) -> float:
        """The ± around the value that covers the span on both sides (∞ when unbounded)."""
        if not self.bounded:
            return math.inf
        return max(0.0, self.value - self.lower, self.upper - self.value)


@dataclass(frozen=True)
class Noisy:
    """One noisy total a value is computed from."""

    key: str  # the measurement's key among the noisy totals
    step: float  # the value of one unit of the total (its grid step; 1 for a count)
    width: int  # the half-width of its noise at ``level(totals)``, in units


@dataclass(frozen=True)
class DerivedInterval:
    """How ``rewriter.plan.Plan`` computes one output from its noisy totals, to bound it."""

    aggregate: Aggregate  # AVG, VAR_POP, VAR_SAMP, STDDEV_POP or STDDEV_SAMP
    centred: Noisy  # Σ(x − c)
    count: Noisy
    squares: Noisy | None  # Σ(x − c)², for a variance or standard deviation
    centre: float  # c
    bounds: Interval  # the declared bounds of x

    def span(self, noisy: Mapping[str, int], value: float) -> Span:
        """The span of the released ``value`` computed from the ``noisy`` totals."""
        count, width = noisy[self.count.key], self.count.width
        low, high = float(count - width), float(count + width)
        sample = self.aggregate in (Aggregate.VAR_SAMP, Aggregate.STDDEV_SAMP)
        if low < (2 if sample else 1):  # the group may hold no value (or one): no bound
            return Span(value, -math.inf, math.inf)
        centred = _box(noisy, self.centred)
        # The mean's distance from c is kept within the bounds (rewriter.plan).
        near, far = self.bounds.lower - self.centre, self.bounds.upper - self.centre
        if self.squares is None:
            lower, upper = ratio_range(centred, (low, high))
            return Span(
                value,
                self.centre + min(far, max(near, lower)),
                self.centre + min(far, max(near, upper)),
            )
        largest = ((self.bounds.upper - self.bounds.lower) / 2) ** 2
        lower, upper = _spread(_box(noisy, self.squares), centred, (low, high), (near, far))
        lower, upper = min(largest, max(0.0, lower)), min(largest, max(0.0, upper))
        if sample:  # n/(n − 1) is largest at the smallest count
            lower, upper = lower * high / (high - 1), min(2 * largest, upper * low / (low - 1))
        if self.aggregate in (Aggregate.STDDEV_POP, Aggregate.STDDEV_SAMP):
            lower, upper = math.sqrt(lower), math.sqrt(upper)
        return Span(value, lower, upper)


def _box(noisy: Mapping[str, int], total: Noisy) -> tuple[float, float]:
    """Where the exact total lies when its noise is within its half-width."""
    value = noisy[total.key]
    return (value - total.width) * total.step, (value + total.width) * total.step


def ratio_range(
    numerator: tuple[float, float], denominator: tuple[float, float]
) -> tuple[float, float]:
    """The range of N / D over N in ``numerator`` and D in ``denominator`` (D > 0): the
    ratio is monotone in each, so it is reached at the corners."""
    n1, n2 = numerator
    d1, d2 = denominator
    if not 0 < d1 <= d2 or n1 > n2:
        raise ValueError("a ratio's range needs a positive denominator and ordered ends")
    return (n1 / d1 if n1 < 0 else n1 / d2), (n2 / d2 if n2 < 0 else n2 / d1)


def _spread(
    squares: tuple[float, float],
    centred: tuple[float, float],
    count: tuple[float, float],
    clamp: tuple[float, float],
) -> tuple[float, float]:
    """The range of Q/n − h(S/n)² over the box (h: the clamp of the mean's distance from c
    to ``clamp``), before the variance's own clamp to [0, largest].

    With u = 1/n in [1/n₂, 1/n₁]: the value grows with Q (u > 0), so the maximum takes
    Q₂ and the minimum Q₁. For a given u, h(S·u)² is smallest at the S closest to 0 (0 if
    the range holds 0) and largest at one end of the range of S (h is monotone). What is
    left is f(u) = Q·u − min(a·u, cap)² for an a ≥ 0 and the clamp's side cap: a concave
    quadratic up to u = cap/a, linear beyond. Its minimum is at u₁, u₂ or the break, its
    maximum there or at the quadratic's peak Q/(2a²); each candidate is evaluated within
    [u₁, u₂], so the extremes are exact."""
    near, far = clamp
    if not near <= 0 <= far:  # bounds narrower than a grid step: only the clamps bound it
        return -math.inf, math.inf
    u1, u2 = 1 / count[1], 1 / count[0]
    s1, s2 = centred
    if s1 > 0:
        top = _along(squares[1], s1, far, u1, u2)[1]
    elif s2 < 0:
        top = _along(squares[1], -s2, -near, u1, u2)[1]
    else:
        top = _along(squares[1], 0.0, 0.0, u1, u2)[1]
    bottom = min(
        _along(squares[0], abs(s1), far if s1 >= 0 else -near, u1, u2)[0],
        _along(squares[0], abs(s2), far if s2 >= 0 else -near, u1, u2)[0],
    )
    return bottom, top


def _along(q: float, a: float, cap: float, u1: float, u2: float) -> tuple[float, float]:
    """The least and greatest of f(u) = q·u − min(a·u, cap)² at u₁, u₂, the break cap/a
    and the peak q/(2a²), each taken within [u₁, u₂]."""
    low = high = q * u1 - (a * u1 if a * u1 < cap else cap) ** 2
    for candidate in (u2, cap / a, q / (2 * a * a)) if a > 0 else (u2,):
        u = u1 if candidate < u1 else u2 if candidate > u2 else candidate
        value = q * u - (a * u if a * u < cap else cap) ** 2
        if value < low:
            low = value
        elif value > high:
            high = value
    return low, high
