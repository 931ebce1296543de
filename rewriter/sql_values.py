"""SQL literals for values the rewriter writes into queries (bounds, limits), spelled the
same on DuckDB and PostgreSQL: negative numbers as a negation of a literal, floats by
their shortest round-trip text, dates and timestamps as casts of ISO strings."""

from __future__ import annotations

import datetime as dt

from sqlglot import exp

from rewriter.catalog import ColumnType
from rewriter.underflow import LARGEST_DOUBLE


def integer(value: int) -> exp.Expr:
    literal = exp.Literal.number(abs(value))
    return exp.Neg(this=literal) if value < 0 else literal


def number(value: float) -> exp.Expr:
    literal = exp.Literal.number(repr(abs(float(value))))
    return exp.Neg(this=literal) if value < 0 else literal


def bound(value: float) -> exp.Expr:
    """A declared numeric bound: an integer literal when it is a whole number."""
    return integer(int(value)) if float(value).is_integer() else number(value)


def moment(value: dt.date, kind: ColumnType) -> exp.Expr:
    """A declared date bound as a value of the column's type: CAST('…' AS DATE) for a DATE
    column, CAST('…' AS TIMESTAMP) for a TIMESTAMP column, so that both engines compare it
    as the column's type."""
    if kind is ColumnType.DATE:
        return exp.cast(exp.Literal.string(value.isoformat()), exp.DataType.Type.DATE)
    if not isinstance(value, dt.datetime):
        raise ValueError("a timestamp column's bounds are datetimes (ColumnInfo)")
    text = value.isoformat(sep=" ", timespec="microseconds")
    return exp.cast(exp.Literal.string(text), exp.DataType.Type.TIMESTAMP)


#: PostgreSQL refuses to cast a numeric below the smallest subnormal double (~4.9e-324)
#: to DOUBLE PRECISION; decimals closer to 0 than this are taken as 0 before the cast.
TINY = 1e-300


def in_double_range(column: exp.Expr, kind: ColumnType) -> exp.Expr:
    """True when a FLOAT or DECIMAL column's value is a finite number within the range of
    DOUBLE; false for NaN, ±infinity and beyond; NULL for NULL. A DECIMAL is compared in
    its own type (PostgreSQL: a numeric beyond the range would fail the cast to DOUBLE,
    an error that would depend on the data); DuckDB compares it as DOUBLE, which never
    fails. A FLOAT is compared as DOUBLE."""
    value = column.copy() if kind is ColumnType.DECIMAL else _double(column)
    return exp.Between(
        this=value,
        low=exp.Neg(this=exp.Literal.number(LARGEST_DOUBLE)),
        high=exp.Literal.number(LARGEST_DOUBLE),
    )


def as_double(column: exp.Expr, kind: ColumnType) -> exp.Expr:
    """A FLOAT or DECIMAL column's value as DOUBLE, to be used only where
    :func:`in_double_range` holds: a DECIMAL closer to 0 than TINY becomes 0 before the
    cast (on PostgreSQL the cast of such a numeric fails)."""
    if kind is not ColumnType.DECIMAL:
        return _double(column)
    tiny = exp.and_(
        exp.GT(this=column.copy(), expression=number(-TINY)),
        exp.LT(this=column.copy(), expression=number(TINY)),
    )
    zero = exp.cast(exp.Literal.number(0), exp.DataType.Type.DOUBLE)
    return exp.Case(ifs=[exp.If(this=tiny, true=zero)], default=_double(column))


def _double(value: exp.Expr) -> exp.Expr:
    return exp.cast(value.copy(), exp.DataType.Type.DOUBLE)


def between_keeping_null(value: exp.Expr, low: exp.Expr, high: exp.Expr) -> exp.Expr:
    """``value`` clamped to [low, high] with a CASE, which keeps NULL as NULL (GREATEST and
    LEAST would turn it into a bound). ``value`` becomes the CASE's default."""
    return exp.Case(
        ifs=[
            exp.If(this=exp.LT(this=value.copy(), expression=low.copy()), true=low),
            exp.If(this=exp.GT(this=value.copy(), expression=high.copy()), true=high),
        ],
        default=value,
    )


def least_greatest(value: exp.Expr, low: exp.Expr, high: exp.Expr) -> exp.Expr:
    """LEAST(GREATEST(value, low), high), taking ``value`` (not copied). GREATEST and LEAST
    skip NULL (``ignore_nulls``), as on DuckDB and PostgreSQL: what exp.func builds."""
    greatest = exp.Greatest(this=value, expressions=[low], ignore_nulls=True)
    return exp.Least(this=greatest, expressions=[high], ignore_nulls=True)


def per_value_partial(steps: exp.Expr, count: exp.Expr, rows: int) -> exp.Expr:
    """A unit's partial sum ``steps`` of its ``count`` values (both DOUBLE, taken, not
    copied), as ``rows`` values at the unit's own mean when it has more values than that:
    ``CASE WHEN count > rows THEN FLOOR(steps / count * rows + 0.5) ELSE steps END``.

    With every value within [lower, upper] steps, ``steps / count`` lies within them too,
    and the result within ``rows`` times them (rounded to a whole step, it cannot pass a
    whole bound); the caller clamps it to the unit's limits all the same. IEEE division
    and multiplication round alike on DuckDB and PostgreSQL, so the engines agree."""
    scaled = exp.Floor(
        this=exp.Add(
            this=exp.Mul(
                this=exp.Paren(
                    this=exp.Div(
                        this=exp.Paren(this=steps.copy()), expression=exp.Paren(this=count.copy())
                    )
                ),
                expression=number(float(rows)),
            ),
            expression=exp.Literal.number("0.5"),
        )
    )
    more = exp.GT(this=count, expression=number(float(rows)))
    return exp.Case(ifs=[exp.If(this=more, true=scaled)], default=steps)
