"""GROUP BY keys of a date or timestamp shifted by a constant interval (``rewriter.passes.
data_keys``): Metabase's weeks that start on Sunday,

    DATE_TRUNC('week', visit_date + INTERVAL '1 day') + INTERVAL '-1 day'

A date or timestamp key ``x + INTERVAL '…'`` (or ``- INTERVAL``) is ``CAST(x AS
TIMESTAMP)`` plus the interval, a timestamp on both engines (PostgreSQL adds an interval to
a date as to its midnight). The interval is a constant of whole days, weeks, hours, minutes
and seconds: months and years are refused (the engines end a shorter month differently
enough to matter nowhere, but a month is no fixed length, and nothing needs them here), as
are shifts of more than MAX_DAYS days. The shifted value is computed only where the key is
(within the years 1 to 9999), where adding at most MAX_DAYS days cannot fail on either
engine, and released only where it is itself within those years, else NULL, as every date
key. A timestamp with time zone is refused: PostgreSQL adds a day to its local date in the
session's zone (23 or 25 hours across a change of the clocks).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from rewriter.passes.current_time import interval_constant

#: The longest shift accepted, in days (about 270 years).
MAX_DAYS = 100_000
_MICROS_PER_SECOND = 1_000_000
_SECONDS_PER_DAY = 86_400
_FIRST = "0001-01-01 00:00:00"
_LAST = "9999-12-31 23:59:59.999999"


@dataclass(frozen=True)
class Shift:
    """A constant interval of whole seconds: days and seconds, either sign."""

    days: int
    seconds: int


class ShiftRefused(Exception):
    """An interval that is not a shift this module computes: ``message`` says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def split_shift(node: exp.Expr) -> tuple[exp.Expr, exp.Expr] | None:
    """(moment, interval) of ``moment + INTERVAL …``, ``INTERVAL … + moment`` or ``moment -
    INTERVAL …`` (the interval negated: a Neg), else None."""
    inner = node.unnest()
    if isinstance(inner, exp.Add):
        if isinstance(inner.expression.unnest(), exp.Interval):
            return inner.this, inner.expression.unnest()
        if isinstance(inner.this.unnest(), exp.Interval):
            return inner.expression, inner.this.unnest()
    if isinstance(inner, exp.Sub) and isinstance(inner.expression.unnest(), exp.Interval):
        return inner.this, exp.Neg(this=inner.expression.unnest())
    return None


def day_shift(node: exp.Expr) -> tuple[exp.Expr, int] | None:
    """(moment, days) of ``moment + n``, ``n + moment`` or ``moment - n`` for a constant
    whole number n (a literal, negated or not, or one cast to an integer type: a driver's
    ``CAST(1 AS INT)``), which PostgreSQL computes for a date as that many days later
    (earlier); None for anything else. Whether ``moment`` is a date is the caller's to
    tell (``stay + 1`` is split alike)."""
    inner = node.unnest()
    if isinstance(inner, exp.Add):
        for moment, amount in ((inner.this, inner.expression), (inner.expression, inner.this)):
            days = _whole_number(amount)
            if days is not None:
                return moment, days
    if isinstance(inner, exp.Sub):
        days = _whole_number(inner.expression)
        if days is not None:
            return inner.this, -days
    return None


def _whole_number(node: exp.Expr) -> int | None:
    value = node.unnest()
    if (
        isinstance(value, exp.Cast)
        # PostgreSQL's date + n takes an integer (a smallint widens to one; a bigint
        # does not: operator does not exist: date + bigint).
        and value.to.is_type(exp.DataType.Type.INT, exp.DataType.Type.SMALLINT)
        and not value.to.expressions
    ):
        value = value.this.unnest()
    sign = 1
    if isinstance(value, exp.Neg):
        sign, value = -1, value.this.unnest()
    if isinstance(value, exp.Literal) and value.is_int:
        return sign * int(value.this)
    return None


def read_shift(interval: exp.Expr) -> Shift:
    """The shift an interval constant (or its negation, a Neg) makes, or ShiftRefused."""
    sign = 1
    if isinstance(interval, exp.Neg):
        sign, interval = -1, interval.this
    parts = interval_constant(interval)
    if parts is None:
        raise ShiftRefused(
            "the interval must be a constant of days, weeks, hours, minutes or seconds, "
            "e.g. INTERVAL '1 day'"
        )
    months, days, micros = parts
    if months:
        raise ShiftRefused("a shift of months or years is not supported; shift by days")
    if micros % _MICROS_PER_SECOND:
        raise ShiftRefused("a shift by a fraction of a second is not supported")
    seconds = micros // _MICROS_PER_SECOND
    if abs(days) + abs(seconds) // _SECONDS_PER_DAY > MAX_DAYS:
        raise ShiftRefused(f"a shift of more than {MAX_DAYS:,} days is not supported")
    return Shift(sign * days, sign * seconds)


def shifted(moment: exp.Expr, shift: Shift) -> exp.Expr:
    """``CAST(moment AS TIMESTAMP)`` plus the shift (``moment``: a key's SQL, a date or
    timestamp within the years 1 to 9999, or NULL), as a TIMESTAMP on both engines."""
    value: exp.Expr = exp.cast(moment, exp.DataType.Type.TIMESTAMP)
    for amount, unit in ((shift.days, "DAY"), (shift.seconds, "SECOND")):
        if amount:
            value = exp.Add(
                this=value,
                expression=exp.Interval(this=exp.Literal.string(str(amount)), unit=exp.var(unit)),
            )
    return value


def within_years(value: exp.Expr) -> exp.Expr:
    """A shifted timestamp where it is within the years 1 to 9999, else NULL."""
    low, high = (
        exp.cast(exp.Literal.string(t), exp.DataType.Type.TIMESTAMP) for t in (_FIRST, _LAST)
    )
    return exp.Case(
        ifs=[exp.If(this=exp.Between(this=value.copy(), low=low, high=high), true=value)]
    )
