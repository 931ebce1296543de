"""Bias checks (``SET dpproxy.bias_check = on``): how many persons were clamped or cut.

Clamping values to their declared bounds and counting at most ``max_rows_per_unit`` rows
and ``max_groups_per_unit`` groups per person keep each person's influence small, at the
price of bias when many persons have values beyond the bounds or more rows than counted.
Whether that happened cannot be seen without reading the data, so a checked query spends a
share of its budget (``rewriter.bias``) on noisy counts of the persons concerned:

- ``cut``: persons whose rows were not all counted: more than ``max_rows_per_unit`` rows
  (in all groups together) or, with GROUP BY, more than ``max_groups_per_unit`` groups;
- ``clamped``, one per bounded column that a sum, average, variance or quantile reads:
  persons with a value of that column outside its declared bounds (NaN and ±infinity
  included), which cleaning clamped or dropped.

Per-person subqueries (``FROM (SELECT pid, COUNT(*) AS n … GROUP BY pid) s``) clamp inside
the subquery, which the checks do not see: their columns are not checked, and the NOTICE
says so (:func:`unchecked`).

Each check counts every person at most once over the whole answer, whatever the groups
(its sensitivity is 1): the bounded SQL computes, per person and group, whether the
person is concerned, spreads it over the person's groups with a window, and counts it in
the person's first group in the random order (always kept); the proxy adds up the groups.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from sqlglot import exp

from rewriter.passes import zoned_bounds
from rewriter.passes.measurements import MeasureKind, MeasurementSpec, OutputSpec
from rewriter.scope import Scope, Source
from rewriter.sql_values import as_double, in_double_range, integer, moment, number

PERSON_SUFFIX = "_person"


class CheckKind(Enum):
    CUT = "cut"
    CLAMPED = "clamped"


@dataclass(frozen=True)
class CheckSpec:
    key: str  # its column in the bounded SQL: b0, b1, …
    kind: CheckKind
    description: str  # who is counted, for the NOTICE
    outputs: tuple[int, ...]  # the positions of the answer's aggregates it concerns
    outside: exp.Expr | None = None  # CLAMPED: 1 for a row whose value was clamped, else 0


def plan_checks(
    specs: tuple[MeasurementSpec, ...],
    outputs: tuple[OutputSpec, ...],
    scope: Scope,
    *,
    max_rows: int,
    max_groups: int,
    grouped: bool,
) -> tuple[CheckSpec, ...]:
    """The checks of a query: ``cut`` when some person could have rows or groups left out
    (always with GROUP BY; without it, unless the query only counts persons), and one
    ``clamped`` per bounded column read by a sum or a quantile."""
    checks: list[CheckSpec] = []
    # Rows of per-person subqueries are one per person, already bounded and clamped.
    derived_only = all(s.table.derived is not None for s in scope.protected)
    counts_rows = any(s.kind is not MeasureKind.UNITS for s in specs)
    if (grouped or counts_rows) and not derived_only:
        limits = f"more than {max_rows} row(s)"
        if grouped:
            limits += f" in all groups together, or more than {max_groups} group(s)"
        checks.append(
            CheckSpec(
                f"b{len(checks)}",
                CheckKind.CUT,
                f"persons with {limits}, whose rows were not all counted",
                tuple(range(len(outputs))),
            )
        )
    by_key = {s.key: s for s in specs}
    seen: set[tuple[str, str]] = set()
    for spec in specs:
        if spec.kind not in (MeasureKind.SUM, MeasureKind.BINS) or spec.argument is None:
            continue
        for column in spec.argument.find_all(exp.Column):
            identity = (column.table, column.name)
            if identity in seen:
                continue
            outside = _outside(column, scope)
            if outside is None:
                continue
            seen.add(identity)
            concerned = tuple(
                i
                for i, output in enumerate(outputs)
                if _reads(by_key.get(output.numerator), identity)
                or (output.squares is not None and _reads(by_key.get(output.squares), identity))
            )
            checks.append(
                CheckSpec(
                    f"b{len(checks)}",
                    CheckKind.CLAMPED,
                    f"persons with a value of {_name(column, scope)} outside its declared "
                    f"bounds {_bounds_text(column, scope)}, clamped or dropped",
                    concerned,
                    outside,
                )
            )
    return tuple(checks)


def unchecked(scope: Scope) -> tuple[str, ...]:
    """What the checks cannot see in this query, for the NOTICE."""
    if any(s.table.derived is not None for s in scope.sources):
        return (
            "values clamped and rows bounded inside a per-person subquery are not checked "
            "(its result is one bounded row per person)",
        )
    return ()


def inner_selects(checks: tuple[CheckSpec, ...]) -> list[exp.Expr]:
    """Per person and group: 1 if one of its rows has a value outside the bounds."""
    selects: list[exp.Expr] = []
    for check in checks:
        if check.outside is None:
            continue
        flag = exp.Max(this=check.outside.copy())
        selects.append(exp.alias_(flag, check.key, quoted=True, copy=False))
    return selects


def person_selects(
    checks: tuple[CheckSpec, ...],
    *,
    unit: exp.Column,
    group_rows: exp.Column,
    max_rows: int,
    max_groups: int,
) -> list[exp.Expr]:
    """With GROUP BY, on every row of a person: 1 if the person is concerned (windows over
    all of the person's groups, kept or not)."""
    selects: list[exp.Expr] = []
    for check in checks:
        if check.kind is CheckKind.CUT:
            groups = exp.Window(this=exp.Count(this=exp.Star()), partition_by=[unit.copy()])
            rows = exp.Window(this=exp.Sum(this=group_rows.copy()), partition_by=[unit.copy()])
            concerned: exp.Expr = _indicator(
                exp.or_(
                    exp.GT(this=groups, expression=integer(max_groups)),
                    exp.GT(this=rows, expression=integer(max_rows)),
                )
            )
        else:
            column = exp.column(check.key, table=group_rows.table, quoted=True)
            concerned = exp.Window(this=exp.Max(this=column), partition_by=[unit.copy()])
        name = check.key + PERSON_SUFFIX
        selects.append(exp.alias_(concerned, name, quoted=True, copy=False))
    return selects


def totals(
    checks: tuple[CheckSpec, ...],
    *,
    per_unit: str,
    rank: exp.Column | None,
    group_rows: exp.Column,
    max_rows: int,
) -> list[exp.Expr]:
    """The outer query's count per check: with GROUP BY (``rank`` given), the persons
    concerned whose first group this is; without, the persons concerned (one row each)."""
    selects: list[exp.Expr] = []
    for check in checks:
        if rank is not None:
            person = exp.column(check.key + PERSON_SUFFIX, table=per_unit, quoted=True)
            first = exp.EQ(this=rank.copy(), expression=integer(1))
            counted: exp.Expr = exp.Case(
                ifs=[exp.If(this=first, true=person)], default=exp.Literal.number(0)
            )
        elif check.kind is CheckKind.CUT:
            counted = _indicator(exp.GT(this=group_rows.copy(), expression=integer(max_rows)))
        else:
            counted = exp.column(check.key, table=per_unit, quoted=True)
        total = exp.func("COALESCE", exp.Sum(this=counted), exp.Literal.number(0))
        selects.append(exp.alias_(total, check.key, quoted=True, copy=False))
    return selects


def _indicator(condition: exp.Expr) -> exp.Expr:
    return exp.Case(
        ifs=[exp.If(this=condition, true=exp.Literal.number(1))],
        default=exp.Literal.number(0),
    )


def _outside(column: exp.Column, scope: Scope) -> exp.Expr | None:
    """1 for a value that cleaning changes (``bound_per_unit.clean``), else 0 (NULL: 0);
    None for a column without bounds or of a per-person subquery (whose values the
    subquery already clamped).

    Compared as cleaning compares, so that no comparison can fail on some value (an error
    that would depend on the data): integers with the bounds rounded inwards to integers,
    reals and decimals as DOUBLE once known to lie within its range (beyond it, NaN and
    ±infinity are dropped: concerned), with magnitudes below TINY taken as 0 first
    (PostgreSQL refuses to cast a numeric that small); dates as dates."""
    info = scope.info(column)
    if _source(column, scope).table.derived is not None:
        return None
    dates = info.date_bounds
    bounds = info.policy.bounds
    if info.zoned:  # compared as an instant, as cleaning clamps it
        beyond = zoned_bounds.outside(column, info)
        return None if beyond is None else _indicator(beyond)
    if dates is not None:
        low, high = (moment(d, info.type) for d in dates)
        return _indicator(_beyond(column.copy(), low, high))
    if bounds is None or not info.type.numeric:
        return None
    whole = info.whole_bounds
    if whole is not None:
        low, high = (integer(b) for b in whole)
        return _indicator(_beyond(column.copy(), low, high))
    value = as_double(column, info.type)
    beyond = _beyond(value, number(bounds[0]), number(bounds[1]))
    return exp.Case(
        ifs=[
            exp.If(
                this=exp.Not(this=in_double_range(column, info.type)),
                true=exp.Literal.number(1),
            ),
            exp.If(this=beyond, true=exp.Literal.number(1)),
        ],
        default=exp.Literal.number(0),
    )


def _beyond(value: exp.Expr, low: exp.Expr, high: exp.Expr) -> exp.Expr:
    return exp.or_(
        exp.LT(this=value, expression=low),
        exp.GT(this=value.copy(), expression=high),
    )


def _reads(spec: MeasurementSpec | None, identity: tuple[str, str]) -> bool:
    if spec is None or spec.argument is None:
        return False
    return any((c.table, c.name) == identity for c in spec.argument.find_all(exp.Column))


def _source(column: exp.Column, scope: Scope) -> Source:
    for source in scope.sources:
        if source.alias == column.table:
            return source
    raise ValueError(f"unresolved column {column.sql()}")


def _name(column: exp.Column, scope: Scope) -> str:
    return f"{_source(column, scope).reference}.{scope.info(column).name}"


def _bounds_text(column: exp.Column, scope: Scope) -> str:
    info = scope.info(column)
    dates = info.date_bounds
    if dates is not None:
        return f"[{dates[0].isoformat()}, {dates[1].isoformat()}]"
    if info.policy.bounds is None:
        return "(none)"
    low, high = info.policy.bounds
    return f"[{low:g}, {high:g}]"
