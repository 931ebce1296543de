"""Pass 6: write the bounded SQL that the database runs.

Per privacy unit first: the innermost query groups the rows (after the WHERE) by unit and
GROUP BY keys and computes each measurement's partial: COUNT of rows or values, 1 for the
unit, SUM of values clamped to their bounds on the integer grid. Columns are cleaned before
use: NaN and infinities become NULL, numeric values are clamped to their declared bounds.
With GROUP BY, each unit keeps at most ``max_groups_per_unit`` groups, taken in an order
drawn at random (independently of the data), and only as many of them as fit within
``max_rows_per_unit`` rows in all: a group is kept while the unit's rows in it and in the
groups before it, each group's counted as at most ``max_rows_per_unit``, add up to at
most ``max_rows_per_unit`` (whole groups are kept or dropped, so that an average's sum
and count describe the same rows). The outer query clamps every partial to the per-unit
limits and sums across units, per group. The result: one row per group present, with the
keys and one exact integer per measurement.

Why the row budget across groups: a kept group's partial of a count or sum is at most
its rows (at most ``max_rows_per_unit``) times the largest value in magnitude, so the
partials of all of a unit's kept groups add up, in absolute value, to at most
``max_rows_per_unit`` times the largest value: the L1 (and L2) sensitivity over all groups
is one group's, not ``max_groups_per_unit`` times it. A unit keeps at most
min(``max_groups_per_unit``, ``max_rows_per_unit``) groups (each kept group has a row).

Quantiles (``MeasureKind.BINS``) need rows, not sums: their rows are chosen before the
per-unit grouping. Then the rows (after the WHERE) first go through a row-level query that
names the columns the per-unit query reads (``c0, c1, …``) and computes each quantile's bin
index, and a second one that ranks, per unit, group and quantile, the rows with a value in
the order of a random draw per row (``ROW_NUMBER() OVER (… ORDER BY row_draw)``). The
per-unit query counts, per bin, the rows ranked at most ``max_rows_per_unit``: a random
subset of at most that many rows per unit and group, chosen independently of the values.
The outer query returns the bins' totals as one array per quantile.

Bias checks (``rewriter.passes.bias_checks``), when asked for, add one column per check
after the measurements: per unit and group whether a value lies outside its bounds, per
unit (windows over its groups) whether it was clamped or cut, counted once per unit.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.catalog import ColumnType
from rewriter.exact_sums import ExactSum, exact_sums
from rewriter.passes import zoned_bounds
from rewriter.passes.bias_checks import CheckSpec, inner_selects, person_selects, totals
from rewriter.passes.check_joins import JoinBounds
from rewriter.passes.eager_partials import eager_partials
from rewriter.passes.group_keys import DomainValue, GroupKey
from rewriter.passes.measurements import MeasureKind, MeasurementSpec
from rewriter.scope import Scope, Source
from rewriter.sql_joins import add_join
from rewriter.sql_values import (
    TINY,
    as_double,
    between_keeping_null,
    bound,
    in_double_range,
    integer,
    least_greatest,
    moment,
    number,
    per_value_partial,
)
from rewriter.underflow import flushed_bounds
from rewriter.zones import is_local

UNIT_ALIAS = "u"
RANKED_ALIAS = "r"
UNIT_COLUMN = "unit_id"
RANK_COLUMN = "group_rank"
RANDOM_COLUMN = "group_draw"
GROUP_ROWS_COLUMN = "group_rows"  # the unit's rows in the group
ROWS_SO_FAR_COLUMN = "rows_so_far"  # the unit's rows in this group and those before it
ROWS_ALIAS = "w"  # quantiles: the row-level query
PICKED_ALIAS = "p"  # quantiles: the rows with their random order per unit and group
BIN_SUFFIX = "_bin"
PICK_SUFFIX = "_pick"
ROW_DRAW = "row_draw"  # quantiles: a random draw per row, to pick each unit's rows
REAL_TYPES = (ColumnType.FLOAT, ColumnType.DECIMAL)
#: A text key's public domain of at most this many values is kept with a CASE of them.
_CASE_VALUES = 32


def bounded_query(
    scope: Scope,
    joins: JoinBounds,
    *,
    where: exp.Expr | None,
    keys: tuple[GroupKey, ...],
    measurements: tuple[MeasurementSpec, ...],
    max_groups: int,
    checks: tuple[CheckSpec, ...] = (),
) -> exp.Select:
    unit_ref = joins.unit
    selects: list[exp.Expr] = [exp.alias_(unit_ref.copy(), UNIT_COLUMN, quoted=True)]
    selects.extend(exp.alias_(k.expression.copy(), k.name, quoted=True) for k in keys)
    binned = [m for m in measurements if m.kind is MeasureKind.BINS]
    exact = exact_sums(measurements, scope, lambda condition: clean(condition, scope))
    selects.extend(_partials(measurements, scope, exact))
    selects.extend(inner_selects(checks))
    if keys:
        # A random draw per (unit, group), independent of the data, to choose the groups.
        selects.append(exp.alias_(exp.Rand(), RANDOM_COLUMN, quoted=True, copy=False))
    if keys or checks:
        selects.append(
            exp.alias_(exp.Count(this=exp.Star()), GROUP_ROWS_COLUMN, quoted=True, copy=False)
        )
    grouping = [unit_ref.copy(), *(k.expression.copy() for k in keys)]
    conditions: list[exp.Expr] = []
    if where is not None:
        conditions.append(exp.Paren(this=where.copy()))
    # Keys with a public domain keep only its values; keys from the data keep all.
    conditions.extend(_in_domain(k.expression, k.domain) for k in keys if k.domain is not None)
    conditions.append(exp.Not(this=exp.Is(this=unit_ref.copy(), expression=exp.Null())))
    if binned:
        rows = _row_level(
            scope,
            joins,
            conditions=conditions,
            selects=selects,
            grouping=grouping,
            binned=binned,
        )
        inner = exp.select(*(rows.named(s, PICKED_ALIAS) for s in selects)).from_(
            rows.picked(grouping), copy=False
        )
        inner = inner.group_by(*(rows.named(g, PICKED_ALIAS) for g in grouping), copy=False)
    else:
        eager = eager_partials(
            selects,
            conditions,
            key_names={k.name for k in keys},
            first=scope.sources[0],
            joins=joins,
            table=_table,
            unit_column=UNIT_COLUMN,
        )
        if eager is not None:  # the same partials, summed before the joins off the unit
            inner = eager
        else:
            inner = _from_sources(exp.select(*selects), scope, joins)
            inner = inner.where(exp.and_(*conditions), copy=False)
            inner = inner.group_by(*grouping, copy=False)

    source: exp.Expr = exp.alias_(inner.subquery(copy=False), UNIT_ALIAS, quoted=True, copy=False)
    per_unit = UNIT_ALIAS
    if keys:
        per_unit = RANKED_ALIAS
        source = _ranked(
            source, max_rows=joins.max_rows_per_unit, max_groups=max_groups, checks=checks
        )

    outer = exp.select(*(_col(k.name, per_unit) for k in keys))
    outer = outer.select(*_totals(measurements, per_unit, exact), copy=False)
    counted = totals(
        checks,
        per_unit=per_unit,
        rank=_col(RANK_COLUMN, per_unit) if keys else None,
        group_rows=_col(GROUP_ROWS_COLUMN, per_unit),
        max_rows=joins.max_rows_per_unit,
    )
    outer = outer.select(*counted, copy=False).from_(source, copy=False)
    if keys:
        kept = _kept(per_unit, max_rows=joins.max_rows_per_unit, max_groups=max_groups)
        outer = outer.where(kept, copy=False).group_by(
            *(_col(k.name, per_unit) for k in keys), copy=False
        )
    return outer


def _ranked(
    source: exp.Expr, *, max_rows: int, max_groups: int, checks: tuple[CheckSpec, ...]
) -> exp.Expr:
    """The per-unit rows of ``source`` with each group's rank in the unit's random order
    and, with more than one group per unit, the unit's rows in it and those before it."""
    # Each unit keeps at most max_groups of its groups, in a random order, while their
    # rows (each group's counted as at most max_rows) add up to at most max_rows.
    order = exp.Order(expressions=[exp.Ordered(this=_col(RANDOM_COLUMN, UNIT_ALIAS))])
    rank = exp.Window(
        this=exp.RowNumber(), partition_by=[_col(UNIT_COLUMN, UNIT_ALIAS)], order=order
    )
    # With one group per unit, the group it keeps is its first, within max_rows alone
    # (its rows are counted as at most max_rows): the running count is left out.
    running = []
    if max_groups > 1:
        so_far = exp.Window(
            this=exp.Sum(this=_clamp(_col(GROUP_ROWS_COLUMN, UNIT_ALIAS), 0, max_rows)),
            partition_by=[_col(UNIT_COLUMN, UNIT_ALIAS)],
            order=order.copy(),
            spec=exp.WindowSpec(
                kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="CURRENT ROW"
            ),
        )
        running.append(exp.alias_(so_far, ROWS_SO_FAR_COLUMN, quoted=True, copy=False))
    ranked = exp.select(
        exp.Star(),
        exp.alias_(rank, RANK_COLUMN, quoted=True, copy=False),
        *running,
        *person_selects(
            checks,
            unit=_col(UNIT_COLUMN, UNIT_ALIAS),
            group_rows=_col(GROUP_ROWS_COLUMN, UNIT_ALIAS),
            max_rows=max_rows,
            max_groups=max_groups,
        ),
    ).from_(source, copy=False)
    return exp.alias_(ranked.subquery(copy=False), RANKED_ALIAS, quoted=True, copy=False)


def _kept(per_unit: str, *, max_rows: int, max_groups: int) -> exp.Expr:
    """The groups a unit keeps: its first max_groups, within max_rows rows together."""
    kept: exp.Expr = exp.LTE(this=_col(RANK_COLUMN, per_unit), expression=integer(max_groups))
    if max_groups == 1:
        return kept
    rows = exp.LTE(this=_col(ROWS_SO_FAR_COLUMN, per_unit), expression=integer(max_rows))
    return exp.and_(kept, rows)


def _partials(
    measurements: tuple[MeasurementSpec, ...], scope: Scope, exact: dict[str, ExactSum]
) -> list[exp.Expr]:
    """The per-unit query's columns of the measurements."""
    selects: list[exp.Expr] = []
    for m in measurements:
        if m.kind is MeasureKind.BINS:
            selects.extend(_bin_counts(m))
        elif m.key in exact:  # DECIMAL arithmetic: summed exactly, on the grid per unit
            selects.extend(exact[m.key].inner(m.key))
        else:
            selects.append(exp.alias_(_partial(m, scope), m.key, quoted=True, copy=False))
    return selects


def _totals(
    measurements: tuple[MeasurementSpec, ...], per_unit: str, exact: dict[str, ExactSum]
) -> list[exp.Expr]:
    """The outer query's columns: each measurement's total over units, per group."""
    selects: list[exp.Expr] = []
    for m in measurements:
        if m.kind is MeasureKind.BINS:
            if m.bins is None:
                raise ValueError("a quantile measurement needs bins")
            bins = [_total(_col(f"{m.key}_{j}", per_unit), m) for j in range(m.bins.count)]
            value: exp.Expr = exp.Array(expressions=bins)
        elif m.key in exact:  # each unit's steps lie within its limits already
            steps = exact[m.key].steps(m.key, per_unit)
            value = exp.Coalesce(this=exp.Sum(this=steps), expressions=[exp.Literal.number(0)])
        else:
            value = _total(_col(m.key, per_unit), m)
        selects.append(exp.alias_(value, m.key, quoted=True, copy=False))
    return selects


def _total(partial: exp.Column, m: MeasurementSpec) -> exp.Expr:
    """The sum over units of each unit's partial, clamped to its limits.

    A sum over a group whose values are all NULL is NULL: it counts as 0, not as a bound
    (GREATEST and LEAST skip NULL, so clamping NULL would give the lower limit), so that
    every partial lies between its rows times the smallest and the largest value. The sum
    of an average or variance over more values than ``per_value_rows`` is first scaled to
    that many values at the unit's mean (``per_value_partial``), then clamped and cast
    back to BIGINT (within the limits, the cast cannot fail): the total stays a sum of
    integers, exact and in any order."""
    partial_or_0: exp.Expr = exp.Coalesce(this=partial, expressions=[exp.Literal.number(0)])
    if m.per_value_rows:
        if not m.values:
            raise ValueError(f"the per-value sum {m.key} has no count of its values")
        double = exp.DataType.Type.DOUBLE
        count = exp.column(m.values, table=partial.table, quoted=True)  # the values' COUNT
        scaled = per_value_partial(
            exp.cast(partial_or_0, double), exp.cast(count, double), m.per_value_rows
        )
        clamped = _clamp(scaled, m.unit_lower, m.unit_upper)
        total = exp.Sum(this=exp.cast(clamped, exp.DataType.Type.BIGINT, copy=False))
    else:
        total = exp.Sum(this=_clamp(partial_or_0, m.unit_lower, m.unit_upper))
    return exp.Coalesce(this=total, expressions=[exp.Literal.number(0)])


def _from_sources(select: exp.Select, scope: Scope, joins: JoinBounds) -> exp.Select:
    select = select.from_(_table(scope.sources[0]), copy=False)
    for join in joins.joins:
        select = add_join(
            select, _table(join.source), on=join.on.copy(), join_type=join.kind.upper()
        )
    for hidden in joins.unit_joins:
        select = add_join(select, hidden.table(), on=hidden.on.copy(), join_type="INNER")
    return select


class _RowLevel:
    """Quantiles: the rows after the WHERE, with the columns the per-unit query reads
    renamed ``c0, c1, …``, each quantile's bin, and its random order per unit and group."""

    def __init__(
        self,
        rows: exp.Select,
        names: dict[tuple[str, str, bool], str],
        binned: list[MeasurementSpec],
    ) -> None:
        self.rows = rows
        self.names = names
        self.binned = binned

    def named(self, node: exp.Expr, alias: str) -> exp.Expr:
        """``node`` reading the renamed columns of ``alias`` instead of the tables."""

        def replace(sub: exp.Expr) -> exp.Expr:
            if isinstance(sub, exp.Column) and sub.table != PICKED_ALIAS:
                return _col(self.names[_identity(sub)], alias)
            return sub

        return node.transform(replace)  # transform copies

    def picked(self, grouping: list[exp.Expr]) -> exp.Expr:
        ranks: list[exp.Expr] = [exp.Star()]
        for m in self.binned:
            order = exp.Window(
                this=exp.RowNumber(),
                partition_by=[
                    *(self.named(g, ROWS_ALIAS) for g in grouping),
                    exp.Is(this=_col(m.key + BIN_SUFFIX, ROWS_ALIAS), expression=exp.Null()),
                ],
                order=exp.Order(expressions=[exp.Ordered(this=_col(ROW_DRAW, ROWS_ALIAS))]),
            )
            ranks.append(exp.alias_(order, m.key + PICK_SUFFIX, quoted=True, copy=False))
        source = exp.alias_(self.rows.subquery(copy=False), ROWS_ALIAS, quoted=True, copy=False)
        ranked = exp.select(*ranks).from_(source, copy=False)
        return exp.alias_(ranked.subquery(copy=False), PICKED_ALIAS, quoted=True, copy=False)


def _row_level(
    scope: Scope,
    joins: JoinBounds,
    *,
    conditions: list[exp.Expr],
    selects: list[exp.Expr],
    grouping: list[exp.Expr],
    binned: list[MeasurementSpec],
) -> _RowLevel:
    names: dict[tuple[str, str, bool], str] = {}
    columns: list[exp.Expr] = []
    for node in [*selects, *grouping]:
        for column in node.find_all(exp.Column):
            identity = _identity(column)
            if column.table == PICKED_ALIAS or identity in names:
                continue
            names[identity] = f"c{len(names)}"
            columns.append(exp.alias_(column.copy(), names[identity], quoted=True, copy=False))
    for m in binned:
        columns.append(exp.alias_(_bin_index(m, scope), m.key + BIN_SUFFIX, quoted=True))
    # Window orders cannot be volatile (DuckDB): the draw is a column of the rows.
    columns.append(exp.alias_(exp.Rand(), ROW_DRAW, quoted=True, copy=False))
    rows = _from_sources(exp.select(*columns), scope, joins)
    return _RowLevel(rows.where(exp.and_(*conditions), copy=False), names, binned)


def _identity(column: exp.Column) -> tuple[str, str, bool]:
    """A column the row-level query names: a timestamp with time zone read as its local
    time and the same compared as an instant (``rewriter.zones``) are two."""
    return column.table, column.name, is_local(column)


def _bin_index(m: MeasurementSpec, scope: Scope) -> exp.Expr:
    """The bin of the row's cleaned value (NULL for NULL, NaN, or a false FILTER):
    FLOOR(value * (1 / width) - lower / width), kept within [0, count - 1].

    Multiplying first cannot underflow on PostgreSQL (an error that would depend on the
    data): the value is 0 or at least its quantum (``rewriter.underflow``, as for the
    fixed-point grid of sums) and 1 / width is at least 2^-47 (ranges are within ±2^52);
    a subtraction never raises an underflow."""
    if m.argument is None or m.bins is None:
        raise ValueError("a quantile measurement needs an argument and bins")
    double = exp.DataType.Type.DOUBLE
    scaled = exp.Mul(
        this=exp.cast(clean(m.argument, scope), double, copy=False),
        expression=exp.cast(number(m.bins.inverse), double),
    )
    steps = exp.Floor(this=exp.Sub(this=scaled, expression=exp.cast(number(m.bins.offset), double)))
    index = exp.cast(
        _clamp_keeping_null(steps, 0, m.bins.count - 1), exp.DataType.Type.BIGINT, copy=False
    )
    return index if m.filter is None else _when(m.filter, index)


def _bin_counts(m: MeasurementSpec) -> list[exp.Expr]:
    """Per unit and group: the rows of each bin among the first ``unit_upper`` picked."""
    if m.bins is None:
        raise ValueError("a quantile measurement needs bins")
    picked = exp.LTE(this=_col(m.key + PICK_SUFFIX, PICKED_ALIAS), expression=integer(m.unit_upper))
    counts: list[exp.Expr] = []
    for j in range(m.bins.count):
        in_bin = exp.EQ(this=_col(m.key + BIN_SUFFIX, PICKED_ALIAS), expression=integer(j))
        count = exp.Count(this=_when(exp.and_(picked.copy(), in_bin), exp.Literal.number(1)))
        counts.append(exp.alias_(count, f"{m.key}_{j}", quoted=True, copy=False))
    return counts


def _in_domain(key: exp.Expr, domain: tuple[DomainValue, ...]) -> exp.Expr:
    # In parentheses: a boolean key (department = 'A') would read as department = ('A' IN
    # (TRUE, FALSE)), which fails on DuckDB for the rows it meets (an error that reveals them).
    key = key.copy() if isinstance(key, (exp.Column, exp.Paren)) else exp.Paren(this=key.copy())
    values = [v for v in domain if v is not None]
    listed: exp.Expr = exp.In(this=key, expressions=[_literal(v) for v in values])
    if isinstance(key, exp.Column) and values and all(isinstance(v, str) for v in values):
        # A text column. DuckDB turns an IN list into ORs of string comparisons, and 2.0
        # reads ARRAY_CONTAINS as slowly (the filter alone is a TPC-H Q1's raw time): a
        # short domain is a CASE of its values (a quarter of that time on 1.5 and 2.0),
        # FALSE for a NULL key (where IN gives NULL: the row is dropped either way, as
        # this stands in the WHERE); a long one ARRAY_CONTAINS (on PostgreSQL
        # = ANY(ARRAY[…]) in a CASE that names the column three times). A computed key
        # stays an IN.
        if len(values) <= _CASE_VALUES:
            listed = exp.Case(
                this=key,
                ifs=[exp.If(this=exp.Literal.string(v), true=exp.true()) for v in values],
                default=exp.false(),
            )
        else:
            array = exp.Array(expressions=[exp.Literal.string(v) for v in values])
            listed = exp.ArrayContains(this=array, expression=key)
    if None in domain:
        return exp.Paren(this=exp.or_(listed, exp.Is(this=key.copy(), expression=exp.Null())))
    return listed


def _literal(value: str | int | float | bool) -> exp.Expr:
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, str):
        return exp.Literal.string(value)
    literal = exp.Literal.number(repr(abs(value)) if isinstance(value, float) else abs(value))
    return exp.Neg(this=literal) if value < 0 else literal


def _table(source: Source) -> exp.Expr:
    if source.table.derived is not None:
        return exp.Subquery(
            this=source.table.derived.copy(),
            alias=exp.TableAlias(this=exp.to_identifier(source.alias, quoted=True)),
        )
    return exp.Table(
        this=exp.to_identifier(source.table.name, quoted=True),
        db=exp.to_identifier(source.table.schema, quoted=True),
        alias=exp.TableAlias(this=exp.to_identifier(source.alias, quoted=True)),
    )


def _partial(m: MeasurementSpec, scope: Scope) -> exp.Expr:
    condition = m.filter
    if m.kind is MeasureKind.BINS:
        raise ValueError("quantiles are counted per bin (_bin_counts)")
    if m.kind is MeasureKind.UNITS:
        if condition is None:
            return exp.Literal.number(1)
        return exp.Max(this=_when(condition, exp.Literal.number(1), exp.Literal.number(0)))
    if m.kind is MeasureKind.COUNT:
        if m.argument is None:
            if condition is None:
                return exp.Count(this=exp.Star())
            return exp.Count(this=_when(condition, exp.Literal.number(1)))
        value = m.argument.copy() if _counts_as_is(m.argument, scope) else clean(m.argument, scope)
        return exp.Count(this=value if condition is None else _when(condition, value))
    if m.centre:
        # A centred sum (averages, variances): the steps from the centre, in integers.
        value = exp.Sub(this=_on_grid(m, scope), expression=integer(m.centre))
        return exp.Sum(this=value if condition is None else _when(condition, value))
    return exp.Sum(this=_summed(m, scope))


def _on_grid(m: MeasurementSpec, scope: Scope) -> exp.Expr:
    if m.argument is None or m.grid is None or m.bounds is None:
        raise ValueError("a sum measurement needs an argument and a grid")
    return on_grid(clean(m.argument, scope), m)


def _summed(m: MeasurementSpec, scope: Scope) -> exp.Expr:
    """A sum's value per row, on the grid (NULL where it is NULL or the FILTER fails)."""
    value = _on_grid(m, scope)
    return value if m.filter is None else _when(m.filter, value)


def _counts_as_is(argument: exp.Expr, scope: Scope) -> bool:
    """A column that cleaning leaves NULL exactly where it is NULL (no NaN or infinity to
    become NULL): COUNT of it counts what COUNT of its cleaned value would."""
    if not isinstance(argument, exp.Column):
        return False
    info = scope.info(argument)
    return info.type not in REAL_TYPES or info.finite


def clean(expression: exp.Expr, scope: Scope) -> exp.Expr:
    """The expression with its columns cleaned: NaN/±infinity as NULL, numbers clamped.

    A date or timestamp column with declared bounds is clamped to them (±infinity and
    years outside the bounds included), so that EXTRACT(year FROM c) lies within the
    bounds' years (rewriter.intervals). The bounds are written CAST('…' AS DATE) or
    CAST('…' AS TIMESTAMP), so that both engines compare them as the column's type.
    """

    def replace(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Cast) and node.to.this in _NARROW_INTEGERS:
            # Cleaned inside too: transform does not descend into a node it replaced, so
            # the columns under the cast were left raw (SUM(hugeint_col::int) failed to
            # cast a HUGEINT's largest values, SUM(EXTRACT(year FROM d)::int) on
            # PostgreSQL an infinite date's year: one person's value, after the charge).
            return exp.cast(node.this.transform(replace), exp.DataType.Type.BIGINT)
        if not isinstance(node, exp.Column):
            _widen_integer_literals(node)
            return node
        info = scope.info(node)
        if info.zoned:  # clamped as an instant, then read as its local time (or not)
            return zoned_bounds.cleaned(node, info)
        value: exp.Expr = node.copy()
        dates = info.date_bounds
        if dates is not None:
            first, last = (moment(d, info.type) for d in dates)
            return between_keeping_null(value, first, last)
        bounds = info.policy.bounds
        whole = info.whole_bounds
        if bounds is not None and whole is not None:
            low, high = whole
            if low > high:  # no integer within the bounds: below it, or above it
                below = exp.LT(this=value.copy(), expression=integer(low))
                above = exp.GTE(this=value, expression=integer(low))
                return exp.Case(
                    ifs=[
                        exp.If(this=below, true=bound(bounds[0])),
                        exp.If(this=above, true=bound(bounds[1])),
                    ]
                )
            # Integer bounds (rounded inwards): comparing a wide integer (HUGEINT) with a
            # fractional literal would cast it to a DECIMAL that some values overflow.
            # BIGINT: arithmetic on the value (within ±2^52 by its interval) must not
            # overflow a narrower column type (INTEGER, SMALLINT) on rows that reach it.
            clamped = between_keeping_null(value, integer(low), integer(high))
            return exp.cast(clamped, exp.DataType.Type.BIGINT)
        if info.type in REAL_TYPES:
            # NaN, ±infinity and decimals beyond DOUBLE's range become NULL; the others
            # are cast to DOUBLE (never failing: rewriter.sql_values) and clamped.
            if bounds is None:
                value = as_double(node, info.type)
            elif _nothing_to_flush(info.digits, *bounds):
                lower, upper, _ = flushed_bounds(*bounds)
                value = between_keeping_null(_double(node), number(lower), number(upper))
                if info.finite and info.digits is not None and info.digits[0] <= 300:
                    return value  # no NaN, no infinity, within DOUBLE's range
            elif info.type is ColumnType.DECIMAL:
                value = _clamp_flushed(_double(node), *bounds, compared=node)
            else:
                value = _clamp_flushed(_double(node), *bounds)
            return _when(in_double_range(node, info.type), value, copy=False)
        return value

    return expression.transform(replace)  # transform copies


_COMPUTING = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod, exp.Neg)
#: Casts to these compute in BIGINT instead (the value fits: its interval is within
#: ±2^52), so that arithmetic on them cannot overflow row by row.
_NARROW_INTEGERS = frozenset(
    {exp.DataType.Type.INT, exp.DataType.Type.SMALLINT, exp.DataType.Type.TINYINT}
)
_CHOOSING = (exp.Coalesce, exp.Greatest, exp.Least)


def _widen_integer_literals(node: exp.Expr) -> None:
    """Integer literals computed with, or chosen among, as BIGINT: both engines type a
    small literal as a 32-bit INTEGER, so ``2 * CASE WHEN … THEN 2000000000 ELSE 0 END``
    would overflow on the rows where the condition holds (an error that reveals them),
    though its interval (rewriter.intervals, within ±2^52) fits a BIGINT. Cleaned
    integer columns are BIGINT already (``clean``). The d of ``round(x, -1)`` (a negated
    literal) stays an INTEGER: neither engine has round(x, bigint); so do the days added to
    or subtracted from a constant date (``DATE '2020-02-29' + 1``): neither has date ±
    bigint, and the constant is computed before the query runs (``Plan.constants``)."""
    if isinstance(node, exp.Neg) and node.arg_key == "decimals":
        return
    if _days_of_a_date(node):
        return
    if isinstance(node, _COMPUTING):
        slots = ["this", "expression"]
    elif isinstance(node, _CHOOSING):
        slots = ["this", "expressions"]
    elif isinstance(node, exp.Case):
        slots = ["default"]
        for branch in node.args.get("ifs", []):
            _widen_slot(branch, "true")
    elif isinstance(node, exp.If):
        slots = ["true", "false"]
    else:
        return
    for slot in slots:
        _widen_slot(node, slot)


def _days_of_a_date(node: exp.Expr) -> bool:
    """``node`` is a constant date ± days (without a column), or arithmetic within them."""
    current: exp.Expr | None = node
    while isinstance(current, (*_COMPUTING, exp.Paren)):
        if (
            isinstance(current, (exp.Add, exp.Sub))
            and (_constant_date(current.this) or _constant_date(current.expression))
            and current.find(exp.Column) is None
        ):
            return True
        current = current.parent
    return False


def _constant_date(node: exp.Expr) -> bool:
    """A date computed without a column: ``CAST('…' AS DATE)``, ± whole days, in
    parentheses (date − date is a number of days, not a date)."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Cast):
        return node.to.is_type(exp.DataType.Type.DATE) and node.find(exp.Column) is None
    if isinstance(node, exp.Add):
        return _constant_date(node.this) != _constant_date(node.expression)
    if isinstance(node, exp.Sub):
        return _constant_date(node.this) and not _constant_date(node.expression)
    return False


def _widen_slot(node: exp.Expr, slot: str) -> None:
    value = node.args.get(slot)
    for item in value if isinstance(value, list) else [value]:
        if not isinstance(item, exp.Expr):
            continue
        inner = item.this if isinstance(item, exp.Paren | exp.Neg) else item
        if isinstance(inner, exp.Literal) and inner.is_int:
            item.replace(exp.cast(item.copy(), exp.DataType.Type.BIGINT))


def _nothing_to_flush(digits: tuple[int, int] | None, lower: float, upper: float) -> bool:
    """A DECIMAL column of known decimal places whose non-zero values are all far above
    the flush threshold (and TINY) in magnitude: ``_clamp_flushed``'s test for values to
    take as 0 could only ever meet 0 itself, which clamping alone maps the same way."""
    if digits is None:
        return False
    _, _, threshold = flushed_bounds(lower, upper)
    return 10.0 ** -digits[1] > 2 * max(threshold, TINY)


def _clamp_flushed(
    value: exp.Expr, lower: float, upper: float, *, compared: exp.Expr | None = None
) -> exp.Expr:
    """Clamp a real value to [lower, upper] so that the result is 0 or at least the flush
    threshold in magnitude (rewriter.underflow: no product of such values can underflow).

    Bounds closer to 0 than the threshold move inwards (to 0, or to the threshold), and
    values closer to 0 than the threshold become 0 when 0 is within the bounds. The result
    always lies within the declared [lower, upper].

    ``compared``: a DECIMAL column, whose magnitude is tested before ``value`` (its cast
    to DOUBLE) is computed: below TINY (or the threshold) it is taken as 0, clamped, since
    PostgreSQL cannot cast so small a numeric (``rewriter.sql_values``).
    """
    lower, upper, threshold = flushed_bounds(lower, upper)
    clamped = _clamp_real(value, lower, upper)
    if compared is None:
        if not lower <= 0 <= upper or threshold == 0:
            return clamped
        compared, zero = value, 0.0
    else:
        zero = min(max(0.0, lower), upper)  # what clamping a value of 0 gives
        threshold = max(threshold, TINY) if lower <= 0 <= upper else TINY
    tiny = exp.And(  # what exp.and_ builds (no parentheses: neither side is AND/OR)
        this=exp.GT(this=compared.copy(), expression=number(-threshold)),
        expression=exp.LT(this=compared.copy(), expression=number(threshold)),
    )
    literal = exp.Literal.number("0.0") if zero == 0 else number(zero)
    return _when(tiny, literal, clamped, copy=False)


def _double(value: exp.Expr) -> exp.Expr:
    return exp.cast(value.copy(), exp.DataType.Type.DOUBLE, copy=False)


def on_grid(value: exp.Expr, m: MeasurementSpec) -> exp.Expr:
    """A cleaned value as an integer number of grid steps, clamped to the grid's range
    (NULL stays NULL).

    ``value`` is built from cleaned columns and lies within its derived interval; the clamp
    before the cast is defence in depth, so that no value can overflow the cast (an error
    that would depend on the data). Each unit's partial sum is clamped again in the outer
    query, whatever rounding did.
    """
    if m.grid is None or m.bounds is None:
        raise ValueError("no grid")
    grid = m.grid
    if grid.step == 1.0 and m.bounds.integer:
        steps: exp.Expr = value
    else:
        # FLOOR(x + 0.5), not ROUND: PostgreSQL rounds halves to even, DuckDB away from 0,
        # and the engines must agree. x + 0.5 is exact (|x| < 2^21 steps).
        steps = exp.Floor(
            this=exp.Add(
                this=exp.Mul(
                    this=exp.cast(value, exp.DataType.Type.DOUBLE, copy=False),
                    expression=number(1.0 / grid.step),
                ),
                expression=exp.Literal.number("0.5"),
            )
        )
    # GREATEST and LEAST would make NULL a bound: the test keeps it NULL, and copies the
    # value once where a CASE of comparisons would copy the steps three times.
    clamped = exp.cast(_clamp(steps, grid.lower, grid.upper), exp.DataType.Type.BIGINT, copy=False)
    return _when(
        exp.Not(this=exp.Is(this=value.copy(), expression=exp.Null())), clamped, copy=False
    )


def _clamp_keeping_null(value: exp.Expr, lower: int, upper: int) -> exp.Expr:
    return between_keeping_null(value, integer(lower), integer(upper))


def _when(
    condition: exp.Expr, value: exp.Expr, otherwise: exp.Expr | None = None, *, copy: bool = True
) -> exp.Expr:
    """CASE WHEN condition THEN value [ELSE otherwise] END, with a copy of ``condition``
    unless ``copy`` is false (a condition built for this CASE alone)."""
    case = exp.Case(ifs=[exp.If(this=condition.copy() if copy else condition, true=value)])
    if otherwise is not None:
        case.set("default", otherwise)
    return case


def _clamp(value: exp.Expr, lower: int, upper: int) -> exp.Expr:
    return least_greatest(value, integer(lower), integer(upper))


def _clamp_real(value: exp.Expr, lower: float, upper: float) -> exp.Expr:
    return least_greatest(value, number(lower), number(upper))


def _col(name: str, table: str) -> exp.Column:
    return exp.column(name, table=table, quoted=True)
