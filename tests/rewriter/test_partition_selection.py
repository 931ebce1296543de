"""Partition selection: GROUP BY keys found in the data, released through a noisy threshold.

The threshold's δ is checked three ways: against the distribution summed term by term,
against OpenDP's own (shifted) map, and empirically on neighbouring databases with a large
δ, where a group held by one person must appear about δ of the time and no more.
"""

from __future__ import annotations

import math

import numpy as np
import opendp.prelude as dp
import pytest
from scipy import stats

from rewriter import OpenDPNoise, PlanRequest, Rejected, plan
from rewriter.partition_selection import (
    PartitionSelection,
    gaussian_tail,
    laplace_tail,
    selection_delta,
)
from tests.rewriter.noise import BatchedOpenDPNoise, ZeroNoise
from tests.rewriter.tables import SELECTION_ROWS, Row, catalog, duckdb_with

CATALOG = catalog("main")
ALPHA = 1e-4  # chance that a correct mechanism fails a statistical test


# -- the threshold and its δ ---------------------------------------------------------------


def brute_tail(scale: float, m: int, gaussian: bool) -> float:
    """P(Z >= m), summing the probability mass function term by term."""
    edge = int(60 * scale) + abs(m) + 10
    xs = np.arange(-edge, edge + 1, dtype=float)
    weights = np.exp(-(xs**2) / (2 * scale**2)) if gaussian else np.exp(-np.abs(xs) / scale)
    return float(weights[xs >= m].sum() / weights.sum())


@pytest.mark.parametrize("scale", [0.7, 1.0, 3.5, 12.0])
@pytest.mark.parametrize("m", [-3, 0, 1, 2, 7, 25])
def test_tails_match_the_distribution(scale: float, m: int) -> None:
    assert laplace_tail(scale, m) == pytest.approx(brute_tail(scale, m, False), rel=1e-9)
    assert gaussian_tail(scale, m) == pytest.approx(brute_tail(scale, m, True), rel=1e-9)


@pytest.mark.parametrize(
    ("groups", "budget", "delta"),
    [
        (1, 1.0, 1e-9),
        (1, 0.1, 1e-6),
        (3, 0.5, 0.05),
        (10, 2.0, 1e-12),
        (2, 0.05, 1e-7),
        (100, 1.0, 1e-15),  # δ/groups below 1e-16: the Gaussian guess used to fail
        (3, 1e-4, 1e-6),  # thresholds in the hundreds of thousands, found by bisection
    ],
)
def test_threshold_is_the_smallest_within_delta(groups: int, budget: float, delta: float) -> None:
    for made in (
        PartitionSelection.laplace(groups, budget, delta),
        PartitionSelection.gaussian(groups, budget**2 / 2, delta),
    ):
        assert made.delta() <= delta
        assert made.threshold >= 2
        if made.threshold > 2:  # one less would spend more than δ
            less = selection_delta(made.noise.scale, made.zcdp, groups, made.threshold - 1)
            assert less > delta
        # δ = groups × P(Z >= threshold - 1): a lone group has a count of 1.
        tail = brute_tail(made.noise.scale, made.threshold - 1, made.zcdp)
        assert made.delta() == pytest.approx(groups * tail, rel=1e-6)


def test_epsilon_and_rho_come_from_the_noise_maps() -> None:
    laplace = PartitionSelection.laplace(4, 0.5, 1e-6)
    assert laplace.noise.scale == pytest.approx(4 / 0.5)
    assert laplace.epsilon() <= 0.5
    assert laplace.rho() == 0.0
    gaussian = PartitionSelection.gaussian(4, 0.02, 1e-6)
    assert gaussian.noise.scale == pytest.approx(math.sqrt(4 / (2 * 0.02)))
    assert gaussian.rho() <= 0.02
    assert gaussian.epsilon() == 0.0


def opendp_threshold_map(scale: float, threshold: int) -> tuple[float, float]:
    domain = dp.map_domain(dp.atom_domain(T="i64"), dp.atom_domain(T="i64"))
    metric = dp.l01inf_distance(dp.absolute_distance(T="i64"))
    made = dp.m.make_laplace_threshold(domain, metric, scale=scale, threshold=threshold)
    epsilon, delta = made.map((1, 1, 1))  # type: ignore[no-untyped-call]
    return float(epsilon), float(delta)


def test_delta_is_opendps_map_one_step_lower() -> None:
    """OpenDP 0.16 releases counts >= threshold but states δ for counts > threshold
    (opendp/opendp#2922): its δ at threshold - 1 is the true δ at threshold."""
    made = PartitionSelection.laplace(1, 0.7, 1e-6)
    epsilon, shifted = opendp_threshold_map(made.noise.scale, made.threshold - 1)
    assert epsilon == pytest.approx(made.epsilon())
    assert made.delta() == pytest.approx(shifted, rel=1e-6)
    _, understated = opendp_threshold_map(made.noise.scale, made.threshold)
    assert understated < made.delta() / 2


@pytest.mark.parametrize("zcdp", [False, True])
def test_an_epsilon_too_small_to_release_any_group_is_refused(zcdp: bool) -> None:
    """At ε = 1e-9 the threshold search ran for hours (and the Gaussian tail needed
    billions of terms) before any charge, blocking the server (review finding)."""
    with pytest.raises(Rejected, match="no group could be released"):
        if zcdp:
            PartitionSelection.gaussian(3, 1e-18 / 2, 1e-6)
        else:
            PartitionSelection.laplace(3, 1e-9, 1e-6)


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="δ"):
        PartitionSelection.laplace(1, 1.0, 0.0)
    with pytest.raises(ValueError, match="groups"):
        PartitionSelection.laplace(0, 1.0, 1e-6)


# -- the mechanism as sampled: right scale passes, 30% off fails --------------------------


@pytest.mark.statistical
@pytest.mark.parametrize("many", [False, True])
@pytest.mark.parametrize("zcdp", [False, True])
def test_keep_rate_matches_the_scale(zcdp: bool, many: bool) -> None:
    """One group at a time (``keep``), and as a release selects: all groups' draws in one
    call (``keep_many``, OpenDPNoise's vector samplers)."""
    made = (
        PartitionSelection.gaussian(1, 0.02, 1e-3)
        if zcdp
        else PartitionSelection.laplace(1, 0.25, 1e-3)
    )
    counts = list(range(made.threshold - 8, made.threshold + 3))
    trials = 3000
    if many:
        kept = np.array([sum(made.keep_many([c] * trials, OpenDPNoise())) for c in counts])
    else:
        noise = BatchedOpenDPNoise()  # OpenDP's samplers, drawn many at a time
        kept = np.array([sum(made.keep(c, noise) for _ in range(trials)) for c in counts])

    def p_value(scale: float) -> float:
        tail = gaussian_tail if zcdp else laplace_tail
        p = np.array([tail(scale, made.threshold - c) for c in counts])
        chi = float((((kept - trials * p) ** 2) / (trials * p * (1 - p))).sum())
        return float(stats.chi2.sf(chi, len(counts)))

    assert p_value(made.noise.scale) > ALPHA
    assert p_value(made.noise.scale * 1.3) < ALPHA
    assert p_value(made.noise.scale / 1.3) < ALPHA


# -- planning ------------------------------------------------------------------------------


def test_no_domain_with_zero_delta_says_which_key_and_the_two_ways_out() -> None:
    with pytest.raises(Rejected) as caught:
        plan("SELECT stay, COUNT(*) FROM visits GROUP BY stay", CATALOG, PlanRequest(1.0))
    message = caught.value.message + " " + (caught.value.hint or "")
    assert "GROUP BY stay has no public domain" in message
    assert "[tables.visits.columns.stay]" in message
    assert "SET dpproxy.delta" in message
    assert "domain = [...]" in message


def test_data_key_plan_splits_the_budget_with_the_selection() -> None:
    sql = "SELECT stay, COUNT(*), SUM(cost) FROM visits GROUP BY stay"
    laplace = plan(sql, CATALOG, PlanRequest(1.0, delta=1e-6))
    assert laplace.selection is not None
    assert laplace.keys[0].domain is None
    assert laplace.max_groups_per_unit == 2  # the table's limit, not a domain's size
    assert laplace.selection.groups == 2
    assert laplace.privacy_loss() <= 1.0
    assert laplace.selection.epsilon() == pytest.approx(1.0 / 3, rel=1e-9)  # 3 equal shares
    assert laplace.privacy_loss_delta() <= 1e-6
    gaussian = plan(sql, CATALOG, PlanRequest(1.0, mechanism="gaussian", delta=1e-6))
    assert gaussian.selection is not None and gaussian.selection.zcdp
    assert gaussian.privacy_loss_rho() <= 0.5
    assert gaussian.selection.rho() == pytest.approx(0.5 / 3, rel=1e-9)
    domain_only = plan(
        "SELECT department, COUNT(*) FROM visits GROUP BY department",
        CATALOG,
        PlanRequest(1.0, delta=1e-6),
    )
    assert domain_only.selection is None  # δ allowed but not needed: not spent
    assert domain_only.privacy_loss_delta() == 0.0


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("SELECT COUNT(*) FROM visits GROUP BY patient_id", "one group per person"),
        ("SELECT COUNT(*) FROM visits GROUP BY length(department)", "released only for"),
    ],
)
def test_unsuitable_data_keys_are_refused(sql: str, words: str) -> None:
    with pytest.raises(Rejected, match=words):
        plan(sql, CATALOG, PlanRequest(1.0, delta=1e-6))


@pytest.mark.parametrize("delta", [-1e-9, 1.0, math.nan])
def test_bad_delta_is_refused(delta: float) -> None:
    with pytest.raises(Rejected, match="delta"):
        plan("SELECT COUNT(*) FROM visits", CATALOG, PlanRequest(1.0, delta=delta))


# -- release -------------------------------------------------------------------------------


def test_release_keeps_groups_at_the_threshold_sorted_and_typed() -> None:
    made = plan(
        "SELECT stay, COUNT(*) AS n FROM visits GROUP BY stay",
        CATALOG,
        PlanRequest(10.0, delta=0.4),  # a low threshold, so that 3 persons pass
    )
    assert made.selection is not None
    exact = duckdb_with(SELECTION_ROWS).execute(made.sql).fetchall()
    # Without noise: stay 1 has 3 persons, stay 2 and NULL one each.
    threshold = made.selection.threshold
    assert 1 < threshold <= 3
    released = made.release(exact, ZeroNoise())
    assert released.rows == ((1, 3),)
    assert released.columns[0] == ("k0", "BIGINT")
    lower = plan(
        "SELECT lower(department) AS d, COUNT(*) FROM visits GROUP BY 1",
        CATALOG,
        PlanRequest(10.0, delta=0.4),
    )
    exact = duckdb_with(SELECTION_ROWS).execute(lower.sql).fetchall()
    rows = lower.release(exact, ZeroNoise()).rows
    assert rows == (("a", 3), ("b", 2))  # persons 1, 2, 4 in a; 3, 4 in b


def test_release_checks_the_shape() -> None:
    made = plan(
        "SELECT stay, COUNT(*) FROM visits GROUP BY stay", CATALOG, PlanRequest(1.0, delta=0.4)
    )
    from rewriter import ReleaseError  # noqa: PLC0415

    with pytest.raises(ReleaseError, match="values per row"):
        made.release([(1, 3)], ZeroNoise())  # the unit count is missing


# -- neighbouring databases: a group held by one person ------------------------------------

#: 40 persons with stay 1 (a group that is always released) and one person, 99, alone in
#: stays 7 and 8: their only two groups (max_groups_per_unit = 2 for visits).
BASE: list[Row] = [(i, i, "A", 10.0, 1) for i in range(1, 41)]
LONE: list[Row] = [(100, 99, "B", 5.0, 7), (101, 99, "B", 5.0, 8)]
RUNS = 12_000


@pytest.mark.statistical
@pytest.mark.parametrize("mechanism", ["laplace", "gaussian"])
@pytest.mark.parametrize(
    "sql",
    [
        "SELECT stay, COUNT(*) FROM visits GROUP BY stay",
        "SELECT DISTINCT stay FROM visits",  # keys alone: all of ε on the selection
    ],
)
def test_a_group_of_one_person_appears_about_delta_of_the_time(mechanism: str, sql: str) -> None:
    delta = 0.05
    request = PlanRequest(2.0, mechanism=mechanism, delta=delta)  # type: ignore[arg-type]
    made = plan(sql, CATALOG, request)
    assert made.selection is not None
    with_person = duckdb_with(BASE + LONE).execute(made.sql).fetchall()
    without = duckdb_with(BASE).execute(made.sql).fetchall()
    noise = BatchedOpenDPNoise()  # OpenDP's samplers, drawn many at a time
    seen_with = seen_without = 0
    for _ in range(RUNS):
        keys = {row[0] for row in made.release(with_person, noise).rows}
        seen_with += bool(keys & {7, 8})
        keys = {row[0] for row in made.release(without, noise).rows}
        seen_without += bool(keys & {7, 8})
    assert seen_without == 0  # groups absent from the data never appear
    rate = seen_with / RUNS
    stated = made.privacy_loss_delta()
    assert stated <= delta
    spread = 4 * math.sqrt(stated * (1 - stated) / RUNS)
    # The union bound over the person's two groups is nearly tight: 1 - (1 - p)² ≈ 2p.
    assert rate <= stated + spread
    assert rate >= 0.9 * stated - spread
