"""Quantiles by the exponential mechanism over a fixed grid of bins, and its privacy map.

The database returns, per group, how many (bounded) rows fall in each bin of a grid fixed
by the declared bounds (``rewriter.passes.measurements.Bins``). With n rows, of which
``below(b)`` lie in lower bins and ``count(b)`` in bin b, the rows of bin b hold the ranks
from below(b) to below(b) + count(b) (in the sorted order); the α-quantile is at rank α·n.
The score of bin b for α = p/q (in lowest terms) is q times the distance between the two,
an exact integer (smaller is better):

    score(b) = max(0,  p·n - q·(below(b) + count(b)),  q·below(b) - p·n)

It is 0 for the bin holding the α-quantile. For an empty bin it equals the score OpenDP's
``make_quantile_score_candidates`` gives a candidate point, |(q - p)·below - p·above|;
for a bin with rows it is never larger (OpenDP's puts the rows of the candidate itself on
neither side, which favours a neighbouring bin when many rows share one).

Adding or removing one row changes n by 1 and below(b) or count(b) by at most 1: each of
the three terms moves by at most max(p, q - p) (a row below bin b: p - q in both; in it:
p - q and p; above it: p), and so does their maximum. A privacy unit has at most
``max_rows_per_unit`` rows in a group, so the scores of a group move by at most
Δ = max_rows_per_unit · max(p, q - p) in L∞, up or down (the scores are not monotonic).

The bin is selected by OpenDP's ``make_noisy_max`` (negated: the lowest score wins) with
noise of ``scale`` added to each score:

- pure ε (laplace requests): exponential noise, report-noisy-max that equals
  permute-and-flip (McKenna and Sheldon 2020; Ding et al. 2021), ε = 2Δ / scale per group;
- zCDP (gaussian requests): Gumbel noise, which is exactly the exponential mechanism
  (P(b) ∝ exp(-score(b) / scale)); it is ε-DP for ε = 2Δ / scale and therefore ε²/8-zCDP
  (bounded range, Cesar and Rogers 2021): ρ = (2Δ / scale)² / 8 per group.

A unit reaches at most ``groups`` groups, each group's selection is a separate mechanism, so
the maps add up over them (basic composition for ε, additivity for ρ). Both maps are
OpenDP's own (``Measurement.map``), multiplied by ``groups``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any, Protocol

from rewriter.opendp_library import opendp

#: Scores are i64 inside OpenDP; a count beyond this would overflow them.
MAX_SCORE = 2**62


class SelectionSource(Protocol):
    """Selects the index of the lowest of noisy integer scores."""

    def noisy_min(self, scores: Sequence[int], scale: float, gumbel: bool) -> int: ...


@lru_cache(maxsize=256)
def noisy_min_measurement(scale: float, gumbel: bool) -> Any:
    """OpenDP report-noisy-min over i64 scores of L∞ sensitivity d_in: Gumbel noise under
    zCDP (the exponential mechanism), exponential noise under pure DP."""
    dp = opendp()
    space = dp.vector_domain(dp.atom_domain(T="i64")), dp.linf_distance(T="i64")
    measure = dp.zero_concentrated_divergence() if gumbel else dp.max_divergence()
    return dp.m.make_noisy_max(*space, measure, scale=scale, negate=True)


def quantile_scores(counts: Sequence[int], alpha: Fraction) -> list[int]:
    """score(b) = max(0, p·n - q·(below + count), q·below - p·n) for α = p/q: q times the
    distance from rank α·n to the ranks bin b holds. The lowest is the best."""
    p, q = alpha.numerator, alpha.denominator
    target = p * sum(counts)
    scores = []
    below = 0
    for count in counts:
        scores.append(max(0, target - q * (below + count), q * below - target))
        below += count
    return scores


def score_sensitivity(rows_per_unit: int, alpha: Fraction) -> int:
    """How much one unit (at most ``rows_per_unit`` rows in a group) moves any score."""
    p, q = alpha.numerator, alpha.denominator
    return rows_per_unit * max(p, q - p)


@dataclass(frozen=True)
class QuantileSelection:
    """The exponential mechanism selecting the α-quantile's bin in each of several groups,
    of which one unit reaches at most ``groups``, with at most ``rows_per_unit`` rows each."""

    alpha: Fraction
    rows_per_unit: int
    scale: float
    groups: int = 1
    gumbel: bool = False  # zCDP (gaussian requests); else pure ε

    @property
    def sensitivity(self) -> int:
        """L∞ sensitivity of one group's scores."""
        return score_sensitivity(self.rows_per_unit, self.alpha)

    @classmethod
    def for_epsilon(
        cls, alpha: Fraction, rows_per_unit: int, epsilon: float, groups: int = 1
    ) -> QuantileSelection:
        """The smallest scale (up to float rounding) whose map stays within epsilon:
        scale = 2Δ·groups / ε, nudged up by ulps if OpenDP rounds over."""
        _check(rows_per_unit, groups, epsilon)
        return cls(
            alpha, rows_per_unit, _scale(alpha, rows_per_unit, epsilon, groups, False), groups
        )

    @classmethod
    def for_rho(
        cls, alpha: Fraction, rows_per_unit: int, rho: float, groups: int = 1
    ) -> QuantileSelection:
        """The smallest scale whose map stays within rho: (2Δ/scale)²/8 = ρ/groups."""
        _check(rows_per_unit, groups, rho)
        scale = _scale(alpha, rows_per_unit, rho, groups, True)
        return cls(alpha, rows_per_unit, scale, groups, gumbel=True)

    def epsilon(self) -> float:
        """Pure ε of the selections in all groups a unit reaches (0 under zCDP)."""
        if self.gumbel:
            return 0.0
        return float(noisy_min_measurement(self.scale, False).map(self.sensitivity)) * self.groups

    def rho(self) -> float:
        """zCDP ρ of the selections in all groups a unit reaches (0 under pure ε)."""
        if not self.gumbel:
            return 0.0
        return float(noisy_min_measurement(self.scale, True).map(self.sensitivity)) * self.groups

    def release(self, counts: Sequence[int], noise: SelectionSource) -> int:
        """The index of the selected bin."""
        if any(c < 0 for c in counts) or sum(counts) * self.alpha.denominator > MAX_SCORE:
            raise ValueError("bin counts out of range")
        scores = quantile_scores(counts, self.alpha)
        return noise.noisy_min(scores, self.scale, self.gumbel)


@lru_cache(maxsize=1024, typed=True)  # typed: 1 and 1.0 are distinct keys
def _scale(alpha: Fraction, rows_per_unit: int, budget: float, groups: int, gumbel: bool) -> float:
    """QuantileSelection's smallest scale whose privacy map stays within ``budget`` (ε, or ρ
    with ``gumbel``), nudged up by ulps if OpenDP rounds over. A pure function of its
    arguments (OpenDP's maps are deterministic), so computed once per arguments."""
    sensitivity = max(score_sensitivity(rows_per_unit, alpha), 1)
    if gumbel:
        scale = sensitivity / math.sqrt(2 * budget / groups)
    else:
        scale = 2 * sensitivity * groups / budget
    made = QuantileSelection(alpha, rows_per_unit, scale, groups, gumbel=gumbel)
    while (made.rho() if gumbel else made.epsilon()) > budget:
        scale = math.nextafter(scale, math.inf)
        made = QuantileSelection(alpha, rows_per_unit, scale, groups, gumbel=gumbel)
    return scale


def _check(rows_per_unit: int, groups: int, budget: float) -> None:
    if rows_per_unit < 1 or groups < 1:
        raise ValueError("rows per unit and groups must be at least 1")
    if not (math.isfinite(budget) and budget > 0):
        raise ValueError("the budget must be a positive finite number")
