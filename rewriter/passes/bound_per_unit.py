"""Pass 6: write the bounded SQL that the database runs.

Per privacy unit first: the innermost query groups the rows (after the WHERE) by unit and
GROUP BY keys and computes each measurement's partial: COUNT of rows or values, 1 for the
unit, SUM of values clamped to their bounds on the integer grid. Columns are cleaned before
use: NaN and infinities become NULL, numeric values are clamped to their declared bounds.
With GROUP BY, each unit keeps at most ``max_groups_per_unit`` groups, chosen at random
(independently of the data). The outer query clamps every partial to the per-unit limits
and sums across units, per group. The result: one row per group present, with the keys and
one exact integer per measurement.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.catalog import ColumnType
from rewriter.passes.check_joins import JoinBounds
from rewriter.passes.group_keys import GroupKey
from rewriter.passes.measurements import MeasureKind, MeasurementSpec
from rewriter.scope import Scope, Source

UNIT_ALIAS = "u"
RANKED_ALIAS = "r"
UNIT_COLUMN = "unit_id"
RANK_COLUMN = "group_rank"
RANDOM_COLUMN = "group_draw"
LARGEST_DOUBLE = "1.7976931348623157e308"
REAL_TYPES = (ColumnType.FLOAT, ColumnType.DECIMAL)


def bounded_query(
    scope: Scope,
    joins: JoinBounds,
    *,
    where: exp.Expr | None,
    keys: tuple[GroupKey, ...],
    measurements: tuple[MeasurementSpec, ...],
    max_groups: int,
) -> exp.Select:
    unit_ref = joins.unit
    inner = exp.select(exp.alias_(unit_ref.copy(), UNIT_COLUMN, quoted=True, copy=False))
    for key in keys:
        inner = inner.select(
            exp.alias_(key.expression.copy(), key.name, quoted=True, copy=False), copy=False
        )
    for m in measurements:
        inner = inner.select(
            exp.alias_(_partial(m, scope), m.key, quoted=True, copy=False), copy=False
        )
    if keys:
        # A random draw per (unit, group), independent of the data, to choose the groups.
        inner = inner.select(
            exp.alias_(exp.Rand(), RANDOM_COLUMN, quoted=True, copy=False), copy=False
        )
    inner = inner.from_(_table(scope.sources[0]), copy=False)
    for join in joins.joins:
        inner = inner.join(
            _table(join.source), on=join.on.copy(), join_type=join.kind.upper(), copy=False
        )
    for hidden in joins.unit_joins:
        target = exp.Table(
            this=exp.to_identifier(hidden.table_name, quoted=True),
            db=exp.to_identifier(hidden.schema, quoted=True),
            alias=exp.TableAlias(this=exp.to_identifier(hidden.alias, quoted=True)),
        )
        inner = inner.join(target, on=hidden.on.copy(), join_type="INNER", copy=False)
    conditions: list[exp.Expr] = []
    if where is not None:
        conditions.append(exp.Paren(this=where.copy()))
    conditions.extend(_in_domain(key) for key in keys)
    conditions.append(exp.Not(this=exp.Is(this=unit_ref.copy(), expression=exp.Null())))
    inner = inner.where(exp.and_(*conditions), copy=False)
    inner = inner.group_by(unit_ref.copy(), *(k.expression.copy() for k in keys), copy=False)

    source: exp.Expr = exp.alias_(inner.subquery(), UNIT_ALIAS, quoted=True, copy=False)
    per_unit = UNIT_ALIAS
    if keys:
        # Each unit keeps at most max_groups of its groups, chosen at random.
        rank = exp.Window(
            this=exp.RowNumber(),
            partition_by=[_col(UNIT_COLUMN, UNIT_ALIAS)],
            order=exp.Order(expressions=[exp.Ordered(this=_col(RANDOM_COLUMN, UNIT_ALIAS))]),
        )
        ranked = exp.select(
            exp.Star(), exp.alias_(rank, RANK_COLUMN, quoted=True, copy=False)
        ).from_(source, copy=False)
        per_unit = RANKED_ALIAS
        source = exp.alias_(ranked.subquery(), RANKED_ALIAS, quoted=True, copy=False)

    outer = exp.select(*(_col(k.name, per_unit) for k in keys))
    for m in measurements:
        total = exp.Sum(this=_clamp(_col(m.key, per_unit), m.unit_lower, m.unit_upper))
        outer = outer.select(
            exp.alias_(
                exp.func("COALESCE", total, exp.Literal.number(0)), m.key, quoted=True, copy=False
            ),
            copy=False,
        )
    outer = outer.from_(source, copy=False)
    if keys:
        outer = outer.where(
            exp.LTE(this=_col(RANK_COLUMN, per_unit), expression=exp.Literal.number(max_groups)),
            copy=False,
        ).group_by(*(_col(k.name, per_unit) for k in keys), copy=False)
    return outer


def _in_domain(key: GroupKey) -> exp.Expr:
    values = [v for v in key.domain if v is not None]
    listed = exp.In(this=key.expression.copy(), expressions=[_literal(v) for v in values])
    if None in key.domain:
        return exp.Paren(
            this=exp.or_(listed, exp.Is(this=key.expression.copy(), expression=exp.Null()))
        )
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
    if m.kind is MeasureKind.UNITS:
        if condition is None:
            return exp.Literal.number(1)
        return exp.Max(this=_when(condition, exp.Literal.number(1), exp.Literal.number(0)))
    if m.kind is MeasureKind.COUNT:
        if m.argument is None:
            if condition is None:
                return exp.Count(this=exp.Star())
            return exp.Count(this=_when(condition, exp.Literal.number(1)))
        value = clean(m.argument, scope)
        return exp.Count(this=value if condition is None else _when(condition, value))
    if m.argument is None or m.grid is None or m.bounds is None:
        raise ValueError("a sum measurement needs an argument and a grid")
    value = on_grid(clean(m.argument, scope), m)
    return exp.Sum(this=value if condition is None else _when(condition, value))


def clean(expression: exp.Expr, scope: Scope) -> exp.Expr:
    """The expression with its columns cleaned: NaN/±infinity as NULL, numbers clamped."""

    def replace(node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Column):
            return node
        info = scope.info(node)
        value: exp.Expr = node.copy()
        bounds = info.policy.bounds
        if bounds is not None and info.type is ColumnType.INTEGER:
            # CASE keeps NULL as NULL (GREATEST and LEAST would turn it into a bound).
            low, high = (_integer(int(b)) if float(b).is_integer() else _number(b) for b in bounds)
            return exp.Case(
                ifs=[
                    exp.If(this=exp.LT(this=node.copy(), expression=low.copy()), true=low),
                    exp.If(this=exp.GT(this=node.copy(), expression=high.copy()), true=high),
                ],
                default=value,
            )
        if info.type in REAL_TYPES:
            if bounds is not None:
                value = _clamp_real(exp.cast(value, exp.DataType.Type.DOUBLE), *bounds)
            return _when(_finite(node), value)
        return value

    return expression.copy().transform(replace)


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
        steps: exp.Expr = value.copy()
    else:
        steps = exp.Round(
            this=exp.Mul(
                this=exp.cast(value.copy(), exp.DataType.Type.DOUBLE),
                expression=_number(1.0 / grid.step),
            )
        )
    return exp.cast(_clamp_keeping_null(steps, grid.lower, grid.upper), exp.DataType.Type.BIGINT)


def _clamp_keeping_null(value: exp.Expr, lower: int, upper: int) -> exp.Expr:
    """CASE keeps NULL as NULL (GREATEST and LEAST would turn it into a bound)."""
    low, high = _integer(lower), _integer(upper)
    return exp.Case(
        ifs=[
            exp.If(this=exp.LT(this=value.copy(), expression=low.copy()), true=low),
            exp.If(this=exp.GT(this=value.copy(), expression=high.copy()), true=high),
        ],
        default=value,
    )


def _when(condition: exp.Expr, value: exp.Expr, otherwise: exp.Expr | None = None) -> exp.Expr:
    case = exp.Case(ifs=[exp.If(this=condition.copy(), true=value)])
    if otherwise is not None:
        case.set("default", otherwise)
    return case


def _finite(value: exp.Expr) -> exp.Expr:
    """True for finite numbers; false for NaN and ±infinity; NULL for NULL."""
    return exp.Between(
        this=exp.cast(value.copy(), exp.DataType.Type.DOUBLE),
        low=exp.Neg(this=exp.Literal.number(LARGEST_DOUBLE)),
        high=exp.Literal.number(LARGEST_DOUBLE),
    )


def _clamp(value: exp.Expr, lower: int, upper: int) -> exp.Expr:
    return exp.func("LEAST", exp.func("GREATEST", value, _integer(lower)), _integer(upper))


def _clamp_real(value: exp.Expr, lower: float, upper: float) -> exp.Expr:
    return exp.func("LEAST", exp.func("GREATEST", value, _number(lower)), _number(upper))


def _integer(value: int) -> exp.Expr:
    literal = exp.Literal.number(abs(value))
    return exp.Neg(this=literal) if value < 0 else literal


def _number(value: float) -> exp.Expr:
    literal = exp.Literal.number(repr(abs(float(value))))
    return exp.Neg(this=literal) if value < 0 else literal


def _col(name: str, table: str) -> exp.Column:
    return exp.column(name, table=table, quoted=True)
