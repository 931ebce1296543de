"""How an answer reports its cost and its accuracy: the NOTICE that comes with it (what it
cost, what is left, the 95% interval of each aggregate's noise, the bounds, the groups, what
the bias checks found) and, with ``SET dpproxy.report = columns``, the ``<name>_ci95`` and
``<name>_bias`` columns.

Apart from ``proxy.pipeline`` because it is presentation only: it runs after the release,
from values the pipeline already has, and changes nothing that is charged or recorded.
"""

from __future__ import annotations

import math
from dataclasses import replace
from decimal import Decimal
from typing import Literal

from accountant import AnalystBudget, AuditRecord, Cost, Epsilon, Reservation
from accountant.budget import format_delta
from proxy.asker import Asker
from proxy.postprocess import Answer, ReportColumn, interval_columns, with_intervals
from proxy.seam import Notice, StatementResult
from rewriter import Plan, Release
from rewriter.bias import CHECK_SHARE
from rewriter.derived_intervals import Span

#: ``SET dpproxy.report``: intervals (and bias flags) in a NOTICE only, or also as
#: ``<name>_ci95`` and ``<name>_bias`` columns.
Report = Literal["notice", "columns"]


def intervals(query_plan: Plan, report: Report) -> tuple[ReportColumn, ...] | None:
    if report != "columns":
        return None
    return interval_columns(query_plan.released_columns, query_plan.accuracy(), query_plan.post_sql)


def charged_answer(
    query_plan: Plan,
    released: Release,
    answer: Answer,
    *,
    asker: Asker,
    cost: Cost,
    reservation: Reservation,
    record: AuditRecord,
    report: Report,
    bias_check: bool,
) -> StatementResult:
    """The statement's result for an answer charged by ``reservation`` and recorded as
    ``record``: with its interval and bias columns (``report``), and its NOTICE."""
    remaining = record.remaining if record.remaining is not None else reservation.remaining_after
    total = reservation.total if reservation.total is not None else asker.budget.total
    columns = intervals(query_plan, report)
    notes: tuple[Notice, ...] = ()
    if columns is not None:
        answer = with_intervals(answer, columns, released.bias)
    elif report == "columns":
        notes = (
            Notice(
                message="dpproxy.report = columns: no _ci95 or _bias columns for this query",
                detail="they are added when the select list names aggregates and "
                "GROUP BY keys directly (no arithmetic on them); "
                "see the other notice for the intervals of the aggregates and any bias",
            ),
        )
    result = _result(
        query_plan,
        released,
        answer,
        asker=asker,
        cost=cost,
        remaining=remaining,
        total=total,
        delta_left=reservation.delta_remaining if cost.delta else None,
        bias_check=bias_check,
    )
    return replace(result, notices=result.notices + notes)


def _result(
    query_plan: Plan,
    released: Release,
    answer: Answer,
    *,
    asker: Asker,
    cost: Cost,
    remaining: Epsilon,
    total: Epsilon,
    delta_left: Decimal | None = None,
    bias_check: bool = False,
) -> StatementResult:
    notice = Notice(
        message=(
            f"dpproxy: this answer cost {cost}; {asker.analyst} has {remaining} left of {total}"
            + (f" (at δ={_delta(asker.budget)})" if query_plan.gaussian else "")
            + (
                f"; δ={format_delta(delta_left)} left for partition selection"
                if delta_left is not None
                else ""
            )
        ),
        detail=detail(query_plan, released, bias_check),
    )
    return StatementResult(
        tag=f"SELECT {len(answer.rows)}",
        columns=answer.columns,
        rows=answer.rows,
        notices=(notice,),
    )


def detail(query_plan: Plan, released: Release, bias_check: bool = False) -> str:
    """The NOTICE's detail: the 95% interval of each aggregate's noise, the bounds, what
    the bias checks found (``SET dpproxy.bias_check = on``) and the free bias hints."""
    intervals = []
    for index, accuracy in enumerate(released.accuracy):
        spans = [row[index] for row in released.spans]
        if any(span is not None for span in spans):
            intervals.append(f"{accuracy.label} {spread_text([s for s in spans if s])}")
        elif accuracy.half_width_95 is not None:
            intervals.append(f"{accuracy.label} ±{format_width(accuracy.half_width_95)}")
        elif accuracy.note:
            intervals.append(f"{accuracy.label}: {accuracy.note}")
    groups = ""
    if query_plan.keys and query_plan.selection is not None:
        groups = (
            f" Each person counts in at most {query_plan.max_groups_per_unit} group(s). "
            "The groups are keys found in the data: a group is released only if its noisy "
            f"count of persons reaches {query_plan.selection.threshold} (partition selection); "
            f"{len(released.rows)} group(s) are released."
        )
    elif query_plan.keys:
        groups = (
            f" Each person counts in at most {query_plan.max_groups_per_unit} group(s); "
            f"{len(released.rows)} group(s) from the public domain are released."
        )
    warnings = "".join(f" Possible bias: {warning}." for warning in released.warnings)
    # A query of GROUP BY keys alone (SELECT DISTINCT) has no noisy value and no clamp.
    noise = f"95% confidence of the noise: {'; '.join(intervals)}. " if intervals else ""
    clamped = "; values are clamped to their declared bounds" if query_plan.measurements else ""
    return (
        noise + f"Each person counts for at most {query_plan.max_rows_per_unit} row(s) of "
        f"{query_plan.table}{clamped}."
        + groups
        + _bias_checks(query_plan, released, bias_check)
        + warnings
    )


def _bias_checks(query_plan: Plan, released: Release, bias_check: bool) -> str:
    """What the bias checks found, or (checks asked for) that none applies."""
    budget = "ρ" if query_plan.gaussian else "ε"
    blind = "".join(f" Not checked: {note}." for note in query_plan.unchecked)
    if released.checks:
        return (
            f" Bias check ({CHECK_SHARE:.0%} of this query's {budget}): "
            + "; ".join(released.checks)
            + "."
            + blind
        )
    if bias_check:
        return (
            f" Bias check: none applies to this query, so none of its {budget} went to checks."
            + blind
        )
    return ""


def _delta(budget: AnalystBudget) -> str:
    return format_delta(budget.delta)


def spread_text(spans: list[Span]) -> str:
    """An average's, variance's or standard deviation's interval: for one group the ± that
    covers both sides and where its noise-free value lies; for several, the range of the ±
    over the groups; and where the noisy count is within its noise of 0, that it is
    unbounded (``rewriter.derived_intervals``)."""
    bounded = [span for span in spans if span.bounded]
    unreliable = len(spans) - len(bounded)
    if len(spans) == 1:
        (span,) = spans
        if not bounded:
            return f"unbounded: its noisy count is {_UNRELIABLE}"
        places = _places(span.half_width)
        return (
            f"±{format_width(span.half_width)} (between {span.lower:,.{places}f} and "
            f"{span.upper:,.{places}f})"
        )
    widths = sorted(span.half_width for span in bounded)
    text = ""
    if widths:
        low, high = format_width(widths[0]), format_width(widths[-1])
        text = f"±{low}" if low == high else f"±{low} to ±{high} by group"
    if unreliable:
        text += (", " if text else "") + (
            f"unbounded in {unreliable} of {len(spans)} groups, whose noisy count is " + _UNRELIABLE
        )
    return text


_UNRELIABLE = "too close to 0 for its noise (unreliable)"


def _places(width: float) -> int:
    """Decimal places that show a width's third significant digit."""
    if width <= 0 or not math.isfinite(width):
        return 0
    return min(12, max(0, 2 - math.floor(math.log10(width))))


def format_width(width: float) -> str:
    if width >= 100:
        return f"{width:,.0f}"
    return f"{width:.3g}"
