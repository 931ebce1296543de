"""Statistical tests of the quantile selection as dpproxy samples it (OpenDP's noisy min):
the selection frequencies match the exact distribution at the right scale, and a scale 30%
off is detected.

- zCDP (Gumbel noise): the exponential mechanism, P(b) ∝ exp(-score(b) / scale);
- pure ε (exponential noise): report-noisy-max of -score with exponential noise
  (permute-and-flip), P(b) = ∫ f_b(y) Π_{c≠b} P(E_c < y + s_c) dy over y ≥ -min(score),
  f_b the density of -s_b + E_b, integrated numerically.
"""

from __future__ import annotations

import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
from scipy import integrate, stats

from rewriter import OpenDPNoise
from rewriter.quantile_selection import QuantileSelection, quantile_scores

pytestmark = pytest.mark.statistical

SAMPLES = 10_000
ALPHA = 1e-4  # chance that a correct sampler fails this test
SCALE = 4.0
SCORES = [0, 1, 3, 4, 6, 9, 13]


def exponential_mechanism(scores: list[int], scale: float) -> np.ndarray:
    weights = np.exp(-np.array(scores, dtype=float) / scale)
    return weights / weights.sum()


def noisy_min_exponential(scores: list[int], scale: float) -> np.ndarray:
    """P(b wins) for the argmax of -score + E, E ~ Exponential(scale) independent (OpenDP
    negates the scores to report the min): b wins at y = -s_b + e when every other
    -s_c + E_c stays below y, which needs y above every -s_c."""
    utilities = [-s for s in scores]

    def density(y: float, b: int) -> float:
        value = math.exp(-(y - utilities[b]) / scale) / scale
        for c, u in enumerate(utilities):
            if c != b:
                value *= -math.expm1(-(y - u) / scale)
        return value

    lowest = max(utilities)
    found = np.array(
        [
            integrate.quad(density, lowest, math.inf, args=(b,), epsabs=1e-14)[0]
            for b in range(len(scores))
        ]
    )
    assert abs(found.sum() - 1) < 1e-8
    return found


def chi_square_p(samples: list[int], expected: np.ndarray) -> float:
    counts = Counter(samples)
    observed = np.array([counts[b] for b in range(len(expected))], dtype=float)
    return float(stats.chisquare(observed, expected * len(samples)).pvalue)


@pytest.fixture(scope="module")
def gumbel() -> list[int]:
    noise = OpenDPNoise()
    return [noise.noisy_min(SCORES, SCALE, True) for _ in range(SAMPLES)]


@pytest.fixture(scope="module")
def exponential() -> list[int]:
    noise = OpenDPNoise()
    return [noise.noisy_min(SCORES, SCALE, False) for _ in range(SAMPLES)]


def test_gumbel_is_the_exponential_mechanism(gumbel: list[int]) -> None:
    assert chi_square_p(gumbel, exponential_mechanism(SCORES, SCALE)) > ALPHA


@pytest.mark.parametrize("wrong", [SCALE * 1.3, SCALE / 1.3])
def test_gumbel_scale_30_percent_off_fails(gumbel: list[int], wrong: float) -> None:
    assert chi_square_p(gumbel, exponential_mechanism(SCORES, wrong)) < ALPHA


def test_pure_selection_is_noisy_min_with_exponential_noise(exponential: list[int]) -> None:
    assert chi_square_p(exponential, noisy_min_exponential(SCORES, SCALE)) > ALPHA


@pytest.mark.parametrize("wrong", [SCALE * 1.3, SCALE / 1.3])
def test_pure_scale_30_percent_off_fails(exponential: list[int], wrong: float) -> None:
    assert chi_square_p(exponential, noisy_min_exponential(SCORES, wrong)) < ALPHA


def test_pure_selection_is_not_the_gumbel_one(exponential: list[int]) -> None:
    """The two noises give different distributions, and the test tells them apart."""
    assert chi_square_p(exponential, exponential_mechanism(SCORES, SCALE)) < ALPHA


@pytest.mark.parametrize("gumbel_noise", [False, True])
def test_selection_probabilities_respect_the_privacy_map(gumbel_noise: bool) -> None:
    """For two neighbouring score vectors (each score moved by at most Δ), the exact
    probability of every bin changes by at most a factor e^ε, ε = 2Δ/scale (the map)."""
    delta = 3
    selection = QuantileSelection(Fraction(1, 2), delta, SCALE, gumbel=gumbel_noise)
    epsilon = 2 * selection.sensitivity / selection.scale
    exact = exponential_mechanism if gumbel_noise else noisy_min_exponential
    base = exact(SCORES, SCALE)
    rng = np.random.default_rng(7)
    for _ in range(20):
        moved = [s + int(rng.integers(-delta, delta + 1)) for s in SCORES]
        ratio = np.abs(np.log(exact(moved, SCALE) / base)).max()
        assert ratio <= epsilon + 1e-9


def test_release_finds_the_median_of_a_clear_histogram() -> None:
    """With many rows, the selected bin is the median's or next to it."""
    counts = [50, 80, 120, 300, 120, 80, 50]
    selection = QuantileSelection.for_epsilon(Fraction(1, 2), 3, 1.0)
    picks = Counter(selection.release(counts, OpenDPNoise()) for _ in range(200))
    assert quantile_scores(counts, Fraction(1, 2))[3] == 0
    assert sum(picks[b] for b in (2, 3, 4)) == 200
    assert picks[3] > 150
