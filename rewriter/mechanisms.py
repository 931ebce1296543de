"""Noise mechanisms and their privacy maps.

Every released number is an integer aggregate plus discrete Laplace noise (the geometric
mechanism), sampled exactly by OpenDP from the operating system's secure randomness. A
:class:`DiscreteLaplace` carries its own privacy map: for an integer aggregate whose value
changes by at most ``sensitivity`` when one privacy unit's rows are added or removed, the
release is ``epsilon``-differentially private with ``epsilon = map(sensitivity)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

import opendp.prelude as dp

dp.enable_features("contrib")


class NoiseSource(Protocol):
    """Draws integer noise. Production uses :class:`OpenDPNoise`."""

    def discrete_laplace(self, scale: float) -> int: ...


@lru_cache(maxsize=256)
def _laplace_measurement(scale: float) -> Any:
    return dp.m.make_laplace(dp.atom_domain(T="i64"), dp.absolute_distance(T="i64"), scale=scale)


class OpenDPNoise:
    """Discrete Laplace noise from OpenDP's exact sampler (OS secure randomness)."""

    def discrete_laplace(self, scale: float) -> int:
        noise = _laplace_measurement(scale)(0)
        if not isinstance(noise, int):
            raise TypeError(f"OpenDP returned {type(noise).__name__}, expected int")
        return noise


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
        scale = max(sensitivity, 1) / epsilon
        mech = cls(sensitivity, scale)
        while mech.epsilon() > epsilon:  # float rounding: nudge the scale up by ulps
            scale = math.nextafter(scale, math.inf)
            mech = cls(sensitivity, scale)
        return mech

    def epsilon(self) -> float:
        """The privacy map, as computed by OpenDP (rounded conservatively)."""
        value = _laplace_measurement(self.scale).map(self.sensitivity)
        return float(value)

    def release(self, exact: int, noise: NoiseSource) -> int:
        return exact + noise.discrete_laplace(self.scale)

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
