"""The 95% intervals of averages, variances and standard deviations in the NOTICE and the
``<name>_ci95`` columns: each group's own, from its noisy totals (rewriter.derived_intervals),
and on the answer row of that group whatever HAVING, ORDER BY and LIMIT did to the rows."""

from __future__ import annotations

import math

from proxy import reporting
from proxy.postprocess import PostProcessor, with_intervals
from rewriter import Plan, PlanRequest, Release, plan
from rewriter.mechanisms import DiscreteGaussian, DiscreteLaplace
from tests.rewriter.noise import ZeroNoise
from tests.rewriter.tables import catalog

CATALOG = catalog("main")
# stay is in [1, 10], centred on 5: the exact totals are Σ(stay − 5) and the count.
BY_DEPARTMENT = (
    "SELECT department AS d, AVG(stay) AS a, COUNT(*) AS n FROM visits GROUP BY d "
    "ORDER BY a DESC LIMIT 2"
)
#: (department, Σ(stay − 5), COUNT(stay), COUNT(*)): means 9 over 1,000 values, 3 over
#: 200, 7 over 10 (a count within its noise's half-width, 22 at ε = 1/3, of 0).
EXACT: list[tuple[object, ...]] = [
    ("A", 4000, 1000, 1000),
    ("B", -400, 200, 200),
    ("C", 20, 10, 10),
]


def released(sql: str, exact: list[tuple[object, ...]]) -> tuple[Plan, Release]:
    query_plan = plan(sql, CATALOG, PlanRequest(1.0))
    return query_plan, query_plan.release(exact, ZeroNoise())


def width(query_plan: Plan, index: int) -> int:
    mechanism = query_plan.measurements[index].mechanism
    assert isinstance(mechanism, DiscreteLaplace | DiscreteGaussian)
    return mechanism.half_width(0.975)


def test_an_average_gets_the_ratio_of_its_totals_ranges() -> None:
    query_plan, release = released("SELECT AVG(stay) FROM visits", [(4000, 1000)])
    total, count = width(query_plan, 0), width(query_plan, 1)
    (row,) = release.spans
    (span,) = row
    assert span is not None
    assert span.value == 9.0
    assert span.lower == 5 + (4000 - total) / (1000 + count)
    assert span.upper == 5 + (4000 + total) / (1000 - count)
    assert span.half_width == max(9 - span.lower, span.upper - 9) > 0


def test_an_average_is_kept_within_its_bounds_and_unbounded_near_a_count_of_0() -> None:
    query_plan, release = released("SELECT AVG(stay) FROM visits", [(250, 50)])
    (span,) = release.spans[0]
    assert span is not None and span.upper == 10.0  # 5 + (250 + 111) / (50 − 22) > 10
    count = width(query_plan, 1)
    _, release = released("SELECT AVG(stay) FROM visits", [(0, count)])
    (span,) = release.spans[0]
    assert span is not None and not span.bounded and span.half_width == math.inf
    _, release = released("SELECT AVG(stay) FROM visits", [(0, count + 1)])
    (span,) = release.spans[0]
    assert span is not None and span.bounded


def test_ci95_columns_follow_their_rows_through_order_by_and_limit() -> None:
    query_plan, release = released(BY_DEPARTMENT, EXACT)
    answer = PostProcessor().run(release, query_plan.post_sql)
    columns = reporting.intervals(query_plan, "columns")
    assert columns is not None
    shown = with_intervals(answer, columns, release.bias)
    assert [c.name for c in shown.columns] == [
        "d",
        "a",
        "n",
        "a_ci95",
        "a_bias",
        "n_ci95",
        "n_bias",
    ]
    by_key = {row[0]: spans[0] for row, spans in zip(release.rows, release.spans, strict=True)}
    a_span, c_span = by_key["A"], by_key["C"]
    assert a_span is not None and c_span is not None and not c_span.bounded
    counted = query_plan.accuracy()[1].half_width_95
    assert shown.rows == (
        ("A", "9", "1000", repr(a_span.half_width), None, f"{counted:g}", None),
        ("C", "7", "10", "Infinity", None, f"{counted:g}", None),
    )


def test_ci95_of_a_plain_projection_is_per_row() -> None:
    sql = "SELECT department, AVG(stay) AS a FROM visits GROUP BY department"
    query_plan, release = released(sql, [row[:3] for row in EXACT])
    answer = PostProcessor().run(release, query_plan.post_sql)
    columns = reporting.intervals(query_plan, "columns")
    assert columns is not None
    shown = with_intervals(answer, columns, release.bias)
    widths = [row[2] for row in shown.rows]
    expected = [spans[0].half_width for spans in release.spans if spans[0] is not None]
    assert widths == [repr(w) if math.isfinite(w) else "Infinity" for w in expected]
    assert len(set(widths)) == 3


def test_notice_of_one_average_gives_its_interval() -> None:
    query_plan, release = released("SELECT AVG(stay), COUNT(*) FROM visits", [(4000, 1000, 1000)])
    (span, _) = release.spans[0]
    assert span is not None
    text = reporting.detail(query_plan, release)
    places = 2 - math.floor(math.log10(span.half_width))
    stated = (
        f"AVG(stay) ±{span.half_width:.3g} (between {span.lower:.{places}f} and "
        f"{span.upper:.{places}f}); COUNT(*) ±"
    )
    assert stated in text, text


def test_notice_of_averages_by_group_gives_the_range_and_unbounded_groups() -> None:
    query_plan, release = released(BY_DEPARTMENT, EXACT)
    widths = sorted(s[0].half_width for s in release.spans if s[0] is not None and s[0].bounded)
    text = reporting.detail(query_plan, release)
    assert (
        f"AVG(stay) ±{widths[0]:.3g} to ±{widths[-1]:.3g} by group, unbounded in 1 of 3 "
        "groups, whose noisy count is too close to 0 for its noise (unreliable); COUNT(*) ±"
    ) in text, text


def test_notice_of_an_unreliable_average_says_so() -> None:
    _, release = released("SELECT AVG(stay) FROM visits", [(20, 10)])
    query_plan = plan("SELECT AVG(stay) FROM visits", CATALOG, PlanRequest(1.0))
    text = reporting.detail(query_plan, release)
    assert text.startswith(
        "95% confidence of the noise: AVG(stay) unbounded: its noisy count is too close to 0 "
        "for its noise (unreliable)."
    ), text


def test_notice_of_spreads_gives_their_intervals() -> None:
    query_plan, release = released(
        "SELECT VAR_POP(stay), STDDEV(stay) FROM visits", [(0, 1000, 1000)]
    )
    pop, sample = release.spans[0]
    assert pop is not None and sample is not None
    assert pop.lower < 1.0 < pop.upper and sample.lower < 1.0 < sample.upper
    text = reporting.detail(query_plan, release)
    assert f"VAR_POP(stay) ±{pop.half_width:.3g} (between " in text, text
    assert f"STDDEV(stay) ±{sample.half_width:.3g} (between " in text, text


def test_no_group_released_keeps_a_note() -> None:
    query_plan = plan(
        "SELECT stay, AVG(cost) FROM visits GROUP BY stay",
        CATALOG,
        PlanRequest(1.0, delta=1e-6),
    )
    release = query_plan.release([], ZeroNoise())
    assert release.rows == ()
    text = reporting.detail(query_plan, release)
    assert "AVG(cost): an interval per group, from its noisy sum and count" in text, text


def test_ci95_follow_rows_that_tie_in_order_by() -> None:
    # All three means are 9: which two rows LIMIT keeps is DuckDB's choice; each keeps
    # its own group's interval (the post-query runs once, with the rows' positions).
    sql = "SELECT department AS d, AVG(stay) AS a FROM visits GROUP BY d ORDER BY a LIMIT 2"
    query_plan, release = released(sql, [("A", 4000, 1000), ("B", 400, 100), ("C", 120, 30)])
    answer = PostProcessor().run(release, query_plan.post_sql)
    columns = reporting.intervals(query_plan, "columns")
    assert columns is not None
    shown = with_intervals(answer, columns, release.bias)
    by_key = {row[0]: spans[0] for row, spans in zip(release.rows, release.spans, strict=True)}
    assert len(shown.rows) == 2
    for key, _, width, _ in shown.rows:
        span = by_key[key]
        assert span is not None and width == repr(span.half_width)


def test_an_output_named_like_the_row_positions_goes_without_them() -> None:
    sql = 'SELECT department AS "released row", AVG(stay) AS a FROM visits GROUP BY 1 ORDER BY a'
    query_plan, release = released(sql, [row[:3] for row in EXACT])
    answer = PostProcessor().run(release, query_plan.post_sql)
    columns = reporting.intervals(query_plan, "columns")
    assert columns is not None
    shown = with_intervals(answer, columns, release.bias)
    assert [row[:2] for row in shown.rows] == [("B", "3"), ("C", "7"), ("A", "9")]
    assert all(row[2] is None for row in shown.rows)  # no interval known per row: NULL
