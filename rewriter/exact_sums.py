"""Sums of DECIMAL values that the database adds exactly, put on the grid once per unit.

A sum of real values is measured in integer steps of its grid
(``rewriter.passes.measurements.Grid``) so that the total over units is exact and does
not depend on the order of the rows (floating-point sums do: Casacuberta et al. 2022).
For doubles each row is rounded to the grid before the per-unit SUM. DuckDB's DECIMAL
arithmetic is exact integer arithmetic (no NaN, no infinity: ``ColumnInfo.finite``), so a
sum built only from DECIMAL and integer columns, decimal literals, ``+``, ``-``, ``*``,
CASE and COALESCE is added exactly per unit and group, and rounded onto the grid once
there. The per-unit partial is then a function of that unit's rows alone, as before, and
it is clamped (``ExactSum.steps``) to the unit's limits and to what its n values allow,
n times the grid's ends, so that the sensitivity argument of
``rewriter.passes.bound_per_unit`` (a unit's groups together stay within one group's
bound) holds unchanged. The second clamp is defence in depth: rounding the exact sum once
cannot pass n times the grid's ends while the sum is below 2^52 steps, and beyond that
the unit's limits bind. This replaces a CAST to DOUBLE, a FLOOR and a CAST to BIGINT per
row and per sum (most of a TPC-H Q1's engine time).

Every value is kept within DECIMAL(18, scale): DuckDB computes a product of two DECIMALs
of width at most 18 as DECIMAL(18) and fails when a value does not fit (an error after
the charge that would reveal the value). A bound on each node's magnitude (from the
columns' bounds, which the clamps enforce row by row: sums add the operands' bounds,
products multiply them) times 10^scale must stay below 10^17, else the sum takes the
per-row path. The per-unit SUM is DECIMAL(38, scale): it cannot overflow before 10^21
rows.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from sqlglot import exp

from rewriter.catalog import ColumnType
from rewriter.passes.measurements import MeasureKind, MeasurementSpec
from rewriter.scope import Scope
from rewriter.sql_values import (
    between_keeping_null,
    integer,
    least_greatest,
    number,
    per_value_partial,
)

#: Every value, in units of its last decimal place, stays below this (DECIMAL(18) holds it).
LIMIT = 10**17
MAX_SCALE = 12
_NUMBER = re.compile(r"(\d+(\.\d*)?|\.\d+)([eE][-+]?\d{1,3})?")
#: How a CASE's condition is cleaned: as the per-row path cleans it (its columns compared
#: as cleaned values), whichever path measures the sum.
CleanCondition = Callable[[exp.Expr], exp.Expr]


class _NotExact(Exception):
    """The expression is not one the engine adds exactly: the per-row path measures it."""


COUNT_SUFFIX = "_n"  # the column of a unit's values counted, beside their exact sum


@dataclass(frozen=True)
class ExactSum:
    """A SUM measurement the database adds exactly: the per-unit query gives the sum of
    the unit's values in the group and their count; the outer query puts them on the grid."""

    value: exp.Expr  # the argument, its columns clamped as DECIMALs
    measurement: MeasurementSpec

    def inner(self, key: str) -> list[exp.Expr]:
        """SUM and COUNT of the values (with the FILTER), named ``key`` and ``key_n``."""
        condition = self.measurement.filter
        value = self.value.copy()  # the ExactSum stays as it was
        taken = (
            value
            if condition is None
            else exp.Case(ifs=[exp.If(this=condition.copy(), true=value)])
        )
        return [
            exp.alias_(exp.Count(this=taken.copy()), key + COUNT_SUFFIX, quoted=True, copy=False),
            exp.alias_(exp.Sum(this=taken), key, quoted=True, copy=False),
        ]

    def steps(self, key: str, table: str) -> exp.Expr:
        """One unit's partial in grid steps, from the sum and count columns of ``table``.

        With n values, the rounded sum minus n times the centre is clamped to
        [n·(lower - centre), n·(upper - centre)], what n values on the grid can give (the
        rounding of one sum instead of n values cannot then reach beyond it), and to the
        unit's limits. The sum of an average or variance (``per_value_rows``) of more
        values than that many is first scaled to that many values at the unit's mean.
        Computed in DOUBLE: the cast of an exact DECIMAL is a function of the unit's rows
        alone; within the limits before the cast to BIGINT, which cannot fail. A unit
        without values in the group (SUM is NULL) gives 0."""
        m = self.measurement
        if m.grid is None:
            raise ValueError("a sum measurement needs a grid")
        double = exp.DataType.Type.DOUBLE
        total = exp.Coalesce(
            this=exp.column(key, table=table, quoted=True), expressions=[exp.Literal.number(0)]
        )
        count = exp.cast(exp.column(key + COUNT_SUFFIX, table=table, quoted=True), double)
        steps: exp.Expr = exp.Floor(
            this=exp.Add(
                this=exp.Mul(
                    this=exp.cast(total, double, copy=False), expression=_float(1.0 / m.grid.step)
                ),
                expression=exp.Literal.number("0.5"),
            )
        )
        if m.centre:
            steps = exp.Sub(
                this=steps, expression=exp.Mul(this=count.copy(), expression=_float(m.centre))
            )
        if m.per_value_rows:  # more values than rows: that many at the unit's mean
            steps = per_value_partial(steps, count.copy(), m.per_value_rows)
        low = _times(count.copy(), m.grid.lower - m.centre)
        high = _times(count, m.grid.upper - m.centre)
        within = least_greatest(
            least_greatest(steps, low, high), _float(m.unit_lower), _float(m.unit_upper)
        )
        return exp.cast(within, exp.DataType.Type.BIGINT, copy=False)


def exact_sums(
    measurements: tuple[MeasurementSpec, ...], scope: Scope, clean_condition: CleanCondition
) -> dict[str, ExactSum]:
    """The SUM measurements the database adds exactly, by key."""
    found = {}
    for m in measurements:
        if m.kind is not MeasureKind.SUM or m.argument is None or m.grid is None:
            continue
        value = exact_value(m.argument, scope, clean_condition)
        if value is not None:
            found[m.key] = ExactSum(value, m)
    return found


def exact_value(
    argument: exp.Expr, scope: Scope, clean_condition: CleanCondition
) -> exp.Expr | None:
    """``argument`` with its columns clamped to their bounds as DECIMAL values, or None when
    some part of it is not exact DECIMAL arithmetic on DuckDB (a double, a division, a
    function), has no DECIMAL column, or could leave DECIMAL(18)."""
    builder = _Builder(scope, clean_condition)
    try:
        value, _, _ = builder.build(argument)
    except _NotExact:
        return None
    return value if builder.decimal_columns else None


class _Builder:
    def __init__(self, scope: Scope, clean_condition: CleanCondition) -> None:
        self.scope = scope
        self.clean_condition = clean_condition
        self.decimal_columns = 0

    def build(self, node: exp.Expr) -> tuple[exp.Expr, int, float]:
        """The exact form of ``node``, its scale (decimal places) and a bound on its
        magnitude (from its columns' bounds: sums add them, products multiply them)."""
        value, scale, magnitude = self._build(node)
        if scale > MAX_SCALE or not magnitude * 10.0**scale < LIMIT:
            raise _NotExact
        return value, scale, magnitude

    def _build(self, node: exp.Expr) -> tuple[exp.Expr, int, float]:
        if isinstance(node, exp.Paren):
            inner, scale, magnitude = self.build(node.this)
            return exp.Paren(this=inner), scale, magnitude
        if isinstance(node, exp.Column):
            return self._column(node)
        if isinstance(node, exp.Literal):
            return _literal(node)
        if isinstance(node, exp.Neg):
            inner, scale, magnitude = self.build(node.this)
            return exp.Neg(this=inner), scale, magnitude
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
            left, left_scale, left_size = self.build(node.this)
            right, right_scale, right_size = self.build(node.expression)
            built = type(node)(this=left, expression=right)
            if isinstance(node, exp.Mul):
                return built, left_scale + right_scale, left_size * right_size
            return built, max(left_scale, right_scale), left_size + right_size
        if isinstance(node, exp.Case) and node.this is None:
            return self._case(node)
        if isinstance(node, exp.Coalesce):
            parts = [self.build(p) for p in [node.this, *node.expressions]]
            first, *rest = (_narrow(p, s) for p, s, _ in parts)
            chosen = exp.Coalesce(this=first, expressions=rest)
            return chosen, max(s for _, s, _ in parts), max(m for _, _, m in parts)
        raise _NotExact

    def _case(self, node: exp.Case) -> tuple[exp.Expr, int, float]:
        branches = []
        scale, magnitude = 0, 0.0
        for branch in node.args.get("ifs") or []:
            value, branch_scale, branch_size = self.build(branch.args["true"])
            scale, magnitude = max(scale, branch_scale), max(magnitude, branch_size)
            value = _narrow(value, branch_scale)
            branches.append(exp.If(this=self.clean_condition(branch.this), true=value))
        case = exp.Case(ifs=branches)
        default = node.args.get("default")
        if default is not None:
            value, default_scale, default_size = self.build(default)
            case.set("default", _narrow(value, default_scale))
            scale, magnitude = max(scale, default_scale), max(magnitude, default_size)
        return case, scale, magnitude

    def _column(self, column: exp.Column) -> tuple[exp.Expr, int, float]:
        source = next((s for s in self.scope.sources if s.alias == column.table), None)
        if source is None or source.table.derived is not None:
            raise _NotExact
        info = self.scope.info(column)
        bounds = info.policy.bounds
        if bounds is None:
            raise _NotExact
        if info.type is ColumnType.INTEGER:
            whole = info.whole_bounds
            if whole is None or whole[0] > whole[1]:
                raise _NotExact
            # Integer literals: a HUGEINT compared with a DECIMAL is cast to one, which some
            # of its values overflow.
            clamp = between_keeping_null(column.copy(), integer(whole[0]), integer(whole[1]))
            magnitude = float(max(abs(whole[0]), abs(whole[1])))
            return exp.Cast(this=clamp, to=_decimal_type(0)), 0, magnitude
        if info.type is not ColumnType.DECIMAL or not info.finite or info.digits is None:
            raise _NotExact
        whole_digits, scale = info.digits
        # Bounds rounded inwards to the column's decimal places: the clamped values lie
        # within the declared bounds exactly, and they are the column's type.
        # The bounds as written (repr: 99.99, not the double's 99.98999…), which the
        # per-row path's clamp reaches too.
        unit = Decimal(1).scaleb(-scale)
        lower = (_written(bounds[0]) / unit).to_integral_value(rounding="ROUND_CEILING") * unit
        upper = (_written(bounds[1]) / unit).to_integral_value(rounding="ROUND_FLOOR") * unit
        if lower > upper:
            raise _NotExact
        self.decimal_columns += 1
        # Plain literals of the column's scale: the CASE is of the column's type.
        clamp = between_keeping_null(column.copy(), _plain(lower, scale), _plain(upper, scale))
        if whole_digits + scale > 18:  # its clamped values fit DECIMAL(18): computed as such
            clamp = exp.Cast(this=clamp, to=_decimal_type(scale))
        return clamp, scale, float(max(abs(lower), abs(upper)))


def _written(bound: float) -> Decimal:
    return Decimal(repr(float(bound)))


def _narrow(value: exp.Expr, scale: int) -> exp.Expr:
    """A CASE or COALESCE branch as DECIMAL(18, scale), which holds it (its magnitude is
    checked): DuckDB gives a CASE the widest branch's digits and the most places, and
    when they pass 38 it drops places, rounding every value (``(qty + 1) * (qty + 1)`` is
    a DECIMAL(38, 0)). A literal is one already."""
    if isinstance(value, exp.Cast) or (
        isinstance(value, exp.Neg) and isinstance(value.this, exp.Cast)
    ):
        return value
    return exp.Cast(this=value, to=_decimal_type(scale))


def _literal(node: exp.Literal) -> tuple[exp.Expr, int, float]:
    # A number in exponent form (1e3, or the 0e+0 the type checks write for a CASE's 0)
    # is a DOUBLE to the engine: here it is the decimal it stands for, added exactly.
    text = node.this
    if node.is_string or not _NUMBER.fullmatch(text):
        raise _NotExact
    value = Decimal(text).normalize()
    exponent = value.as_tuple().exponent
    if not isinstance(exponent, int):  # NaN or infinity: the pattern lets none through
        raise _NotExact
    scale = max(0, -exponent)
    if scale > MAX_SCALE or abs(value) >= LIMIT:
        raise _NotExact
    if scale:  # a DECIMAL literal
        return _plain(value, scale), scale, float(value)
    return _decimal(value, scale), scale, float(value)


def _plain(value: Decimal, scale: int) -> exp.Expr:
    """A DECIMAL literal (digits with a point): the engine types it DECIMAL(w, scale)."""
    literal = exp.Literal.number(f"{abs(value):.{scale}f}")
    return exp.Neg(this=literal) if value < 0 else literal


def _decimal(value: Decimal, scale: int) -> exp.Expr:
    """CAST(value AS DECIMAL(18, scale)): never an INTEGER (INTEGER arithmetic on values
    chosen by a CASE can overflow) nor a HUGEINT-backed DECIMAL (slow). A cast that cannot
    fail, which the constants pass leaves alone (``rewriter.passes.constants``)."""
    literal = exp.Literal.number(f"{abs(value):.{scale}f}")
    cast = exp.Cast(this=literal, to=_decimal_type(scale))
    return exp.Neg(this=cast) if value < 0 else cast


def _decimal_type(scale: int) -> exp.DataType:
    return exp.DataType(
        this=exp.DataType.Type.DECIMAL,
        expressions=[
            exp.DataTypeParam(this=exp.Literal.number(18)),
            exp.DataTypeParam(this=exp.Literal.number(scale)),
        ],
    )


def _times(count: exp.Expr, steps: int) -> exp.Expr:
    return _float(0.0) if steps == 0 else exp.Mul(this=count, expression=_float(steps))


def _float(value: float) -> exp.Expr:
    """A grid constant, as a literal: every operand it meets is a DOUBLE already, so the
    result is one."""
    if not math.isfinite(value):
        raise ValueError("a grid constant must be finite")
    return number(value)
