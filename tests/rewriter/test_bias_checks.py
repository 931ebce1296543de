"""Bias checks (SET dpproxy.bias_check = on): what they cost (the privacy map), what they
count (exactly, on both engines, adversarial values included), that one person moves each
count by at most 1 (neighbouring databases), and how often they flag (the threshold)."""

from __future__ import annotations

import functools
import math

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewriter import Plan, PlanRequest, plan
from rewriter.bias import CHECK_SHARE, Check
from rewriter.mechanisms import DiscreteGaussian, DiscreteLaplace
from rewriter.passes.bias_checks import CheckKind
from tests.rewriter.noise import BatchedOpenDPNoise, ZeroNoise
from tests.rewriter.tables import Row, catalog, duckdb_with, load_postgres
from tests.rewriter.test_neighbours import CATALOG, QUERIES, database, visit

GROUPED = "SELECT department, AVG(cost), COUNT(*), SUM(stay) FROM visits GROUP BY department"


def test_checks_spend_their_share_and_the_query_costs_the_same() -> None:
    checked = plan(GROUPED, catalog("main"), PlanRequest(1.0, bias_check=True))
    plain = plan(GROUPED, catalog("main"), PlanRequest(1.0))
    assert plain.checks == ()
    kinds = [c.spec.kind for c in checked.checks]
    assert kinds == [CheckKind.CUT, CheckKind.CLAMPED, CheckKind.CLAMPED]  # cost, stay
    spent = sum(c.mechanism.epsilon() for c in checked.checks)
    assert spent == pytest.approx(CHECK_SHARE, rel=1e-9)
    assert all(c.mechanism.sensitivity == 1 for c in checked.checks)
    assert checked.privacy_loss() <= checked.epsilon == plain.epsilon == 1.0
    assert checked.privacy_loss() == pytest.approx(1.0, rel=1e-9)
    # The aggregates share the other 90%: each noise is 1/0.9 times as wide.
    for with_check, without in zip(checked.measurements, plain.measurements, strict=True):
        assert isinstance(with_check.mechanism, DiscreteLaplace)
        assert isinstance(without.mechanism, DiscreteLaplace)
        ratio = with_check.mechanism.scale / without.mechanism.scale
        assert ratio == pytest.approx(1 / (1 - CHECK_SHARE), rel=1e-9)


def test_gaussian_checks_spend_their_share_of_rho() -> None:
    request = PlanRequest(1.0, mechanism="gaussian", bias_check=True)
    checked = plan(GROUPED, catalog("main"), request)
    assert all(isinstance(c.mechanism, DiscreteGaussian) for c in checked.checks)
    spent = sum(c.mechanism.rho() for c in checked.checks)  # type: ignore[union-attr]
    assert spent == pytest.approx(CHECK_SHARE * 0.5, rel=1e-9)  # ρ = ε²/2
    assert checked.privacy_loss_rho() <= checked.rho == 0.5


def test_a_count_of_persons_alone_has_nothing_to_check() -> None:
    made = plan(
        "SELECT COUNT(DISTINCT patient_id) FROM visits",
        catalog("main"),
        PlanRequest(1.0, bias_check=True),
    )
    assert made.checks == ()
    assert made.privacy_loss() == pytest.approx(1.0, rel=1e-9)  # all of it on the count


def test_a_per_person_subquery_is_not_checked_and_says_so() -> None:
    """The subquery clamps its per-person values itself: its columns never lie outside
    their derived bounds, and a person has one row, so checks would spend budget on
    counts that are always 0 (review finding)."""
    made = plan(
        "SELECT AVG(n), SUM(total) FROM (SELECT patient_id, COUNT(*) AS n, SUM(cost) AS total "
        "FROM visits GROUP BY patient_id) s",
        catalog("main"),
        PlanRequest(1.0, bias_check=True),
    )
    assert made.checks == ()
    assert "per-person subquery" in made.unchecked[0]
    assert made.privacy_loss() == pytest.approx(1.0, rel=1e-9)


def test_clamping_concerns_only_the_aggregates_reading_the_column() -> None:
    made = plan(GROUPED, catalog("main"), PlanRequest(1.0, bias_check=True))
    cut, cost, stay = (c.spec for c in made.checks)
    assert cut.outputs == (0, 1, 2)
    assert cost.outputs == (0,) and "visits.cost" in cost.description
    assert stay.outputs == (2,) and "[1, 10]" in stay.description


# Patient 7: a huge cost, -inf; patient 8: NaN; patient 9: costs and stays within bounds
# but 5 rows (cut: 3 rows per patient); patient 10: an INTEGER stay at its type's limit.
ADVERSARIAL: list[Row] = [
    (1, 7, "A", 1e308, 2),
    (2, 7, "B", float("-inf"), 2),
    (3, 8, "C", float("nan"), 3),
    *[(4 + i, 9, "A", 50.0, 5) for i in range(5)],
    (9, 10, "B", 20.0, 2**31 - 1),
    (10, 11, "C", 0.0, 1),
]
# cut: patient 9 (5 rows) and patient 7 (2 groups is allowed: not cut); cost: 7, 8; stay: 10
EXPECTED_TOTALS = [1, 2, 1]


def _check_totals(rows: list[tuple[object, ...]], checks: int) -> list[int]:
    return [sum(int(row[len(row) - checks + i]) for row in rows) for i in range(checks)]  # type: ignore[call-overload]


@pytest.mark.parametrize(
    "query",
    [
        GROUPED,
        "SELECT AVG(cost), COUNT(*), SUM(stay) FROM visits",
        "SELECT department, MEDIAN(cost), SUM(stay), COUNT(*) FROM visits GROUP BY 1",
    ],
)
def test_duckdb_counts_the_persons_concerned(query: str) -> None:
    made = plan(query, catalog("main"), PlanRequest(1.0, bias_check=True))
    rows = duckdb_with(ADVERSARIAL).execute(made.sql).fetchall()
    assert _check_totals(rows, len(made.checks)) == EXPECTED_TOTALS
    release = made.release(rows, ZeroNoise())
    assert len(release.checks) == 3
    assert release.checks[0].startswith("about 1 (±")


@pytest.mark.postgres
@pytest.mark.parametrize("query", [GROUPED, "SELECT AVG(cost), COUNT(*), SUM(stay) FROM visits"])
def test_postgres_counts_the_persons_concerned(query: str, pg_dsn: str, pg_schema: str) -> None:
    load_postgres(pg_dsn, pg_schema, ADVERSARIAL)
    made = plan(query, catalog(pg_schema), PlanRequest(1.0, "postgres", bias_check=True))
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute(made.sql).fetchall()
    assert _check_totals(rows, len(made.checks)) == EXPECTED_TOTALS


@functools.cache
def checked(query: str) -> Plan:
    """The plan of ``query`` with bias checks (planning is deterministic: once per query,
    not once per example)."""
    return plan(query, CATALOG, PlanRequest(1.0, bias_check=True))


@pytest.mark.parametrize("query", QUERIES)
@settings(max_examples=20, deadline=None)
@given(
    visits=st.lists(visit, max_size=25),
    doses=st.lists(st.tuples(st.integers(1, 25), st.integers(-1, 12)), max_size=20),
    removed=st.integers(1, 5),
)
def test_one_person_moves_each_check_by_at_most_one(
    query: str,
    visits: list[tuple[int, str, float | None, int | None]],
    doses: list[tuple[int, int]],
    removed: int,
) -> None:
    """The proxy adds each check's column over all rows: with the groups in a random order
    (the SQL as it runs), removing one person changes that sum by 0 or 1."""
    made = checked(query)
    checks = len(made.checks)
    if not checks:  # a per-person subquery: nothing the checks can see (said in the NOTICE)
        assert made.unchecked
        return
    with_person = _check_totals(database(visits, doses, None).execute(made.sql).fetchall(), checks)
    without = _check_totals(database(visits, doses, removed).execute(made.sql).fetchall(), checks)
    for a, b in zip(with_person, without, strict=True):
        assert 0 <= a - b <= 1, (query, with_person, without)


def _false_flag_probability(mechanism: DiscreteLaplace) -> float:
    """P(noise > threshold) for discrete Laplace: e^(-(k+1)/t) / (1 + e^(-1/t))."""
    threshold = mechanism.half_width(0.90)
    t = mechanism.scale
    return math.exp(-(threshold + 1) / t) / (1 + math.exp(-1 / t))


def test_nobody_concerned_flags_about_five_percent_of_the_time() -> None:
    """The threshold is the noise's one-sided 95% quantile: with a total of 0, the flag
    rate matches its exact probability (at most 5%), and a threshold 30% lower would flag
    far more often."""
    made = plan(GROUPED, catalog("main"), PlanRequest(1.0, bias_check=True))
    check: Check = made.checks[0]
    mechanism = check.mechanism
    assert isinstance(mechanism, DiscreteLaplace)
    expected = _false_flag_probability(mechanism)
    assert 0.04 < expected <= 0.05
    noise = BatchedOpenDPNoise()  # OpenDP's samplers, drawn many at a time
    draws = 4000
    flagged = sum(check.finding(0, noise)[1] for _ in range(draws))
    spread = 4 * math.sqrt(expected * (1 - expected) / draws)  # 4 standard errors
    assert abs(flagged / draws - expected) < spread
    lower = math.exp(-(0.7 * mechanism.half_width(0.90) + 1) / mechanism.scale)
    assert flagged / draws < lower / (1 + math.exp(-1 / mechanism.scale)) - spread


def test_many_clamped_persons_flag_the_average_not_the_count() -> None:
    rows: list[Row] = [(i, i, "A", 900.0, 2) for i in range(1, 401)]  # cost clamped to 100
    rows += [(1000 + i, 1000 + i, "B", 40.0, 2) for i in range(400)]
    made = plan(GROUPED, catalog("main"), PlanRequest(1.0, bias_check=True))
    exact = duckdb_with(rows).execute(made.sql).fetchall()
    # Without noise (the threshold's behaviour with noise is tested above): 400 persons
    # clamped flag AVG(cost); nobody cut and no stay clamped flag nothing.
    release = made.release(exact, ZeroNoise())
    assert release.bias == (True, False, False)
    # A's average is 100, at its bound: the free hint would fire, but checked answers
    # leave it out (the check's count says more).
    assert release.warnings == ()
    unchecked = plan(GROUPED, catalog("main"), PlanRequest(1.0))
    hinted = unchecked.release(duckdb_with(rows).execute(unchecked.sql).fetchall(), ZeroNoise())
    assert hinted.bias == (True, None, None) and len(hinted.warnings) == 1
    assert "visits.cost" in release.checks[1] and release.checks[1].endswith("may be biased")


def test_many_persons_with_too_many_rows_flag_every_aggregate() -> None:
    rows: list[Row] = [
        (10 * p + i, p, "A", 40.0, 2) for p in range(1, 301) for i in range(5)
    ]  # 5 rows each, 3 counted
    made = plan(GROUPED, catalog("main"), PlanRequest(1.0, bias_check=True))
    exact = duckdb_with(rows).execute(made.sql).fetchall()
    release = made.release(exact, ZeroNoise())
    assert release.bias == (True, True, True)


def test_without_checks_the_flags_are_unknown_unless_a_hint_fires() -> None:
    rows: list[Row] = [(i, i, "A", 40.0 + i % 7, 2) for i in range(1, 200)]
    made = plan(GROUPED, catalog("main"), PlanRequest(1.0))
    release = made.release(duckdb_with(rows).execute(made.sql).fetchall(), ZeroNoise())
    assert release.checks == ()
    # C and B have no rows: their noisy average is the centre, not near a bound.
    assert release.bias == (None, None, None)


def test_checks_beside_partition_selection() -> None:
    """Keys from the data: the row holds the keys, the measurements, partition selection's
    count of persons, then the checks; the budget still adds up to the query's ε."""
    request = PlanRequest(1.0, delta=1e-6, bias_check=True)
    made = plan(
        "SELECT stay, COUNT(*), SUM(cost) FROM visits GROUP BY stay", catalog("main"), request
    )
    assert made.selection is not None
    assert [c.spec.kind for c in made.checks] == [CheckKind.CUT, CheckKind.CLAMPED]
    assert made.privacy_loss() <= made.epsilon
    assert made.privacy_loss() == pytest.approx(1.0, rel=1e-9)
    rows = duckdb_with(ADVERSARIAL).execute(made.sql).fetchall()
    assert all(len(r) == 1 + 2 + 1 + 2 for r in rows)
    # Cut: patient 9 (5 rows); cost outside [0, 100]: patients 7 (1e308, -inf) and 8 (NaN).
    assert _check_totals(rows, 2) == [1, 2]
    release = made.release(rows, ZeroNoise())
    assert release.checks[0].startswith("about 1 (") and release.checks[1].startswith("about 2 (")
