"""95% intervals of AVG, VAR… and STDDEV… from their noisy totals (rewriter.derived_intervals).

The statistical tests release many groups at known exact totals through ``Plan.release``
with OpenDP's real sampler (``OpenDPNoise``), and count the groups whose span holds the
noise-free value (the same release without noise): the span must hold it in at least 95%
of them (a group whose span is unbounded counts as holding it: the guarantee is that a
bounded span misses with probability at most 5%), and a span 30% narrower around the
released value must not, where the bound is tight.

Where it is tight: each of the m totals' noise is within its half-width at 1 − 5%/m, so
the span is widest, relative to the actual error, when several noises weigh alike (their
worst cases rarely come together); it is tightest when one noise dominates, where the
coverage is that one total's 1 − 5%/m. An average whose noise-free mean is the centre c
of the bounds (Σ(x − c) = 0) has S/n = 0 whatever n, so the count's noise weighs nothing
and the coverage is the centred sum's 97.5% (discrete Laplace: 30% narrower holds
1 − 0.025^0.7 ≈ 92.4%; Gaussian, 1.57σ instead of 2.24σ: ≈ 88.4%). A variance with
Σ(x − c) = 0 and a large n is dominated by its sum of squares: 98.3% (30% narrower,
Laplace: 1 − (1/60)^0.7 ≈ 94.3%; Gaussian: 90.6%) — with n = 50,000 and a variance of
0.05 the count and the centred sum move it by under 1% of the squares' half-width.

OpenDP's sampler draws from the operating system's randomness and cannot be seeded.
Instead, each threshold is at least 10 standard errors of its Monte Carlo estimate away
from the coverage expected (stated at each test), so a chance failure has probability
below 1e-20.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import pytest

from rewriter import (
    ColumnPolicy,
    ColumnType,
    OpenDPNoise,
    PlanRequest,
    TablePolicy,
    build_catalog,
    plan,
)
from rewriter.derived_intervals import Span, level, ratio_range
from rewriter.derived_intervals import _spread as spread
from tests.rewriter.noise import ZeroNoise

pytestmark = pytest.mark.statistical

GROUPS = 2000  # groups released per call: their noise is drawn in one call per total
CATALOG = build_catalog(
    {"trials": {"unit": ColumnType.INTEGER, "g": ColumnType.INTEGER, "x": ColumnType.INTEGER}},
    {
        "trials": TablePolicy(
            privacy_unit="unit",
            max_rows_per_unit=3,
            columns={
                "g": ColumnPolicy(domain=list(range(GROUPS))),
                "x": ColumnPolicy(lower=1, upper=10),  # centre c = 5, x − c in [−4, 5]
            },
        )
    },
    schema="main",
)


def coverage(
    aggregate: str, exact: Sequence[int], draws: int, mechanism: str = "laplace"
) -> tuple[float, float, float]:
    """(share of spans holding the noise-free value, the same for spans 30% narrower around
    the released value, share of unbounded spans) over ``draws`` groups of exact totals
    ``exact`` (Σ(x − c), the count, and for a spread Σ(x − c)²), at ε = 1."""
    made = plan(
        f"SELECT {aggregate} FROM trials GROUP BY g", CATALOG, PlanRequest(1.0, mechanism=mechanism)
    )
    rows = [(g, *exact) for g in range(GROUPS)]
    (truth,) = {value for _, value in made.release(rows, ZeroNoise()).rows}
    noise = OpenDPNoise()
    holds = narrow = unbounded = 0
    for _ in range(draws // GROUPS):
        released = made.release(rows, noise)
        for (_, value), (span,) in zip(released.rows, released.spans, strict=True):
            assert isinstance(span, Span) and span.value == value
            if not span.bounded:
                unbounded += 1
                holds += 1
                narrow += 1
                continue
            assert span.lower <= value <= span.upper
            holds += span.lower <= truth <= span.upper
            low, high = value - 0.7 * (value - span.lower), value + 0.7 * (span.upper - value)
            narrow += low <= truth <= high
    total = draws // GROUPS * GROUPS
    return holds / total, narrow / total, unbounded / total


@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_average_covers_95_and_30_percent_narrower_does_not(mechanism: str) -> None:
    # Mean at the centre: only the centred sum's noise (width 111 at Laplace scale 30;
    # 48 at Gaussian σ 21.2) moves it; n = 2,000 makes n's own range (±22, ±9) small.
    holds, narrow, unbounded = coverage("AVG(x)", (0, 2000), 40_000, mechanism)
    # Expected 97.5% (a little more: the count's range widens the span by ~1%; measured
    # 97.6% and 97.8%), standard error 0.0008: 0.95 and 0.99 are 15 or more of them away.
    assert 0.95 <= holds < 0.99, holds
    # Expected 92.4% (Laplace; measured 92.5%) and 88.4% (Gaussian; 88.5%), standard
    # error at most 0.0016: 0.95 is 15 or more of them away.
    assert narrow < 0.95, narrow
    assert unbounded == 0


def test_average_of_a_small_group_near_a_bound_covers_95() -> None:
    # Mean 9 (4 from the centre) over 60 values: the count's noise (±22) matters as much as
    # the sum's (±111); more than 97.5% hold (measured about 99.7%).
    holds, _, unbounded = coverage("AVG(x)", (240, 60), 20_000)
    assert holds >= 0.98, holds  # standard error 0.0006
    # n − 22 < 1 needs noise of −38 or less: P = e^(−38/6) / (1 + e^(−1/6)) = 0.1%,
    # standard error 0.0002 (measured 0.104% over 100,000 draws).
    assert unbounded < 0.003, unbounded


def test_average_of_a_tiny_group_is_unbounded_when_its_count_may_be_0() -> None:
    # 10 values against a count's half-width of 22: bounded only when the noise is 13 or
    # more, P = e^(−13/6) / (1 + e^(−1/6)) = 6.2% (Laplace of scale 6), standard error
    # 0.0017; the bounded spans still hold (unbounded ones count as holding).
    holds, _, unbounded = coverage("AVG(x)", (40, 10), 20_000)
    assert 0.92 < unbounded < 0.955, unbounded
    assert holds >= 0.97, holds


@pytest.mark.parametrize(("mechanism", "draws"), [("laplace", 120_000), ("gaussian", 40_000)])
def test_variance_covers_95_and_30_percent_narrower_does_not(mechanism: str, draws: int) -> None:
    # Σ(x − c) = 0, n = 50,000, Σ(x − c)² = 2,500: variance 0.05, dominated by the noise
    # of the sum of squares (width 921 at Laplace scale 225, against the count's 37 × 0.05).
    holds, narrow, unbounded = coverage("VAR_POP(x)", (0, 50_000, 2_500), draws, mechanism)
    assert 0.95 <= holds < 0.99, holds  # expected 98.3%, standard error ≤ 0.0007
    # Expected 94.3% (Laplace; measured 94.30% over 200,000 draws: standard error 0.00067
    # at 120,000, 0.95 is 10 of them away) and 90.6% (Gaussian; 90.9%, 0.95 is 28 away).
    assert narrow < 0.95, narrow
    assert unbounded == 0


@pytest.mark.parametrize("aggregate", ["VAR_SAMP(x)", "STDDEV_POP(x)", "STDDEV_SAMP(x)"])
@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
def test_spreads_of_small_groups_cover_95(aggregate: str, mechanism: str) -> None:
    # Mean 9 over 200 values, Σ(x − c)² = 200 · 17 (variance 1): every noise matters.
    holds, _, _ = coverage(aggregate, (800, 200, 3_400), 10_000, mechanism)
    assert holds >= 0.97, holds  # measured above 99%; standard error ≤ 0.001


def test_levels_share_the_five_percent() -> None:
    assert level(1) == pytest.approx(0.95)
    assert level(2) == pytest.approx(0.975)
    assert level(3) == pytest.approx(1 - 0.05 / 3)


def test_ratio_range_is_reached_at_the_corners() -> None:
    choices = random.Random(11)
    for _ in range(500):
        n1 = choices.uniform(-50, 50)
        n2 = n1 + choices.uniform(0, 30)
        d1 = choices.uniform(0.5, 20)
        d2 = d1 + choices.uniform(0, 10)
        corners = [n / d for n in (n1, n2) for d in (d1, d2)]
        assert ratio_range((n1, n2), (d1, d2)) == (min(corners), max(corners))
    with pytest.raises(ValueError):
        ratio_range((0, 1), (0, 3))


def _grid(
    squares: tuple[float, float],
    centred: Sequence[float],
    count: tuple[float, float],
    clamp: tuple[float, float],
    steps: int,
) -> list[float]:
    """Q/n − h(S/n)² for Q at either end, each S of ``centred`` and ``steps`` + 1 values of
    1/n evenly over its range."""
    u1, u2 = 1 / count[1], 1 / count[0]
    us = [u1 + (u2 - u1) * i / steps for i in range(steps + 1)]
    return [
        q * u - min(clamp[1], max(clamp[0], s * u)) ** 2
        for q in squares
        for s in centred
        for u in us
    ]


def test_spread_range_is_exact() -> None:
    """The computed range holds the formula's value at every point of a grid of the box
    (sound), and the values at S's ends or 0 along a fine grid of 1/n come within 0.1% of
    its ends (exact, not merely wide: for a given n the extremes take S at an end or 0)."""
    choices = random.Random(5)
    for _ in range(100):
        n1 = choices.uniform(1, 40)
        count = (n1, n1 + choices.uniform(0, 40))
        s1 = choices.uniform(-300, 300)
        s2 = s1 + choices.uniform(0, 200)
        q1 = choices.uniform(-200, 2000)
        squares = (q1, q1 + choices.uniform(0, 800))
        clamp = (-choices.uniform(0, 10), choices.uniform(0, 10))
        lower, upper = spread(squares, (s1, s2), count, clamp)
        every = [s1 + (s2 - s1) * i / 60 for i in range(61)]
        values = _grid(squares, every, count, clamp, 100)
        scale = max(1.0, *(abs(v) for v in values))
        assert lower <= min(values) + 1e-9 * scale
        assert upper >= max(values) - 1e-9 * scale
        ends = [s1, s2, *([0.0] if s1 < 0 < s2 else [])]
        fine = _grid(squares, ends, count, clamp, 4_000)
        assert min(fine) - 1e-3 * scale <= lower and upper <= max(fine) + 1e-3 * scale


def test_spread_range_without_a_centre_within_the_clamp_is_unbounded() -> None:
    assert spread((0, 1), (0, 1), (1, 2), (0.1, 0.2)) == (-math.inf, math.inf)
