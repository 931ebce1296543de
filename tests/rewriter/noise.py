"""The test hook for exact answers: a noise source that adds no noise, so a release shows
the bounded exact values (the integer totals the database returned). No analyst setting
can reach it: production uses ``rewriter.mechanisms.OpenDPNoise``."""

from __future__ import annotations

from collections.abc import Sequence


class ZeroNoise:
    """No noise; a quantile selects the bin with the lowest (best) score."""

    def discrete_laplace(self, scale: float) -> int:
        return 0

    def discrete_gaussian(self, scale: float) -> int:
        return 0

    def noisy_min(self, scores: Sequence[int], scale: float, gumbel: bool) -> int:
        return min(range(len(scores)), key=lambda i: scores[i])
