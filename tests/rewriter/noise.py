"""Noise sources for tests. ``ZeroNoise``, the test hook for exact answers, adds no noise,
so a release shows the bounded exact values (the integer totals the database returned);
``BatchedOpenDPNoise`` draws OpenDP's noise many at a time for statistical tests. No
analyst setting can reach them: production uses ``rewriter.mechanisms.OpenDPNoise``."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from rewriter.mechanisms import OpenDPNoise
from rewriter.opendp_library import opendp


class ZeroNoise:
    """No noise; a quantile selects the bin with the lowest (best) score."""

    def discrete_laplace(self, scale: float) -> int:
        return 0

    def discrete_gaussian(self, scale: float) -> int:
        return 0

    def discrete_laplace_many(self, scale: float, count: int) -> list[int]:
        return [self.discrete_laplace(scale) for _ in range(count)]

    def discrete_gaussian_many(self, scale: float, count: int) -> list[int]:
        return [self.discrete_gaussian(scale) for _ in range(count)]

    def noisy_min(self, scores: Sequence[int], scale: float, gumbel: bool) -> int:
        return min(range(len(scores)), key=lambda i: scores[i])


class BatchedOpenDPNoise:
    """OpenDP's exact samplers, as ``rewriter.mechanisms.OpenDPNoise`` draws them, taken
    ``batch`` at a time for statistical tests that need many draws.

    OpenDPNoise calls OpenDP once per draw (about 0.4 ms, mostly the call's own binding
    overhead); this calls the same mechanisms over a vector of ``batch`` zeros, which OpenDP
    samples element by element with the same sampler, independently, and hands the draws
    out one at a time. OpenDPNoise itself is tested draw by draw
    (tests/rewriter/test_mechanisms.py); noisy_min is its own, unbatched."""

    def __init__(self, batch: int = 4096) -> None:
        if batch < 1:
            raise ValueError("batch must be at least 1")
        self._batch = batch
        self._left: dict[tuple[bool, float], list[int]] = {}

    def discrete_laplace(self, scale: float) -> int:
        return self._draw(False, scale)

    def discrete_gaussian(self, scale: float) -> int:
        return self._draw(True, scale)

    def discrete_laplace_many(self, scale: float, count: int) -> list[int]:
        return [self._draw(False, scale) for _ in range(count)]

    def discrete_gaussian_many(self, scale: float, count: int) -> list[int]:
        return [self._draw(True, scale) for _ in range(count)]

    def noisy_min(self, scores: Sequence[int], scale: float, gumbel: bool) -> int:
        return OpenDPNoise().noisy_min(scores, scale, gumbel)

    def _draw(self, gaussian: bool, scale: float) -> int:
        left = self._left.setdefault((gaussian, scale), [])
        if not left:
            drawn = _vector_measurement(gaussian, scale)([0] * self._batch)
            if len(drawn) != self._batch or not all(type(v) is int for v in drawn):
                raise TypeError(f"OpenDP returned {drawn[:3]!r}…, expected {self._batch} ints")
            left.extend(reversed(drawn))
        return left.pop()


@functools.cache
def _vector_measurement(gaussian: bool, scale: float) -> Any:
    dp = opendp()
    domain = dp.vector_domain(dp.atom_domain(T="i64"))
    if gaussian:
        return dp.m.make_gaussian(domain, dp.l2_distance(T="i64"), scale=scale)
    return dp.m.make_laplace(domain, dp.l1_distance(T="i64"), scale=scale)
