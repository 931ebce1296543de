"""Partition selection: which GROUP BY keys found in the data may be released.

A group whose key does not come from a public domain is released only if its noisy count
of distinct privacy units reaches a threshold (Korolova et al. 2009; Wilson et al. 2020;
Rogers 2023 for the unknown-domain analysis): ``units + Z >= threshold``, where ``Z`` is
discrete Laplace noise (pure-ε queries) or discrete Gaussian noise (zCDP queries).

Each privacy unit counts 1 in each of at most ``groups`` (= max_groups_per_unit) groups.
Between two neighbouring databases (one unit's rows added or removed):

- groups present in both change their unit count by at most 1 each, in at most
  ``groups`` of them: L1 = ``groups``, L2² = ``groups``. The noise's privacy map gives the
  ε (discrete Laplace of scale ``t``: ε = groups / t) or ρ (discrete Gaussian of scale σ:
  ρ = groups / (2σ²)), computed by OpenDP like every other mechanism of dpproxy;
- groups present in only one of them hold that unit alone: their count is 1, and each is
  released with probability P(Z >= threshold - 1). That is the δ: δ = groups · P(Z >=
  threshold - 1) (a union bound over the unit's groups), computed here in closed form:

  * discrete Laplace, scale t, m >= 1:  P(Z >= m) = e^(-m/t) / (1 + e^(-1/t));
  * discrete Gaussian, scale σ:  P(Z >= m) = Σ_{x>=m} e^(-x²/2σ²) / Σ_x e^(-x²/2σ²),
    summed exactly (in floating point, far into the tail) and rounded up.

The threshold is the smallest integer (at least 2) whose δ is within the δ the query may
spend. OpenDP 0.16's ``make_laplace_threshold`` and ``make_gaussian_threshold`` release a
count when it is *at least* the threshold but compute δ from the tail strictly above it,
understating δ (opendp/opendp#2922): dpproxy therefore uses OpenDP for the noise and the
ε/ρ maps only, and computes δ itself (tests/rewriter/test_selection.py measures it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from rewriter.errors import Rejected
from rewriter.mechanisms import DiscreteGaussian, DiscreteLaplace, NoiseSource

#: Relative safety margin on the floating-point δ (rounded up).
_MARGIN = 1e-9
#: A group needs a noisy unit count of at least this much to be considered at all.
MIN_THRESHOLD = 2
MAX_THRESHOLD = 2**62
#: The largest noise scale partition selection is run with: beyond it (an ε below about
#: 1e-5 per group) no group of fewer than about a million persons could pass the
#: threshold, and the exact tail of a discrete Gaussian would need tens of millions of
#: terms (memory and time before any charge: a query at ε = 1e-9 took hours).
MAX_SCALE = 1e5


@dataclass(frozen=True)
class PartitionSelection:
    """Keep a group when its noisy unit count reaches ``threshold``.

    ``noise``: discrete Laplace of L1 sensitivity ``groups`` (its ``epsilon()`` is the
    selection's ε) or discrete Gaussian of sensitivity 1 over ``groups`` totals (its
    ``rho()`` is the selection's ρ). ``delta()`` is the selection's δ.
    """

    noise: DiscreteLaplace | DiscreteGaussian
    groups: int
    threshold: int

    @classmethod
    def laplace(cls, groups: int, epsilon: float, delta: float) -> PartitionSelection:
        """The smallest threshold for ``epsilon`` and ``delta`` with Laplace noise."""
        _check(groups, delta)
        return cls._with_threshold(DiscreteLaplace.for_epsilon(groups, epsilon), groups, delta)

    @classmethod
    def gaussian(cls, groups: int, rho: float, delta: float) -> PartitionSelection:
        """The smallest threshold for ``rho`` and ``delta`` with Gaussian noise."""
        _check(groups, delta)
        return cls._with_threshold(DiscreteGaussian.for_rho(1, rho, groups), groups, delta)

    @classmethod
    def _with_threshold(
        cls, noise: DiscreteLaplace | DiscreteGaussian, groups: int, delta: float
    ) -> PartitionSelection:
        gaussian = isinstance(noise, DiscreteGaussian)
        if noise.scale > MAX_SCALE:
            raise Rejected(
                f"keys from the data at this ε would need a noise of scale {noise.scale:.3g} "
                "on each group's count of persons: no group could be released",
                sqlstate="22023",
                hint="raise dpproxy.epsilon, or group by keys with a public domain",
            )
        # A first guess from the continuous tail, then the exact search around it.
        if gaussian:
            # (the lower tail: 1 - δ/groups rounds to 1 for δ/groups below 1e-16)
            guess = -noise.scale * NormalDist().inv_cdf(max(1e-300, min(0.5, delta / groups)))
        else:
            guess = noise.scale * math.log(groups / delta)
        threshold = max(MIN_THRESHOLD, min(MAX_THRESHOLD, math.ceil(guess) + 1))

        def fits(candidate: int) -> bool:
            return selection_delta(noise.scale, gaussian, groups, candidate) <= delta

        # fits() only gets truer as the threshold grows: find one that fits (doubling the
        # step), then the smallest by bisection, in a few dozen evaluations whatever ε.
        low, step = threshold - 1, 1
        while not fits(threshold):
            if threshold >= MAX_THRESHOLD:
                raise ValueError("no threshold reaches so small a δ")
            low, threshold, step = threshold, min(MAX_THRESHOLD, threshold + step), step * 2
        if low < MIN_THRESHOLD or fits(low):
            low = MIN_THRESHOLD - 1  # the guess was high: search all the way down
        while threshold - low > 1:
            middle = (low + threshold) // 2
            if middle >= MIN_THRESHOLD and fits(middle):
                threshold = middle
            else:
                low = middle
        return cls(noise, groups, threshold)

    @property
    def zcdp(self) -> bool:
        """Whether the noise is discrete Gaussian (the selection spends ρ, not ε)."""
        return isinstance(self.noise, DiscreteGaussian)

    def epsilon(self) -> float:
        """The selection's ε (Laplace; 0 for Gaussian)."""
        return self.noise.epsilon() if isinstance(self.noise, DiscreteLaplace) else 0.0

    def rho(self) -> float:
        """The selection's ρ (Gaussian; 0 for Laplace)."""
        return self.noise.rho() if isinstance(self.noise, DiscreteGaussian) else 0.0

    def delta(self) -> float:
        """The probability bound that one unit's groups of its own are released."""
        return selection_delta(self.noise.scale, self.zcdp, self.groups, self.threshold)

    def keep(self, units: int, noise: NoiseSource) -> bool:
        """Draw the noise for one group's unit count and compare it with the threshold."""
        return self.noise.release(units, noise) >= self.threshold

    def keep_many(self, units: Sequence[int], noise: NoiseSource) -> list[bool]:
        """``keep`` for each group's unit count, the draws made in one call."""
        return [noisy >= self.threshold for noisy in self.noise.release_many(units, noise)]


def _check(groups: int, delta: float) -> None:
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError("groups must be a whole number of at least 1")
    if not (math.isfinite(delta) and 0 < delta < 1):
        raise ValueError("partition selection needs 0 < δ < 1")


def selection_delta(scale: float, gaussian: bool, groups: int, threshold: int) -> float:
    """groups · P(Z >= threshold - 1), rounded up, at most 1."""
    tail = gaussian_tail(scale, threshold - 1) if gaussian else laplace_tail(scale, threshold - 1)
    return min(1.0, groups * tail * (1 + _MARGIN))


def laplace_tail(scale: float, m: int) -> float:
    """P(Z >= m) for Z discrete Laplace of ``scale`` (P(Z = z) ∝ e^(-|z|/scale))."""
    if m <= 0:
        return 1.0 - laplace_tail(scale, 1 - m)
    return math.exp(-m / scale) / (1 + math.exp(-1 / scale))


def gaussian_tail(scale: float, m: int) -> float:
    """P(Z >= m) for Z discrete Gaussian of ``scale`` (P(Z = z) ∝ e^(-z²/2σ²)), summed
    over every term above 1e-300 of the largest (numpy's pairwise sums: relative error far
    below the margin added in :func:`selection_delta`)."""
    if m <= 0:
        return 1.0 - gaussian_tail(scale, 1 - m)
    positive, total = _gaussian_terms(scale)
    if m > len(positive):
        return 0.0
    return float(np.sum(positive[m - 1 :])) / total


@lru_cache(maxsize=8)
def _gaussian_terms(scale: float) -> tuple[npt.NDArray[np.float64], float]:
    """e^(-x²/2σ²) for x = 1, 2, ... while above 1e-300, and the sum over all integers."""
    variance2 = 2 * scale * scale
    reach = math.ceil(math.sqrt(700 * variance2)) + 1  # e^(-x²/2σ²) < 1e-300 beyond
    positive = np.exp(-(np.arange(1, reach + 1, dtype=np.float64) ** 2) / variance2)
    positive.flags.writeable = False
    return positive, 1.0 + 2.0 * float(np.sum(positive))
