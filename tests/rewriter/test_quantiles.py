"""Quantiles: the spellings accepted, the bins, the bounded counts per bin (checked against
plain Python on random data), the scores (checked against OpenDP's own quantile scorer),
the release, and the privacy maps."""

from __future__ import annotations

import functools
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from fractions import Fraction

import duckdb
import opendp.prelude as dp
import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewriter import (
    ColumnPolicy,
    ColumnType,
    PlanRequest,
    Rejected,
    ReleaseError,
    TablePolicy,
    build_catalog,
    plan,
)
from rewriter.passes.measurements import MAX_BINS, Bins, MeasureKind
from rewriter.quantile_selection import (
    QuantileSelection,
    quantile_scores,
    score_sensitivity,
)
from tests.rewriter import reference
from tests.rewriter.coupling import in_key_order
from tests.rewriter.tables import Row, catalog, scratch_with

CATALOG = catalog("main")
ROWS = 3  # tables.POLICY.max_rows_per_unit


class LowestScore:
    """Test-only selection: the bin with the lowest score, no noise (records the scores)."""

    def __init__(self) -> None:
        self.seen: list[list[int]] = []

    def discrete_laplace(self, scale: float) -> int:
        return 0

    def discrete_laplace_many(self, scale: float, count: int) -> list[int]:
        return [0] * count

    def noisy_min(self, scores: Sequence[int], scale: float, gumbel: bool) -> int:
        self.seen.append(list(scores))
        return min(range(len(scores)), key=lambda i: scores[i])


def quantile_alphas(sql: str) -> list[Fraction | None]:
    return [m.spec.alpha for m in plan(sql, CATALOG, PlanRequest(1.0)).measurements]


@pytest.mark.parametrize(
    ("sql", "alpha", "name"),
    [
        ("SELECT MEDIAN(cost) FROM visits", Fraction(1, 2), "median"),
        (
            "SELECT percentile_cont(0.9) WITHIN GROUP (ORDER BY cost) FROM visits",
            Fraction(9, 10),
            "percentile_cont",
        ),
        (
            "SELECT percentile_cont(0.9) WITHIN GROUP (ORDER BY cost DESC) FROM visits",
            Fraction(1, 10),
            "percentile_cont",
        ),
        (
            "SELECT percentile_disc(0.3) WITHIN GROUP (ORDER BY stay) FROM visits",
            Fraction(3, 10),
            "percentile_disc",
        ),
        ("SELECT quantile_cont(cost, 0.25) FROM visits", Fraction(1, 4), "quantile_cont"),
        ("SELECT quantile_disc(cost, 0.75) FROM visits", Fraction(3, 4), "quantile_disc"),
        ("SELECT quantile(cost, 0.0001) FROM visits", Fraction(1, 10_000), "quantile"),
        ("SELECT quantile_cont(cost, 1) FROM visits", Fraction(1), "quantile_cont"),
    ],
)
def test_spellings(sql: str, alpha: Fraction, name: str) -> None:
    made = plan(sql, CATALOG, PlanRequest(1.0))
    assert [m.spec.alpha for m in made.measurements] == [alpha]
    assert made.measurements[0].spec.kind is MeasureKind.BINS
    assert made.post_sql == f'SELECT "a0" AS "{name}" FROM "released"'
    assert made.released_columns == (("a0", "DOUBLE"),)


def test_equal_quantiles_share_one_measurement() -> None:
    sql = (
        "SELECT MEDIAN(cost), percentile_cont(0.5) WITHIN GROUP (ORDER BY cost), "
        "quantile_cont(cost, 0.9), COUNT(*), MEDIAN(cost) FILTER (WHERE stay > 2) FROM visits"
    )
    assert quantile_alphas(sql) == [Fraction(1, 2), Fraction(9, 10), None, Fraction(1, 2)]


@pytest.mark.parametrize(
    ("sql", "code", "words"),
    [
        ("SELECT MIN(cost) FROM visits", "0A000", "percentile_cont(0.01)"),
        ("SELECT department, MAX(stay) FROM visits GROUP BY 1", "0A000", "quantile_cont(x, 0.99)"),
        ("SELECT quantile_cont(cost, 1.5) FROM visits", "22003", "not between 0 and 1"),
        ("SELECT quantile_cont(cost, -0.5) FROM visits", "22003", "not between 0 and 1"),
        ("SELECT quantile_cont(cost, 0.12345) FROM visits", "22023", "four decimal places"),
        ("SELECT quantile_cont(cost, stay) FROM visits", "22023", "constant fraction"),
        ("SELECT quantile_cont(cost, '0.5') FROM visits", "22023", "constant fraction"),
        ("SELECT quantile_cont(cost, [0.5, 0.9]) FROM visits", "0A000", "several fractions"),
        ("SELECT quantile_cont(cost) FROM visits", "0A000", "two arguments"),
        ("SELECT percentile_cont(0.5) FROM visits", "42809", "WITHIN GROUP"),
        ("SELECT MEDIAN(department) FROM visits", "42883", "not numeric"),
        ("SELECT MEDIAN(visit_id) FROM visits", "0A000", "needs bounds"),
        ("SELECT MEDIAN(SUM(cost)) FROM visits", "42803", "aggregate"),
        ("SELECT COUNT(*) FROM visits WHERE MEDIAN(cost) > 1", "42803", "aggregate"),
    ],
)
def test_rejections_say_why(sql: str, code: str, words: str) -> None:
    with pytest.raises(Rejected) as caught:
        plan(sql, CATALOG, PlanRequest(1.0))
    assert caught.value.sqlstate == code, caught.value.message
    assert words in f"{caught.value.message} {caught.value.hint}"


def test_min_max_rejection_suggests_a_quantile() -> None:
    with pytest.raises(Rejected) as caught:
        plan("SELECT MIN(cost) FROM visits", CATALOG, PlanRequest(1.0))
    assert "0 quantile" in caught.value.message
    assert caught.value.hint is not None and "quantile" in caught.value.hint


@pytest.mark.parametrize(
    ("argument", "bins"),
    [
        ("cost", Bins(0.0, 100 / 64, 64)),  # real: 64 equal bins over [0, 100]
        ("stay", Bins(0.5, 1.0, 10)),  # integer with 10 values: one bin per integer
        ("stay * 2", Bins(1.5, 1.0, 19)),
        ("stay * 100", Bins(100.0, 900 / 64, 64)),  # 901 integers: 64 equal bins
        ("cost * 0 + 7", Bins(6.5, 1.0, 1)),  # a constant: one bin, its midpoint is 7
    ],
)
def test_bins_are_fixed_by_the_declared_bounds(argument: str, bins: Bins) -> None:
    made = plan(f"SELECT MEDIAN({argument}) FROM visits", CATALOG, PlanRequest(1.0))
    assert made.measurements[0].spec.bins == bins
    assert bins.count <= MAX_BINS


def test_integer_bins_release_the_integer() -> None:
    bins = Bins(0.5, 1.0, 10)
    assert [bins.midpoint(j) for j in range(10)] == [float(v) for v in range(1, 11)]
    assert [bins.index(v) for v in range(1, 11)] == list(range(10))
    real = Bins(0.0, 100 / 64, 64)
    assert real.index(0.0) == 0 and real.index(100.0) == 63 and real.index(50.0) == 32


def test_release_selects_the_bin_with_the_lowest_score() -> None:
    made = plan(
        "SELECT department, COUNT(*) AS n, MEDIAN(stay) AS m FROM visits GROUP BY department",
        CATALOG,
        PlanRequest(1.0),
    )
    a = [0, 0, 6, 1, 0, 0, 0, 0, 0, 3]  # the median of stay in A is 3
    source = LowestScore()
    released = made.release([("A", 10, a), ("B", 2, [0] * 9 + [2])], source)
    assert released.rows == (("A", 10, 3.0), ("B", 2, 10.0), ("C", 0, 1.0))
    assert source.seen[0] == quantile_scores(a, Fraction(1, 2))
    assert source.seen[2] == [0] * 10  # C has no rows: every bin is as good
    note = released.accuracy[1].note
    assert note is not None and "integers from 1 to 10" in note and "no closed-form" in note
    assert released.accuracy[1].half_width_95 is None


@pytest.mark.parametrize(
    "counts", [[1, 2], [1] * 9 + [-1], "0,1", [0.5] + [0] * 9, None, [[0]] * 10]
)
def test_release_fails_closed_on_unexpected_counts(counts: object) -> None:
    made = plan("SELECT MEDIAN(stay) FROM visits", CATALOG, PlanRequest(1.0))
    if counts is None:  # no row at all is an error; a NULL value is an empty group
        assert made.release([(None,)], LowestScore()).rows == ((1.0,),)
        return
    with pytest.raises(ReleaseError):
        made.release([(counts,)], LowestScore())


# -- privacy maps ----------------------------------------------------------------------------


@pytest.mark.parametrize("alpha", [Fraction(1, 2), Fraction(1, 10), Fraction(9999, 10_000)])
@pytest.mark.parametrize("rows", [1, 3, 30])
@pytest.mark.parametrize("groups", [1, 3])
@pytest.mark.parametrize("epsilon", [0.01, 1 / 3, 1.0, 4.0])
def test_pure_map_is_twice_the_sensitivity_over_the_scale_per_group(
    alpha: Fraction, rows: int, groups: int, epsilon: float
) -> None:
    made = QuantileSelection.for_epsilon(alpha, rows, epsilon, groups)
    delta = rows * max(alpha.numerator, alpha.denominator - alpha.numerator)
    assert made.sensitivity == delta == score_sensitivity(rows, alpha)
    # Not monotonic (scores move both ways): ε = 2Δ/scale per group, summed over the groups.
    assert made.epsilon() == pytest.approx(groups * 2 * delta / made.scale, rel=1e-9)
    assert made.epsilon() <= epsilon
    assert made.epsilon() == pytest.approx(epsilon, rel=1e-9)
    assert made.rho() == 0.0


@pytest.mark.parametrize("alpha", [Fraction(1, 2), Fraction(1, 4)])
@pytest.mark.parametrize("groups", [1, 3])
@pytest.mark.parametrize("rho", [0.005, 0.5, 2.0])
def test_zcdp_map_is_the_bounded_range_conversion(alpha: Fraction, groups: int, rho: float) -> None:
    made = QuantileSelection.for_rho(alpha, 3, rho, groups)
    per_group_epsilon = 2 * made.sensitivity / made.scale
    # The exponential mechanism is ε-DP with bounded range ε, hence ε²/8-zCDP.
    assert made.rho() == pytest.approx(groups * per_group_epsilon**2 / 8, rel=1e-9)
    assert made.rho() <= rho
    assert made.rho() == pytest.approx(rho, rel=1e-9)
    assert made.epsilon() == 0.0 and made.gumbel


def test_query_budget_is_split_with_the_other_aggregates() -> None:
    sql = (
        "SELECT department, COUNT(*), MEDIAN(cost), quantile_cont(stay, 0.9) FROM visits GROUP BY 1"
    )
    made = plan(sql, CATALOG, PlanRequest(0.9))
    count, median, high = made.measurements
    assert [m.epsilon for m in made.measurements] == pytest.approx([0.3] * 3)
    for m in (median, high):
        assert isinstance(m.mechanism, QuantileSelection)
        assert m.mechanism.groups == made.max_groups_per_unit == 2
        assert m.mechanism.rows_per_unit == ROWS
        assert m.mechanism.epsilon() <= 0.3
    assert made.privacy_loss() <= 0.9
    assert made.privacy_loss() == pytest.approx(0.9)
    gaussian = plan(sql, CATALOG, PlanRequest(0.9, mechanism="gaussian"))
    assert gaussian.privacy_loss() == 0.0
    assert gaussian.privacy_loss_rho() <= 0.9**2 / 2
    assert gaussian.privacy_loss_rho() == pytest.approx(0.9**2 / 2)
    selection = gaussian.measurements[1].mechanism
    assert isinstance(selection, QuantileSelection) and selection.gumbel


# -- scores ------------------------------------------------------------------------------------


ALPHAS = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.3333, 1.0]


@settings(max_examples=80, deadline=None)
@given(
    counts=st.lists(st.integers(0, 6), min_size=1, max_size=12),
    alpha=st.sampled_from(ALPHAS),
)
def test_scores_match_opendp_and_the_ranks(counts: list[int], alpha: float) -> None:
    """On the rows themselves (each row its bin index): an empty bin scores as OpenDP's
    make_quantile_score_candidates scores that candidate (up to the factor both scale by,
    which is also the ratio of the sensitivities of one row); a bin with rows never scores
    worse; and every score is q times the distance from rank α·n to the ranks of the bin."""
    rows = sorted(b for b, count in enumerate(counts) for _ in range(count))
    scorer = dp.t.make_quantile_score_candidates(
        dp.vector_domain(dp.atom_domain(T="i64")),
        dp.symmetric_distance(),
        candidates=list(range(len(counts))),
        alpha=alpha,
    )
    theirs = [int(s) for s in scorer(rows)]
    fraction = Fraction(str(alpha))
    ours = quantile_scores(counts, fraction)
    their_sensitivity = int(scorer.map(1))
    our_sensitivity = score_sensitivity(1, fraction)
    for b, count in enumerate(counts):
        if count == 0:
            assert ours[b] * their_sensitivity == theirs[b] * our_sensitivity
        else:
            assert ours[b] * their_sensitivity <= theirs[b] * our_sensitivity
        ranks = [i for i, row in enumerate(rows) if row == b]  # rows b holds: [first, last+1]
        first = ranks[0] if ranks else sum(1 for row in rows if row < b)
        last = ranks[-1] + 1 if ranks else first
        target = fraction * len(rows)
        distance = max(Fraction(0), first - target, target - last)
        assert ours[b] == distance * fraction.denominator


def test_the_bin_holding_the_quantile_scores_zero() -> None:
    counts = [0, 0, 6, 1, 0, 0, 0, 0, 0, 3]  # sorted: 3 x6, 4, 10 x3; the median is 3
    scores = quantile_scores(counts, Fraction(1, 2))
    assert scores[2] == 0 and min(s for i, s in enumerate(scores) if i != 2) > 0


# -- bounded counts per bin --------------------------------------------------------------------

costs = st.one_of(
    st.none(),
    st.integers(-80, 1200).map(lambda k: k / 8),
    st.sampled_from([float("nan"), float("inf"), -float("inf"), 1e300]),
)
visits = st.lists(
    st.tuples(
        st.integers(1, 6),
        st.sampled_from(["A", "B", "C"]),
        costs,
        st.one_of(st.none(), st.integers(-5, 40)),
    ),
    max_size=50,
)
QUERY = (
    "SELECT department, MEDIAN(cost), percentile_cont(0.9) WITHIN GROUP (ORDER BY stay) "
    "FILTER (WHERE cost > 10) FROM visits WHERE department <> 'C' GROUP BY department"
)


def cost_bin(row: Row) -> int | None:
    cost = row[3]
    if cost is None or not math.isfinite(cost):
        return None
    return min(max(math.floor(min(max(cost, 0.0), 100.0) * 0.64), 0), 63)


def stay_bin(row: Row) -> int | None:
    cost, stay = row[3], row[4]
    # FILTER (WHERE cost > 10) sees the raw value: NaN > 10 is true in SQL, NULL is not.
    if stay is None or cost is None or not (math.isnan(cost) or cost > 10):
        return None
    return min(max(stay, 1), 10) - 1


def per_unit_bins(rows: list[Row], department: str, which: int) -> dict[int, list[int]]:
    found: dict[int, list[int]] = defaultdict(list)
    for row in rows:
        b = (cost_bin, stay_bin)[which](row)
        if row[2] == department and b is not None:
            found[row[1]].append(b)
    return found


def exact_rows(data: list[tuple[int, str, float | None, int | None]]) -> list[Row]:
    return [(i, p, d, c, s) for i, (p, d, c, s) in enumerate(data)]


def in_budget(rows: list[Row]) -> list[Row]:
    """The rows of the departments each patient keeps, in key order (tests.rewriter.coupling)."""
    return reference.kept(rows, lambda r: r[2], lambda r: r[2] != "C")


@functools.cache
def query_in_key_order() -> str:
    """QUERY's bounded SQL in key order (planned once: planning is deterministic)."""
    return in_key_order(plan(QUERY, CATALOG, PlanRequest(1.0)))


def bounded_counts(rows: list[Row]) -> dict[str, list[list[int]]]:
    result = scratch_with(rows).execute(query_in_key_order()).fetchall()
    return {k: [list(map(int, median)), list(map(int, high))] for k, median, high in result}


@settings(max_examples=40, deadline=None)
@given(visits)
def test_counts_per_bin_equal_independent_python(
    data: list[tuple[int, str, float | None, int | None]],
) -> None:
    """With at most 3 rows per patient and department nothing is dropped at random: the
    counts are exactly the rows per bin of the departments each patient keeps (in key
    order, within its 3 rows)."""
    kept: Counter[tuple[int, str]] = Counter()
    trimmed = []
    for row in data:
        kept[(row[0], row[1])] += 1
        if kept[(row[0], row[1])] <= ROWS:
            trimmed.append(row)
    counts = bounded_counts(exact_rows(trimmed))
    rows = in_budget(exact_rows(trimmed))
    for department in ("A", "B"):
        for which, width in ((0, 64), (1, 10)):
            expected = [0] * width
            for found in per_unit_bins(rows, department, which).values():
                for b in found:
                    expected[b] += 1
            got = counts.get(department, [[0] * 64, [0] * 10])[which]
            assert got == expected, (department, which)


@settings(max_examples=40, deadline=None)
@given(visits)
def test_each_patient_counts_at_most_three_rows_per_group(
    data: list[tuple[int, str, float | None, int | None]],
) -> None:
    """With more rows, each patient's rows are a random subset of 3: the total is exactly
    Σ min(rows, 3), and each bin holds between what the subset must and can keep."""
    counts = bounded_counts(exact_rows(data))
    rows = in_budget(exact_rows(data))
    for department in ("A", "B"):
        for which, width in ((0, 64), (1, 10)):
            low, high, total = [0] * width, [0] * width, 0
            for found in per_unit_bins(rows, department, which).values():
                dropped = max(0, len(found) - ROWS)
                total += min(len(found), ROWS)
                for b, n in Counter(found).items():
                    high[b] += n
                    low[b] += max(0, n - dropped)
            got = counts.get(department, [[0] * 64, [0] * 10])[which]
            assert sum(got) == total
            assert all(lo <= g <= hi for lo, g, hi in zip(low, got, high, strict=True))


# -- adversarial values on both engines --------------------------------------------------------

ADVERSARIAL = [1.7976931348623157e308, -1.7976931348623157e308, 5e-324, -5e-324, -0.0]
ADVERSARIAL += [math.nan, math.inf, -math.inf, 1e-300, 2.0**53 + 2, -(2.0**63), 0.1, 1e-17]
READINGS = {"reading_id": ColumnType.INTEGER, "person_id": ColumnType.INTEGER}
READINGS |= {"value": ColumnType.FLOAT}
QUANTILE_QUERIES = [
    "SELECT MEDIAN(value), COUNT(*) FROM readings",
    "SELECT quantile_cont(value * 2.5, 0.9), percentile_cont(0.1) WITHIN GROUP "
    "(ORDER BY value / 3 - 1) FROM readings",
]


@pytest.mark.postgres
@pytest.mark.parametrize("bounds", [(-1e6, 1e6), (0.0, 1e-9), (-3.5, 2.25)])
@pytest.mark.parametrize("query", QUANTILE_QUERIES)
def test_adversarial_values_never_fail(
    bounds: tuple[float, float], query: str, pg_dsn: str, pg_schema: str
) -> None:
    """Huge, tiny (subnormal), NaN, infinite values: the bins never make the database fail
    (PostgreSQL raises on a product that underflows), and both engines count every finite
    value (one row per person, so no row is dropped at random)."""
    rows = [(i, i, v) for i, v in enumerate(ADVERSARIAL)]
    finite = sum(1 for v in ADVERSARIAL if math.isfinite(v))
    policy = TablePolicy(
        privacy_unit="person_id",
        max_rows_per_unit=4,
        columns={"value": ColumnPolicy(lower=bounds[0], upper=bounds[1])},
    )
    create = (
        "CREATE TABLE {}.readings (reading_id BIGINT, person_id BIGINT, value DOUBLE PRECISION)"
    )
    found = []
    for dialect, schema in (("duckdb", "main"), ("postgres", pg_schema)):
        made = plan(
            query,
            build_catalog({"readings": READINGS}, {"readings": policy}, schema=schema),
            PlanRequest(1.0, dialect),  # type: ignore[arg-type]
        )
        if dialect == "duckdb":
            conn = duckdb.connect()
            conn.execute(create.format("main"))
            conn.executemany("INSERT INTO main.readings VALUES (?, ?, ?)", rows)
            result = conn.execute(made.sql).fetchall()
        else:
            with psycopg.connect(pg_dsn, autocommit=True) as pg:
                pg.execute(create.format(f'"{schema}"'))
                with pg.cursor() as cur:
                    cur.executemany(f'INSERT INTO "{schema}".readings VALUES (%s, %s, %s)', rows)
                result = pg.execute(made.sql).fetchall()
        values = [[int(c) for c in v] if isinstance(v, list) else int(v) for v in result[0]]
        for value in values:
            if isinstance(value, list):
                assert sum(value) == finite
        found.append(values)
        released = made.release(result, LowestScore())
        for output, answer in zip(made.outputs, released.rows[0], strict=True):
            if output.bounds is not None:  # a quantile: within its expression's range
                assert isinstance(answer, float)
                assert output.bounds.lower <= answer <= output.bounds.upper
    assert found[0] == found[1]
