"""Interval arithmetic: the range of a row-level expression from its columns' bounds.

Used to bound the value of an expression inside an aggregate (``SUM(price * qty)``,
``SUM(CASE WHEN … THEN 1 ELSE 0 END)``). Sound: the true value of the expression, with
its columns clamped to their bounds, always lies within the computed interval.

``EXTRACT(field FROM c)`` of a date or timestamp column is an integer in a fixed range for
month [1, 12], day [1, 31], dow [0, 6], isodow [1, 7], doy [1, 366], quarter [1, 4],
and for a timestamp hour [0, 23] and minute [0, 59]: DuckDB and PostgreSQL give the same
values for every date (±infinity gives NULL on both). year needs
the column's declared date bounds (``ColumnInfo.date_bounds``: the cleaned column is
clamped to them, ``rewriter.passes.bound_per_unit.clean``); it grows with the date, so
its range is that of the bounds. The other fields are refused: second, epoch and the
fractions of a second are not integers, and the engines disagree on some (PostgreSQL
returns numeric, DuckDB integers or doubles); hour and minute of a date fail on
PostgreSQL for non-NULL values only (an error that would reveal data).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

from sqlglot import exp

from rewriter.catalog import ColumnInfo, ColumnType
from rewriter.decimal_casts import decimal_cast
from rewriter.errors import Rejected
from rewriter.output_names import function_name
from rewriter.passes.zoned_bounds import local_years
from rewriter.underflow import check_underflow, rounding_digits


@dataclass(frozen=True)
class Interval:
    lower: float
    upper: float
    integer: bool  # the expression only takes integer values

    def __post_init__(self) -> None:
        if not (math.isfinite(self.lower) and math.isfinite(self.upper)):
            raise Rejected(
                "the expression inside the aggregate has no finite bounds",
                hint="declare tighter column bounds or simplify the expression",
            )

    def hull(self, other: Interval) -> Interval:
        return Interval(
            min(self.lower, other.lower),
            max(self.upper, other.upper),
            self.integer and other.integer,
        )


ColumnBounds = Callable[[exp.Column], Interval]
#: What the catalog knows of a resolved column (``Scope.info``): EXTRACT needs its type
#: and date bounds, which ColumnBounds (numbers only) does not give.
ColumnInfos = Callable[[exp.Column], ColumnInfo]
MAX_MAGNITUDE = 2.0**52

#: EXTRACT fields with the same range for every date or timestamp.
FIXED_FIELDS: dict[str, tuple[int, int]] = {
    "MONTH": (1, 12),
    "DAY": (1, 31),
    "DOW": (0, 6),
    "ISODOW": (1, 7),
    "DOY": (1, 366),
    "QUARTER": (1, 4),
}
TIME_FIELDS: dict[str, tuple[int, int]] = {"HOUR": (0, 23), "MINUTE": (0, 59)}
YEAR_FIELDS = frozenset({"YEAR"})  # needs the column's declared date bounds
#: Not week or isoyear: DuckDB fails on them for dates near its range's ends, even for
#: values a clamp replaces (review finding), an error that would reveal such a date.
EXTRACT_FIELDS = "year, quarter, month, day, dow, isodow, doy, hour, minute"


@dataclass(frozen=True)
class _Columns:
    bounds: ColumnBounds
    info: ColumnInfos | None


def interval_of(
    node: exp.Expr, column_bounds: ColumnBounds, column_info: ColumnInfos | None = None
) -> Interval:
    """The interval of ``node`` (columns already resolved), or raise Rejected.

    ``column_info`` is needed for EXTRACT (without it, EXTRACT is refused)."""
    columns = _Columns(column_bounds, column_info)
    found = _interval(node, columns)
    if max(abs(found.lower), abs(found.upper)) > MAX_MAGNITUDE:
        raise Rejected(
            "the expression inside the aggregate can exceed ±2^52",
            hint="declare tighter column bounds",
        )

    def column(c: exp.Column) -> tuple[float, float, bool]:
        declared = column_bounds(c)
        return declared.lower, declared.upper, declared.integer

    def magnitude(part: exp.Expr) -> float:
        inner = _interval(part, columns)
        return max(abs(inner.lower), abs(inner.upper))

    check_underflow(node, column, magnitude)
    return found


def _interval(node: exp.Expr, bounds: _Columns) -> Interval:
    """The node's interval; every intermediate result must stay within ±2^52 as well, so
    that no step of the computation can overflow (an error that would depend on data)."""
    found = _node_interval(node, bounds)
    if max(abs(found.lower), abs(found.upper)) > MAX_MAGNITUDE:
        raise Rejected(
            f"{node.sql(dialect='postgres')} inside an aggregate can exceed ±2^52",
            hint="declare tighter column bounds or use smaller constants",
        )
    return found


def _node_interval(node: exp.Expr, bounds: _Columns) -> Interval:
    if isinstance(node, exp.Paren):
        return _interval(node.this, bounds)
    if isinstance(node, exp.Column):
        return bounds.bounds(node)
    if isinstance(node, exp.Extract):
        return _extract(node, bounds.info)
    if isinstance(node, exp.Literal) and not node.is_string:
        value = float(node.this)
        return Interval(value, value, value.is_integer() and "." not in node.this)
    if isinstance(node, exp.Boolean):
        value = 1.0 if node.this else 0.0
        return Interval(value, value, True)
    if isinstance(node, exp.Neg):
        inner = _interval(node.this, bounds)
        return Interval(-inner.upper, -inner.lower, inner.integer)
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
        left, right = _interval(node.this, bounds), _interval(node.expression, bounds)
        return _binary(node, left, right)
    if isinstance(node, exp.Div):
        divisor = node.expression
        if isinstance(divisor, exp.Nullif):  # x / NULLIF(y, 0), as the rewriter writes it
            divisor = divisor.this
        left, right = _interval(node.this, bounds), _interval(divisor, bounds)
        if right.lower <= 0 <= right.upper:
            raise Rejected(
                "division inside an aggregate needs a divisor that cannot be 0",
                hint="divide by a non-zero constant, or compute ratios of aggregates instead",
            )
        corners = [a / b for a in (left.lower, left.upper) for b in (right.lower, right.upper)]
        return Interval(min(corners), max(corners), False)
    if isinstance(node, exp.Abs):
        inner = _interval(node.this, bounds)
        low = 0.0 if inner.lower <= 0 <= inner.upper else min(abs(inner.lower), abs(inner.upper))
        return Interval(low, max(abs(inner.lower), abs(inner.upper)), inner.integer)
    if isinstance(node, exp.Case):
        return _case(node, bounds)
    if isinstance(node, exp.If):
        then = _interval(node.args["true"], bounds)
        other = node.args.get("false")
        return then if other is None else then.hull(_interval(other, bounds))
    if isinstance(node, exp.Coalesce):
        result = _interval(node.this, bounds)
        for other in node.expressions:
            result = result.hull(_interval(other, bounds))
        return result
    if isinstance(node, (exp.Greatest, exp.Least)):
        # Both engines skip NULL arguments, so the result may be any one argument's value:
        # the hull of all of them (not the pointwise max/min) is what is sound.
        result = _interval(node.this, bounds)
        for other in node.expressions:
            result = result.hull(_interval(other, bounds))
        return result
    if isinstance(node, (exp.Floor, exp.Ceil, exp.Round)):
        inner = _interval(node.this, bounds)
        _rounding_arguments(node)
        digits = rounding_digits(node)
        if digits is None:
            raise Rejected("round(x, d) inside an aggregate needs a constant d")
        if digits < 0:
            return _whole_multiples(inner, 10**-digits)
        if digits == 0:
            return Interval(math.floor(inner.lower), math.ceil(inner.upper), True)
        scale = 10.0**digits
        return Interval(
            math.floor(inner.lower * scale) / scale,
            math.ceil(inner.upper * scale) / scale,
            False,
        )
    if isinstance(node, exp.Cast) and node.to.is_type(*exp.DataType.NUMERIC_TYPES):
        inner = _interval(node.this, bounds)
        if node.to.is_type(*exp.DataType.INTEGER_TYPES):
            return Interval(math.floor(inner.lower), math.ceil(inner.upper), True)
        if node.to.is_type(exp.DataType.Type.DECIMAL) and node.to.expressions:
            lower, upper = decimal_cast(node, inner.lower, inner.upper)
            return Interval(lower, upper, inner.integer)
        return inner
    raise Rejected(
        f"cannot bound {_around(node).sql(dialect='postgres')} inside an aggregate",
        hint=(
            "aggregate numeric columns with declared bounds, combined with + - * /, abs, "
            "round, floor, ceil, least, greatest, coalesce, CASE, EXTRACT(field FROM a date "
            "or timestamp column), or numeric literals"
        ),
    )


def _around(node: exp.Expr) -> exp.Expr:
    """What a message quotes for a value that cannot be bounded: the arithmetic it is an
    operand of (``CURRENT_DATE - visit_date``, not the date alone)."""
    parent = node.parent
    return parent if isinstance(parent, (exp.Add, exp.Sub, exp.Mul, exp.Div)) else node


def _extract(node: exp.Extract, info: ColumnInfos | None) -> Interval:
    written = node.sql(dialect="postgres")
    field = node.this.name.upper()
    source = node.expression.unnest() if node.expression is not None else None
    if info is None:  # the caller knows no column types (not inside an aggregate)
        raise Rejected(f"cannot bound {written} here")
    if not isinstance(source, exp.Column):
        raise Rejected(
            f"cannot bound {written} inside an aggregate: EXTRACT inside an aggregate needs "
            "a date or timestamp column",
            hint="extract from a column itself, e.g. AVG(EXTRACT(year FROM visit_date))",
        )
    column = info(source)
    if not column.type.temporal:
        raise Rejected(
            f'{written} inside an aggregate: column "{column.name}" is of type '
            f"{column.type.value}, not a date or timestamp",
            hint="EXTRACT inside an aggregate needs a date or timestamp column",
        )
    if field in TIME_FIELDS and column.type is ColumnType.DATE:
        raise Rejected(
            f'{written} inside an aggregate: "{column.name}" is a date, which has no '
            f"{field.lower()}",
            hint="extract hour or minute from a timestamp column",
        )
    fixed = FIXED_FIELDS.get(field) or TIME_FIELDS.get(field)
    if fixed is not None:
        return Interval(fixed[0], fixed[1], True)
    if field not in YEAR_FIELDS:
        raise Rejected(
            f"{written} inside an aggregate: EXTRACT({field.lower()}) is not supported there "
            "(seconds, epochs and fractions of a second are not whole numbers, and the "
            "engines dpproxy runs on compute some of them differently)",
            hint=f"extract one of {EXTRACT_FIELDS}",
        )
    declared = column.date_bounds
    if declared is None:
        raise Rejected(
            f'{written} inside an aggregate needs date bounds for "{column.name}", and its '
            "table's policy declares none",
            hint=(
                f"ask an admin to declare lower and upper for {column.name} as dates in the "
                "configuration (lower = 2020-01-01, upper = 2024-12-31), or extract month, "
                "quarter, day or another field with a fixed range"
            ),
        )
    lower, upper = declared
    years = local_years(column) if column.zoned else None
    if years is not None:  # its local year, in the session's zone: within a day of UTC's
        if field == "YEAR":
            return Interval(years[0], years[1], True)
        return Interval(years[0] - 1, years[1] + 1, True)  # the ISO year: a year apart at most
    if field == "YEAR":
        return Interval(lower.year, upper.year, True)
    # The ISO year never decreases as the date grows: its range is its bounds'.
    return Interval(_iso_year(lower), _iso_year(upper), True)


def _rounding_arguments(node: exp.Floor | exp.Ceil | exp.Round) -> None:
    """floor(x) and ceil(x) take no d, and round no third argument, on either engine: the
    query would fail on every run after the charge (and the rewritten SQL would drop a
    third argument of round, answering another question)."""
    extra = {key for key, value in node.args.items() if value is not None} - {"this"}
    if isinstance(node, exp.Round):
        extra -= {"decimals"}
    if extra:
        name = function_name(node)
        form = "round(x) or round(x, d)" if isinstance(node, exp.Round) else f"{name}(x)"
        raise Rejected(
            f"{name} with more arguments than {form} is not supported inside an aggregate",
            hint="write round(x, d) to round to d decimal places (d from -15 to 15), "
            "or floor(x) / ceil(x)",
        )


def _whole_multiples(inner: Interval, unit: int) -> Interval:
    """round(x, d) with d < 0 (``unit`` = 10^-d): a multiple of ``unit``, between the
    multiples at or below x's lower bound and at or above its upper bound, computed exactly
    (a float product or quotient by 10^-d could round across a multiple). Whichever way an
    engine rounds a double (DuckDB: x / 10^-d in double precision, rounded, times 10^-d;
    PostgreSQL: x as a numeric of 15 significant digits, in which every such multiple
    within ±2^52 is exact), its value moves monotonically with x and stays within these two
    multiples. (A ``real`` keeps 6 digits as a numeric, and a multiple beyond 2^24 may not
    be one: such a value can pass a bound by a few units in its sixth digit, but it is a
    whole number all the same, and the value is clamped to the interval before it is
    summed, rewriter.passes.bound_per_unit.)"""
    lower = math.floor(Fraction(inner.lower) / unit) * unit
    upper = math.ceil(Fraction(inner.upper) / unit) * unit
    return Interval(float(lower), float(upper), True)


def _iso_year(day: dt.date) -> int:
    return day.isocalendar().year


def _binary(node: exp.Expr, left: Interval, right: Interval) -> Interval:
    integer = left.integer and right.integer
    if isinstance(node, exp.Add):
        return Interval(left.lower + right.lower, left.upper + right.upper, integer)
    if isinstance(node, exp.Sub):
        return Interval(left.lower - right.upper, left.upper - right.lower, integer)
    corners = [a * b for a in (left.lower, left.upper) for b in (right.lower, right.upper)]
    return Interval(min(corners), max(corners), integer)


def _case(node: exp.Case, bounds: _Columns) -> Interval:
    if node.this is not None:
        raise Rejected(
            "CASE <value> WHEN … inside an aggregate is not supported; "
            "write CASE WHEN <condition> THEN …"
        )
    values = [branch.args["true"] for branch in node.args.get("ifs", [])]
    default = node.args.get("default")
    if default is not None:
        values.append(default)
    # A NULL value adds nothing to the range (nullif(x, c) is CASE WHEN x = c THEN NULL
    # ELSE x END: x's range, rewriter.passes.row_functions); aggregates skip NULL.
    branches = [_interval(v, bounds) for v in values if not isinstance(v.unnest(), exp.Null)]
    if not branches:
        raise Rejected(
            f"{node.sql(dialect='postgres')} inside an aggregate is always NULL",
            hint="aggregate a value that is not NULL on some rows",
        )
    result = branches[0]
    for other in branches[1:]:
        result = result.hull(other)
    return result
