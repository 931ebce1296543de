"""Statistical tests of the discrete Laplace mechanism as dpproxy samples it (OpenDP)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from rewriter import DiscreteGaussian, DiscreteLaplace, OpenDPNoise

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


#: Noise drawn one at a time (``discrete_laplace``) and many in one call (``_many``, as
#: partition selection draws it): the same distribution either way.
WAYS = ["one at a time", "many at once"]


@pytest.fixture(scope="module", params=WAYS)
def samples(request: pytest.FixtureRequest) -> np.ndarray:
    noise = OpenDPNoise()
    if request.param == "many at once":
        return np.array(noise.discrete_laplace_many(3.0, SAMPLES))
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


# -- discrete Gaussian ---------------------------------------------------------------------

SIGMA = 4.0


def gaussian_pmf(k: np.ndarray, sigma: float) -> np.ndarray:
    support = np.arange(-int(20 * sigma) - 1, int(20 * sigma) + 2)
    norm = np.exp(-(support**2) / (2 * sigma**2)).sum()
    return np.exp(-(k.astype(float) ** 2) / (2 * sigma**2)) / norm


def gaussian_chi_square_p(samples: np.ndarray, sigma: float) -> float:
    """p-value of 'samples come from the discrete Gaussian(sigma)', tails pooled."""
    edge = int(3 * sigma)
    ks = np.arange(-edge, edge + 1)
    probabilities = gaussian_pmf(ks, sigma)
    observed = np.array([(samples == k).sum() for k in ks], dtype=float)
    observed = np.append(observed, (np.abs(samples) > edge).sum())
    expected = np.append(probabilities, 1.0 - probabilities.sum()) * len(samples)
    return float(stats.chisquare(observed, expected).pvalue)


@pytest.fixture(scope="module", params=WAYS)
def gaussian_samples(request: pytest.FixtureRequest) -> np.ndarray:
    noise = OpenDPNoise()
    if request.param == "many at once":
        return np.array(noise.discrete_gaussian_many(SIGMA, SAMPLES))
    return np.array([noise.discrete_gaussian(SIGMA) for _ in range(SAMPLES)])


def test_many_draws_come_as_asked() -> None:
    noise = OpenDPNoise()
    assert noise.discrete_laplace_many(3.0, 0) == []
    drawn = noise.discrete_gaussian_many(SIGMA, 5)
    assert len(drawn) == 5 and all(type(v) is int for v in drawn)
    with pytest.raises(ValueError, match="count must not be negative"):
        noise.discrete_laplace_many(3.0, -1)


def test_gaussian_right_scale_passes(gaussian_samples: np.ndarray) -> None:
    assert gaussian_chi_square_p(gaussian_samples, SIGMA) > ALPHA


@pytest.mark.parametrize("wrong", [SIGMA * 1.3, SIGMA / 1.3])
def test_gaussian_scale_30_percent_off_fails(gaussian_samples: np.ndarray, wrong: float) -> None:
    assert gaussian_chi_square_p(gaussian_samples, wrong) < ALPHA


def test_gaussian_noise_is_centred_and_integer(gaussian_samples: np.ndarray) -> None:
    assert gaussian_samples.dtype.kind == "i"
    assert abs(gaussian_samples.mean()) < 5 * SIGMA / math.sqrt(SAMPLES)


def test_gaussian_half_width_covers_95_percent(gaussian_samples: np.ndarray) -> None:
    width = DiscreteGaussian(1, SIGMA).half_width(0.95)
    exact = float(gaussian_pmf(np.arange(-width, width + 1), SIGMA).sum())
    narrower = float(gaussian_pmf(np.arange(-width + 1, width), SIGMA).sum())
    assert exact >= 0.95 > narrower
    inside = float((np.abs(gaussian_samples) <= width).mean())
    assert abs(inside - exact) < 5 * math.sqrt(exact * (1 - exact) / SAMPLES)


def test_gaussian_half_width_at_large_scale_matches_the_normal() -> None:
    assert DiscreteGaussian(1, 1e6).half_width() == math.ceil(1.959963984540054 * 1e6)


@pytest.mark.parametrize(
    ("sensitivity", "rho", "groups"), [(1, 1 / (2 * 54**2), 1), (3, 0.01, 4), (7, 0.3, 2)]
)
def test_gaussian_privacy_map(sensitivity: int, rho: float, groups: int) -> None:
    mech = DiscreteGaussian.for_rho(sensitivity, rho, groups)
    # The map is OpenDP's ρ = Δ²/(2σ²) per total, times the totals one unit changes.
    assert mech.rho() <= rho
    assert mech.rho() == pytest.approx(groups * sensitivity**2 / (2 * mech.scale**2))
    assert mech.rho() == pytest.approx(rho, rel=1e-9)  # closed form: no slack left


def test_gaussian_sigma_54_at_sensitivity_1() -> None:
    mech = DiscreteGaussian.for_rho(1, 0.0185**2 / 2)
    assert mech.scale == pytest.approx(1 / 0.0185)
    assert isinstance(mech.release(10, OpenDPNoise()), int)
