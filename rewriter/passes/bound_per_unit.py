"""Pass 4: write the bounded SQL that the database runs.

Per privacy unit first: the inner query groups the table's rows (after the WHERE) by the
unit and computes each measurement's partial: COUNT of rows or values, SUM of values
clamped to their bounds on the integer grid (NaN and infinities become NULL before
clamping, and are not counted). The outer query clamps every partial to the per-unit
limits and sums across units. The result is one row of exact integers, one column per measurement.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.catalog import ColumnInfo, ColumnType, TableInfo
from rewriter.passes.check_predicate import TABLE_ALIAS
from rewriter.passes.measurements import Grid, MeasureKind, MeasurementSpec

UNIT_ALIAS = "u"
UNIT_COLUMN = "unit_id"
LARGEST_DOUBLE = "1.7976931348623157e308"
REAL_TYPES = (ColumnType.FLOAT, ColumnType.DECIMAL)


def bounded_query(
    table: TableInfo,
    where: exp.Expr | None,
    measurements: tuple[MeasurementSpec, ...],
) -> exp.Select:
    unit = table.privacy_unit
    if unit is None:
        raise ValueError(f"table {table.name} has no privacy unit")
    unit_ref = _col(unit.name, TABLE_ALIAS)
    inner = exp.select(exp.alias_(unit_ref.copy(), UNIT_COLUMN, quoted=True))
    for m in measurements:
        inner = inner.select(exp.alias_(_partial(m), m.key, quoted=True), copy=False)
    inner = inner.from_(
        exp.Table(
            this=exp.to_identifier(table.name, quoted=True),
            db=exp.to_identifier(table.schema, quoted=True),
            alias=exp.TableAlias(this=exp.to_identifier(TABLE_ALIAS, quoted=True)),
        ),
        copy=False,
    )
    unit_present = exp.Not(this=exp.Is(this=unit_ref.copy(), expression=exp.Null()))
    condition: exp.Expr = unit_present
    if where is not None:
        condition = exp.and_(exp.Paren(this=where.copy()), unit_present)
    inner = inner.where(condition, copy=False).group_by(unit_ref.copy(), copy=False)

    outer = exp.select(
        *(
            exp.alias_(
                exp.func(
                    "COALESCE",
                    exp.Sum(this=_clamp(_col(m.key, UNIT_ALIAS), m.unit_lower, m.unit_upper)),
                    exp.Literal.number(0),
                ),
                m.key,
                quoted=True,
            )
            for m in measurements
        )
    )
    return outer.from_(exp.alias_(inner.subquery(), UNIT_ALIAS, quoted=True), copy=False)


def _partial(m: MeasurementSpec) -> exp.Expr:
    if m.kind is MeasureKind.COUNT:
        if m.column is None:
            return exp.Count(this=exp.Star())
        value = _col(m.column.name, TABLE_ALIAS)
        if m.column.type in REAL_TYPES:
            # NaN and infinities count as NULL, as they do in sums.
            return exp.Count(
                this=exp.Case(ifs=[exp.If(this=_finite(value), true=exp.Literal.number(1))])
            )
        return exp.Count(this=value)
    if m.column is None or m.grid is None:
        raise ValueError("a sum measurement needs a column and a grid")
    return exp.Sum(this=on_grid(m.column, m.grid))


def on_grid(column: ColumnInfo, grid: Grid) -> exp.Expr:
    """The column's value clamped to its bounds, as an integer number of grid steps."""
    value = _col(column.name, TABLE_ALIAS)
    if column.type is ColumnType.INTEGER and grid.step == 1.0:
        return _clamp(exp.cast(value, exp.DataType.Type.BIGINT), grid.lower, grid.upper)
    as_double = exp.cast(value, exp.DataType.Type.DOUBLE)
    clamped = _clamp_real(as_double.copy(), grid.lower * grid.step, grid.upper * grid.step)
    scaled = exp.Mul(this=clamped, expression=_number(1.0 / grid.step))
    steps = _clamp(
        exp.cast(exp.Round(this=scaled), exp.DataType.Type.BIGINT), grid.lower, grid.upper
    )
    return exp.Case(ifs=[exp.If(this=_finite(value), true=steps)])


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
    literal = exp.Literal.number(repr(abs(value)))
    return exp.Neg(this=literal) if value < 0 else literal


def _col(name: str, table: str) -> exp.Column:
    return exp.column(name, table=table, quoted=True)
