"""Statistical tests of the discrete Laplace mechanism as dpproxy samples it (OpenDP)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from rewriter import DiscreteLaplace, OpenDPNoise

pytestmark = pytest.mark.statistical

SAMPLES = 20_000
ALPHA = 1e-4  # chance that a correct sampler fails this test


def pmf(k: np.ndarray, scale: float) -> np.ndarray:
    q = math.exp(-1.0 / scale)
    return (1 - q) / (1 + q) * np.exp(-np.abs(k) / scale)


def chi_square_p(samples: np.ndarray, scale: float) -> float:
    """p-value of 'samples come from discrete Laplace(scale)', tails pooled."""
    edge = int(4 * scale)
    ks = np.arange(-edge, edge + 1)
    expected = pmf(ks, scale) * len(samples)
    observed = np.array([(samples == k).sum() for k in ks], dtype=float)
    tail_p = 1.0 - pmf(ks, scale).sum()
    observed = np.append(observed, (np.abs(samples) > edge).sum())
    expected = np.append(expected, tail_p * len(samples))
    return float(stats.chisquare(observed, expected).pvalue)


@pytest.fixture(scope="module")
def samples() -> np.ndarray:
    noise = OpenDPNoise()
    return np.array([noise.discrete_laplace(3.0) for _ in range(SAMPLES)])


def test_right_scale_passes(samples: np.ndarray) -> None:
    assert chi_square_p(samples, 3.0) > ALPHA


@pytest.mark.parametrize("wrong", [3.0 * 1.3, 3.0 / 1.3])
def test_scale_30_percent_off_fails(samples: np.ndarray, wrong: float) -> None:
    assert chi_square_p(samples, wrong) < ALPHA


def test_noise_is_centred(samples: np.ndarray) -> None:
    # Variance of discrete Laplace: 2q / (1-q)^2 with q = e^(-1/scale).
    q = math.exp(-1 / 3.0)
    sd = math.sqrt(2 * q) / (1 - q)
    assert abs(samples.mean()) < 5 * sd / math.sqrt(SAMPLES)


def test_half_width_covers_95_percent(samples: np.ndarray) -> None:
    width = DiscreteLaplace(1, 3.0).half_width(0.95)
    inside = float((np.abs(samples) <= width).mean())
    # Exact coverage of the interval, from the pmf; the interval is the smallest one.
    exact = float(pmf(np.arange(-width, width + 1), 3.0).sum())
    narrower = float(pmf(np.arange(-width + 1, width), 3.0).sum())
    assert exact >= 0.95 > narrower
    assert abs(inside - exact) < 5 * math.sqrt(exact * (1 - exact) / SAMPLES)


def test_noise_comes_in_integers_at_large_scales() -> None:
    value = OpenDPNoise().discrete_laplace(2.0**45)
    assert isinstance(value, int)
