"""Noise mechanisms and their privacy maps.

Every released number is an integer aggregate plus integer noise sampled exactly by OpenDP
from the operating system's secure randomness: discrete Laplace (the geometric mechanism,
pure ε-DP) or discrete Gaussian (Canonne, Kamath and Steinke 2020, ρ-zCDP). Each mechanism
carries its own privacy map: :class:`DiscreteLaplace` for an integer aggregate whose value
changes by at most ``sensitivity`` (L1, over all groups) when one privacy unit's rows are
added or removed is ``epsilon()``-DP; :class:`DiscreteGaussian` adds independent noise to
each group's total, one unit changes at most ``groups`` totals by at most ``sensitivity``
each, and the release is ``rho()``-zCDP (zCDP composes additively over the groups).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Any, Protocol

from rewriter.opendp_library import opendp
from rewriter.quantile_selection import noisy_min_measurement


class NoiseSource(Protocol):
    """Draws integer noise. Production uses :class:`OpenDPNoise`."""

    def discrete_laplace(self, scale: float) -> int: ...

    def discrete_gaussian(self, scale: float) -> int: ...

    def discrete_laplace_many(self, scale: float, count: int) -> list[int]:
        """``count`` independent draws of ``discrete_laplace(scale)`` (partition selection
        draws one per candidate group: thousands, in one call)."""
        ...

    def discrete_gaussian_many(self, scale: float, count: int) -> list[int]:
        """``count`` independent draws of ``discrete_gaussian(scale)``."""
        ...

    def noisy_min(self, scores: Sequence[int], scale: float, gumbel: bool) -> int:
        """The index of the lowest score after noise (``rewriter.quantile_selection``)."""
        ...


@lru_cache(maxsize=256)
def _laplace_measurement(scale: float) -> Any:
    dp = opendp()
    return dp.m.make_laplace(dp.atom_domain(T="i64"), dp.absolute_distance(T="i64"), scale=scale)


@lru_cache(maxsize=256)
def _gaussian_measurement(scale: float) -> Any:
    dp = opendp()
    return dp.m.make_gaussian(dp.atom_domain(T="i64"), dp.absolute_distance(T="i64"), scale=scale)


@lru_cache(maxsize=256)
def _vector_measurement(gaussian: bool, scale: float) -> Any:
    """The same sampler as ``_laplace_measurement`` / ``_gaussian_measurement``, over a
    vector: OpenDP draws each element's noise independently. One call costs about what one
    draw does (most of it is the binding's own overhead), whatever the length."""
    dp = opendp()
    domain = dp.vector_domain(dp.atom_domain(T="i64"))
    if gaussian:
        return dp.m.make_gaussian(domain, dp.l2_distance(T="i64"), scale=scale)
    return dp.m.make_laplace(domain, dp.l1_distance(T="i64"), scale=scale)


class OpenDPNoise:
    """Discrete Laplace and Gaussian noise from OpenDP's exact samplers (OS randomness)."""

    def discrete_laplace(self, scale: float) -> int:
        return _integer(_laplace_measurement(scale)(0))

    def discrete_gaussian(self, scale: float) -> int:
        return _integer(_gaussian_measurement(scale)(0))

    def discrete_laplace_many(self, scale: float, count: int) -> list[int]:
        return _integers(_vector_measurement(False, scale), count)

    def discrete_gaussian_many(self, scale: float, count: int) -> list[int]:
        return _integers(_vector_measurement(True, scale), count)

    def noisy_min(self, scores: Sequence[int], scale: float, gumbel: bool) -> int:
        return _integer(noisy_min_measurement(scale, gumbel)(list(scores)))


def _integer(noise: object) -> int:
    if not isinstance(noise, int):
        raise TypeError(f"OpenDP returned {type(noise).__name__}, expected int")
    return noise


def _integers(measurement: Any, count: int) -> list[int]:
    """``count`` draws of a vector ``measurement`` (applied to zeros), checked."""
    if count < 0:
        raise ValueError("count must not be negative")
    if count == 0:
        return []
    drawn = measurement([0] * count)
    if not isinstance(drawn, list) or len(drawn) != count:
        raise TypeError(f"OpenDP returned {type(drawn).__name__}, expected {count} ints")
    return [_integer(value) for value in drawn]


@dataclass(frozen=True)
class DiscreteLaplace:
    """Discrete Laplace noise of ``scale`` added to an integer of L1 ``sensitivity``."""

    sensitivity: int
    scale: float

    @classmethod
    def for_epsilon(cls, sensitivity: int, epsilon: float) -> DiscreteLaplace:
        """The smallest scale (up to float rounding) whose privacy map stays within epsilon."""
        if sensitivity < 0:
            raise ValueError("sensitivity must be non-negative")
        if not (math.isfinite(epsilon) and epsilon > 0):
            raise ValueError("epsilon must be a positive finite number")
        return cls(sensitivity, _laplace_scale(sensitivity, epsilon))

    def epsilon(self) -> float:
        """The privacy map, as computed by OpenDP (rounded conservatively)."""
        value = _laplace_measurement(self.scale).map(self.sensitivity)
        return float(value)

    def release(self, exact: int, noise: NoiseSource) -> int:
        return exact + noise.discrete_laplace(self.scale)

    def release_many(self, exact: Sequence[int], noise: NoiseSource) -> list[int]:
        """``release`` of each of ``exact``, with independent draws made in one call."""
        drawn = noise.discrete_laplace_many(self.scale, len(exact))
        return [e + n for e, n in zip(exact, drawn, strict=True)]

    def half_width(self, confidence: float = 0.95) -> int:
        """Smallest k with P(|noise| <= k) >= confidence.

        For discrete Laplace with parameter t = scale, P(|Z| >= k) = 2 e^(-k/t) / (1 + e^(-1/t))
        for k >= 1.
        """
        if not 0 < confidence < 1:
            raise ValueError("confidence must be in (0, 1)")
        t = self.scale
        alpha = 1.0 - confidence
        # P(|Z| > k) = P(|Z| >= k + 1) <= alpha  <=>  k + 1 >= t * ln(2 / (alpha (1 + e^(-1/t))))
        needed = t * math.log(2.0 / (alpha * (1.0 + math.exp(-1.0 / t))))
        return max(0, math.ceil(needed) - 1)


@dataclass(frozen=True)
class DiscreteGaussian:
    """Discrete Gaussian noise of ``scale`` (σ) added to each of several integer totals, of
    which one unit changes at most ``groups``, each by at most ``sensitivity``."""

    sensitivity: int
    scale: float
    groups: int = 1

    @classmethod
    def for_rho(cls, sensitivity: int, rho: float, groups: int = 1) -> DiscreteGaussian:
        """The smallest scale (up to float rounding) whose privacy map stays within rho:
        σ = Δ·sqrt(groups / (2ρ)) in closed form, nudged up by ulps if OpenDP rounds over."""
        if sensitivity < 0 or groups < 1:
            raise ValueError("sensitivity must be non-negative and groups at least 1")
        if not (math.isfinite(rho) and rho > 0):
            raise ValueError("rho must be a positive finite number")
        return cls(sensitivity, _gaussian_scale(sensitivity, rho, groups), groups)

    def rho(self) -> float:
        """The privacy map: OpenDP's ρ for one total, times the totals one unit changes."""
        value = _gaussian_measurement(self.scale).map(self.sensitivity)
        return float(value) * self.groups

    def release(self, exact: int, noise: NoiseSource) -> int:
        return exact + noise.discrete_gaussian(self.scale)

    def release_many(self, exact: Sequence[int], noise: NoiseSource) -> list[int]:
        """``release`` of each of ``exact``, with independent draws made in one call."""
        drawn = noise.discrete_gaussian_many(self.scale, len(exact))
        return [e + n for e, n in zip(exact, drawn, strict=True)]

    def half_width(self, confidence: float = 0.95) -> int:
        """Smallest k with P(|noise| <= k) >= confidence, from the exact pmf
        (∝ exp(-x²/2σ²) on the integers), summed far enough into the tails."""
        if not 0 < confidence < 1:
            raise ValueError("confidence must be in (0, 1)")
        return _gaussian_half_width(self.scale, confidence)


# The scales below depend only on their arguments (OpenDP's privacy maps are deterministic),
# so they are computed once per (sensitivity, budget[, groups]): each OpenDP map costs about
# 0.1 ms, several per query.


@lru_cache(maxsize=1024, typed=True)  # typed: 1 and 1.0 are distinct keys
def _laplace_scale(sensitivity: int, epsilon: float) -> float:
    """DiscreteLaplace.for_epsilon's scale: sensitivity / ε, nudged up by ulps while
    OpenDP's map (rounded conservatively) exceeds ε."""
    scale = max(sensitivity, 1) / epsilon
    while DiscreteLaplace(sensitivity, scale).epsilon() > epsilon:
        scale = math.nextafter(scale, math.inf)
    return scale


@lru_cache(maxsize=1024, typed=True)  # typed: 1 and 1.0 are distinct keys
def _gaussian_scale(sensitivity: int, rho: float, groups: int) -> float:
    """DiscreteGaussian.for_rho's scale: Δ·sqrt(groups / (2ρ)), nudged up by ulps while
    OpenDP's map times ``groups`` exceeds ρ."""
    scale = max(sensitivity, 1) * math.sqrt(groups / (2 * rho))
    while DiscreteGaussian(sensitivity, scale, groups).rho() > rho:
        scale = math.nextafter(scale, math.inf)
    return scale


@lru_cache(maxsize=1024)
def _gaussian_half_width(scale: float, confidence: float) -> int:
    if scale > 1e4:  # the continuous Gaussian is within 1e-8 of the discrete one here
        z = NormalDist().inv_cdf(0.5 + confidence / 2)
        return math.ceil(z * scale)
    edge = math.ceil(12 * scale) + 1
    weights = [math.exp(-(x * x) / (2 * scale * scale)) for x in range(edge + 1)]
    total = weights[0] + 2 * math.fsum(weights[1:])
    inside = weights[0]
    k = 0
    while inside / total < confidence:
        k += 1
        inside += 2 * weights[k]
    return k


Mechanism = DiscreteLaplace | DiscreteGaussian
