"""plan(sql, catalog, request) -> Plan: the rewriter's entry point. Pure: no I/O, no clock,
no randomness. The passes, in order, each in its own module under ``rewriter.passes``, are
listed in PASSES.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, replace
from typing import Literal

from sqlglot import exp

from rewriter.bias import CHECK_SHARE, Check
from rewriter.catalog import Catalog
from rewriter.dialects import dialect as sql_dialect
from rewriter.domain_values import lists_values
from rewriter.errors import Rejected, readable
from rewriter.mechanisms import DiscreteGaussian, DiscreteLaplace
from rewriter.no_rows import NoRows, outer_no_rows, row_probe
from rewriter.parse import parse_statement
from rewriter.partition_selection import PartitionSelection
from rewriter.passes.aggregates import find_aggregates
from rewriter.passes.any_arrays import any_arrays
from rewriter.passes.bias_checks import CheckSpec, plan_checks, unchecked
from rewriter.passes.bound_per_unit import bounded_query
from rewriter.passes.cast_constants import cast_constants
from rewriter.passes.check_joins import check_joins
from rewriter.passes.check_predicate import check_predicate
from rewriter.passes.check_shape import check_shape
from rewriter.passes.collations import default_collation
from rewriter.passes.constants import constants, zone_probe
from rewriter.passes.current_time import constant_dates, constant_truncations, current_time
from rewriter.passes.distinct import check_distinct_delta, distinct
from rewriter.passes.engine_limits import check_engine_limits
from rewriter.passes.group_keys import constant_keys, domain_cells, from_data, group_keys
from rewriter.passes.like_escapes import like_escapes
from rewriter.passes.local_times import local_times
from rewriter.passes.measurements import MeasureKind, MeasurementSpec, plan_measurements
from rewriter.passes.outer_nulls import outer_nullable
from rewriter.passes.post_kinds import released_kinds
from rewriter.passes.post_process import post_query
from rewriter.passes.released_source import released_source, wrapped_post_sql
from rewriter.passes.subqueries import expand_subqueries
from rewriter.passes.time_constants import time_constants
from rewriter.passes.where_cells import where_cells
from rewriter.passes.where_subqueries import WhereSubqueries
from rewriter.plan import Measurement, Plan
from rewriter.quantile_selection import QuantileSelection
from rewriter.written_text import restore_written, written_texts

Dialect = Literal["duckdb", "postgres"]

PASSES = (
    "any_arrays: x = ANY(array of constants) as x IN (…) ('{A,B}', a bound list), and"
    " comparisons and LIKE with ANY or ALL of a typed array as OR or AND of one per element",
    "cast_constants: constants written with a cast (what drivers bind: LIKE 'I%'::varchar,"
    " LIMIT 2::integer) read as the constants where PostgreSQL's value and meaning are the"
    " same; LIMIT ALL, LIMIT NULL and OFFSET NULL dropped",
    "time_constants: to_date(text, format), to_timestamp(text, format), to_timestamp(number)"
    " and timestamp with time zone constants as literals, read as PostgreSQL reads them in the"
    " session's TimeZone",
    "current_time: CURRENT_DATE, now() … and the constant date arithmetic around them as"
    " literals, at the time the statement arrived",
    "released_source: a query around a DP subquery (BI tools' wrappers) is post-processing"
    " of the subquery's released rows",
    "subqueries: CTEs and FROM subqueries inlined (row-level) or made per-person tables",
    "check_shape: one SELECT over one protected table",
    "distinct: SELECT DISTINCT of keys alone is a GROUP BY of its select list (keys from"
    " the data, partition selection); over aggregates, DISTINCT of the released rows",
    "check_predicate: WHERE is a row-level predicate over allowed expressions; subqueries"
    " in it are public or matched on the person (where_subqueries)",
    "row_functions: in every row-level expression (check_predicate, data_keys), nullif, left"
    " and concat as the CASE, substring and || of coalesce that compute them as PostgreSQL",
    "check_joins: protected tables joined along the privacy unit; per-person row bounds",
    "group_keys: GROUP BY keys and their public domains (or, with δ > 0, keys from the data,"
    " released through partition selection)",
    "where_cells: the cells of public domains that WHERE rules out by the keys and"
    " constants alone (department = 'A' GROUP BY department) are not released",
    "aggregates: the aggregates, and the post-processing expressions over them (window"
    " functions over the released groups: post_windows)",
    "measurements: integer measurements with per-unit bounds (fixed-point grid for reals)",
    "bound_per_unit: per-unit partials, at most max_groups_per_unit groups per unit, clamped,"
    " summed across units",
    "eager_partials: partials summed per unit before the joins that only hang off the unit"
    " (bound_per_unit): the same numbers, without joining every row",
    "bias_checks: with SET dpproxy.bias_check = on, counts of the persons whose values"
    " were clamped or rows cut, computed beside the partials (bound_per_unit)",
    "post_process: select list, HAVING, ORDER BY, LIMIT over the released values",
    "collations: on PostgreSQL, the text each LIKE and ILIKE matches is read under the"
    " database's default collation (a nondeterministic one fails on the rows reaching it)",
    "like_escapes: on DuckDB (and in post-processing), ESCAPE '\\' after each LIKE and ILIKE"
    " whose pattern holds a backslash, PostgreSQL's default escape character",
    "local_times: each timestamp with time zone read as its local time in the session's"
    " TimeZone, written so (compared ones stay instants, value_types.zoned)",
    "constants: the constant expressions of the bounded query, which the proxy evaluates"
    " on their own before charging (DuckDB fails on a constant only on the rows that"
    " evaluate it)",
)


NoiseKind = Literal["laplace", "gaussian"]


@dataclass(frozen=True)
class PlanRequest:
    """``epsilon``: the query's ε. With ``mechanism="gaussian"`` the query spends
    ρ = ε²/2 (the zCDP cost of a pure ε query, so noise of about the same size).
    ``delta``: the δ the query may spend on partition selection (releasing GROUP BY keys
    found in the data); 0 refuses keys without a public domain. ``bias_check``: spend
    CHECK_SHARE of the query's ε (or ρ) on counting the persons whose values were clamped
    or rows cut (``rewriter.bias``). ``time_zone``: the session's TimeZone (as SHOW
    TimeZone shows it), in which a query reads the dates and times of timestamps with
    time zone (``rewriter.zones``; a zone the engines read differently is refused there)."""

    epsilon: float
    dialect: Dialect = "duckdb"
    mechanism: NoiseKind = "laplace"
    delta: float = 0.0
    bias_check: bool = False
    time_zone: str = "UTC"
    #: When the statement arrived (aware): CURRENT_DATE, now() … read it
    #: (``rewriter.passes.current_time``); None refuses a query that reads the clock.
    now: dt.datetime | None = None


def plan(sql: str, catalog: Catalog, request: PlanRequest) -> Plan:
    if not (math.isfinite(request.epsilon) and request.epsilon > 0):
        raise Rejected(
            f"epsilon must be a positive number, got {request.epsilon}",
            sqlstate="22023",
            hint="SET dpproxy.epsilon = 0.5",
        )
    if not (math.isfinite(request.delta) and 0 <= request.delta < 1):
        raise Rejected(
            f"delta must be a number from 0 to below 1, got {request.delta}",
            sqlstate="22023",
            hint="SET dpproxy.delta = 1e-9",
        )
    try:
        return _plan(sql, catalog, request)
    except Rejected as rejection:
        raise readable(rejection) from None
    except RecursionError:
        raise Rejected(
            "the statement is nested too deeply", sqlstate="54001", hint="simplify the query"
        ) from None


def _plan(sql: str, catalog: Catalog, request: PlanRequest) -> Plan:
    catalog = catalog.in_zone(request.time_zone)
    statement = parse_statement(sql)
    any_arrays(statement)
    cast_constants(statement)
    time_constants(statement, request.time_zone)
    clock = current_time(statement, request.now, request.time_zone)
    constant_dates(statement)
    constant_truncations(statement, request.time_zone)
    written = written_texts(statement) if clock else {}
    try:
        return _marked_no_rows(statement, catalog, request, clock=clock)
    except Rejected as rejection:  # quoting CURRENT_DATE, not the date it stood for
        raise restore_written(rejection, written) from None


def _marked_no_rows(
    statement: exp.Expr, catalog: Catalog, request: PlanRequest, *, clock: bool
) -> Plan:
    """The plan, marked (``no_rows``) when the SQL text alone shows that its answer has no
    rows (``rewriter.no_rows``). A row-level probe is planned as the count of its rows."""
    empty = outer_no_rows(statement)
    if empty is None:
        return _planned(statement, catalog, request, clock=clock)
    probe = row_probe(statement)
    if probe is not None:
        made = _planned(probe.counted, catalog, request, clock=clock)
        return replace(made, no_rows=NoRows(empty.reason, probe.columns(catalog)))
    # A DP query's own WHERE does not count: its answer may have rows all the same. (The
    # first thing _planned does is this, before it changes the statement.)
    counts = not empty.by_where or released_source(statement, catalog) is not None
    made = _planned(statement, catalog, request, clock=clock)
    return replace(made, no_rows=NoRows(empty.reason)) if counts else made


def _planned(statement: exp.Expr, catalog: Catalog, request: PlanRequest, *, clock: bool) -> Plan:
    wrapped = released_source(statement, catalog)
    if wrapped is not None:  # a query around a DP subquery: post-processing of its answer
        inner = _planned(wrapped.inner, catalog, request, clock=clock)
        kinds = released_kinds(_integers(inner))
        return replace(inner, post_sql=wrapped_post_sql(wrapped, inner.post_sql, kinds))
    tree, catalog = expand_subqueries(statement, catalog)
    shape = distinct(check_shape(tree, catalog))
    joins = check_joins(shape)
    where = None
    if shape.where is not None:
        subqueries = WhereSubqueries(
            catalog, expand_subqueries, enclosing=joins.several, nullable=outer_nullable(shape)
        )
        where = check_predicate(shape.where, shape.scope, subqueries=subqueries, condition=True)
    keys = group_keys(shape, data_keys=request.delta > 0 or shape.keys_only)
    check_distinct_delta(shape, keys, request.delta)
    cells = where_cells(where, keys, shape.scope)
    values_only = lists_values(shape, where, keys)
    aggregates, post = find_aggregates(shape, keys, values_only=values_only)
    if not aggregates and values_only:  # the keys' declared values alone, free
        listed = Plan(
            sql="",  # nothing is run
            dialect=request.dialect,
            table=shape.table.name,
            keys=keys,
            measurements=(),
            outputs=(),
            post_sql="",
            epsilon=0.0,
            max_rows_per_unit=joins.max_rows_per_unit,
            max_groups_per_unit=1,
            cells=cells,
            domain_values=True,
        )
        return replace(listed, post_sql=post_query(post, _integers(listed)))
    specs, outputs = plan_measurements(aggregates, joins.max_rows_per_unit)
    selected = from_data(keys)  # partition selection: one more share of the budget
    shares = len(specs) + selected
    # The groups one unit can touch: at most max_groups, and at most max_rows (each group
    # it keeps holds at least one of its rows, bound_per_unit), and the domain's cells.
    groups = min(joins.max_groups_per_unit, joins.max_rows_per_unit) if keys else 1
    if keys and not selected:
        groups = min(groups, len(domain_cells(keys)))
    checks: tuple[CheckSpec, ...] = ()
    blind: tuple[str, ...] = ()
    if request.bias_check:
        blind = unchecked(shape.scope)
        checks = plan_checks(
            specs,
            outputs,
            shape.scope,
            max_rows=joins.max_rows_per_unit,
            max_groups=joins.max_groups_per_unit,
            grouped=bool(keys),
        )
    # With bias checks, the aggregates (and partition selection) share what they leave.
    kept = 1 - CHECK_SHARE if checks else 1.0
    measurements = _measure(specs, groups, request, _share(request, shares, kept))
    query = bounded_query(
        shape.scope,
        joins,
        where=where,
        keys=keys,
        measurements=specs + ((SELECTION_UNITS,) if selected else ()),
        max_groups=joins.max_groups_per_unit,
        checks=checks,
    )
    check_engine_limits(query, request.dialect)
    # One walk finds the columns of local_times and the LIKEs of like_escapes: neither
    # pass adds, removes or moves a node of the other's kind.
    found_nodes = list(query.find_all(exp.Column, exp.Like, exp.ILike))
    zone = local_times(query, [n for n in found_nodes if isinstance(n, exp.Column)])
    if request.dialect == "postgres":
        default_collation(query)  # LIKE never fails for a column's collation
    else:  # a backslash in a LIKE pattern escapes, as in PostgreSQL
        like_escapes(query, [n for n in found_nodes if not isinstance(n, exp.Column)])
    found = constants(query, request.dialect)
    held = constant_keys(shape)  # GROUP BY ABS(0): no key, but evaluated as a constant
    if held:
        more = constants(exp.Tuple(expressions=list(held)), request.dialect)
        found = (*found, *(c for c in more if c not in found))
    if zone is not None:  # the engine must know the zone, or the query is refused free
        found = (*found, zone_probe(zone, request.dialect))
    made = Plan(
        sql=query.sql(dialect=sql_dialect(request.dialect), copy=False),  # the tree is not kept
        dialect=request.dialect,
        table=shape.table.name,
        keys=keys,
        measurements=measurements,
        outputs=outputs,
        post_sql="",  # below, once the released columns' types are known
        epsilon=request.epsilon if request.mechanism == "laplace" else 0.0,
        rho=request.epsilon**2 / 2 if request.mechanism == "gaussian" else 0.0,
        max_rows_per_unit=joins.max_rows_per_unit,
        max_groups_per_unit=groups,
        selection=(
            _select_partitions(groups, request, _share(request, shares, kept)) if selected else None
        ),
        checks=_checks(checks, request),
        unchecked=blind,
        constants=found,
        time_zone=zone,
        now=request.now if clock else None,
        cells=cells,
    )
    return replace(made, post_sql=post_query(post, _integers(made)))


def _integers(made: Plan) -> set[str]:
    """The released columns that hold integers."""
    return {name for name, kind in made.released_columns if kind in INTEGER_TYPES}


#: The released columns' types that hold integers (a numeric cast keeps no decimals).
INTEGER_TYPES = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT"})


def _measure(
    specs: tuple[MeasurementSpec, ...], groups: int, request: PlanRequest, share: float
) -> tuple[Measurement, ...]:
    """Give each measurement ``share`` of the query's ε (Laplace: L1 over the groups) or ρ
    (Gaussian): one equal share per measurement, one more for partition selection.

    Counts and sums: the partials of all of one unit's kept groups add up, in absolute
    value, to at most one group's bound (``bound_per_unit``: rows are budgeted across
    groups), so their L1 and L2 sensitivities are ``unit_bound`` whatever the groups.
    Units (1 per group) and quantiles (a selection per group) count each of the
    ``groups`` groups a unit can touch."""
    if request.mechanism == "gaussian":  # the share is of ρ
        return tuple(
            Measurement(
                s, QuantileSelection.for_rho(s.alpha, s.unit_upper, share, groups), 0.0, share
            )
            if s.alpha is not None
            else Measurement(
                s, DiscreteGaussian.for_rho(s.unit_bound, share, _touched(s, groups)), 0.0, share
            )
            for s in specs
        )
    return tuple(
        Measurement(s, QuantileSelection.for_epsilon(s.alpha, s.unit_upper, share, groups), share)
        if s.alpha is not None
        else Measurement(
            s, DiscreteLaplace.for_epsilon(_touched(s, groups) * s.unit_bound, share), share
        )
        for s in specs
    )


def _share(request: PlanRequest, shares: int, part: float = 1.0) -> float:
    """One of ``shares`` equal shares of ``part`` of the query's ε (Laplace) or ρ = ε²/2
    (Gaussian), a hair below it, so that the float sum of all shares' privacy maps never
    exceeds what is charged."""
    total = request.epsilon**2 / 2 if request.mechanism == "gaussian" else request.epsilon
    return total * part / shares * (1 - 1e-12)


def _checks(specs: tuple[CheckSpec, ...], request: PlanRequest) -> tuple[Check, ...]:
    """Each bias check: an equal share of CHECK_SHARE of the query's ε or ρ; one person
    changes each check's total (over all groups) by at most 1."""
    if not specs:
        return ()
    share = _share(request, len(specs), CHECK_SHARE)
    if request.mechanism == "gaussian":
        return tuple(Check(s, DiscreteGaussian.for_rho(1, share), rho=share) for s in specs)
    return tuple(Check(s, DiscreteLaplace.for_epsilon(1, share), epsilon=share) for s in specs)


def _touched(spec: MeasurementSpec, groups: int) -> int:
    """How many groups' totals one unit can change, each by at most ``unit_bound``, for the
    sensitivity: ``groups`` for units; 1 for counts and sums, whose partials over all of a
    unit's groups add up to at most ``unit_bound`` in absolute value."""
    return groups if spec.kind is MeasureKind.UNITS else 1


#: Partition selection's measurement: 1 for each privacy unit in the group (after each unit
#: keeps at most max_groups_per_unit groups). Its column follows the plan's measurements.
SELECTION_UNITS = MeasurementSpec("units", MeasureKind.UNITS, None, None, None, None, 0, 1)


def _select_partitions(groups: int, request: PlanRequest, share: float) -> PartitionSelection:
    """Partition selection with ``share`` of the query's ε (or ρ) and all of its δ: a
    threshold on the noisy unit count (``rewriter.partition_selection``)."""
    if request.mechanism == "gaussian":
        return PartitionSelection.gaussian(groups, share, request.delta)
    return PartitionSelection.laplace(groups, share, request.delta)
