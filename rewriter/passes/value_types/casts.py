"""Casts that every value of the kind cast fits.

A resolved row-level expression may not cast a value to a type it might not fit (text to
a number, a real to an integer, a narrowing integer): the cast would fail on some rows
only. Literals may be cast freely, whether they fit does not depend on the data (a date
or timestamp written as text is checked now, ``literals.moment_literal``, and a text that
PostgreSQL's input function of the type refuses is refused as it refuses it,
``literal_input``); constant
casts such as ``CAST('x' AS INTEGER)`` are evaluated before the query runs
(``rewriter.passes.constants``).
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.catalog import ColumnType
from rewriter.errors import Rejected
from rewriter.passes.value_types.kinds import (
    BOOLEAN,
    DATE,
    LITERAL_TEXT,
    NULL,
    NUMBER,
    TEXT,
    TIME,
    ZONED,
)
from rewriter.passes.value_types.literal_input import (
    cast_type,
    read_as_boolean,
    read_as_moment,
    read_as_number,
)
from rewriter.passes.value_types.literals import moment_literal
from rewriter.passes.value_types.number_casts import number_cast_fits
from rewriter.scope import Scope

_SAFE_CAST_TARGETS = {
    # target type -> the kinds of values that always fit it
    exp.DataType.Type.TEXT: {NUMBER, TEXT, DATE, TIME, BOOLEAN, NULL, LITERAL_TEXT},
    exp.DataType.Type.VARCHAR: {NUMBER, TEXT, DATE, TIME, BOOLEAN, NULL, LITERAL_TEXT},
    exp.DataType.Type.DOUBLE: {NUMBER, NULL},
    exp.DataType.Type.FLOAT: {NUMBER, NULL},
    # A timestamp with time zone: the date and the local time in the session's TimeZone.
    exp.DataType.Type.DATE: {DATE, TIME, ZONED, NULL},
    exp.DataType.Type.TIMESTAMP: {DATE, TIME, ZONED, NULL},
    exp.DataType.Type.BOOLEAN: {BOOLEAN, NULL},
}

_LITERALS = (exp.Literal, exp.Null, exp.Boolean)

#: In raw contexts, casts to these types only of columns of these types (see ``cast_kind``).
_RAW_NARROWED = {
    exp.DataType.Type.DOUBLE: {ColumnType.INTEGER, ColumnType.FLOAT},
    exp.DataType.Type.FLOAT: set(),
    exp.DataType.Type.TIMESTAMP: {ColumnType.TIMESTAMP},
}


def cast_kind(node: exp.Cast, source: str, scope: Scope, where: str, *, raw: bool = True) -> str:
    """The kind of a cast of a value of kind ``source``; Rejected if some value of that
    kind might not fit the target type."""
    target = node.to.this
    literal = isinstance(node.this, _LITERALS)
    # A cast of a cast of a literal ('1'::int2::int, an element of an array parameter
    # cast by the query) is a constant too: evaluated before the query runs.
    constant = literal or (
        isinstance(node.this, exp.Cast) and isinstance(node.this.this, _LITERALS)
    )
    safe = _SAFE_CAST_TARGETS.get(target, set())
    if raw and target in _RAW_NARROWED:
        # Raw values keep their physical type: a HUGEINT does not fit a BIGINT, a DOUBLE
        # not a REAL, a PostgreSQL NUMERIC of 1e400 not a DOUBLE, a date of the year
        # 300000 not a TIMESTAMP (errors on those rows only). Inside aggregates values
        # are cleaned first (clamped, as DOUBLE or BIGINT), so these casts are safe there.
        column = node.this if isinstance(node.this, exp.Column) else None
        fits = column is not None and scope.info(column).type in _RAW_NARROWED[target]
        safe = safe if fits else set()
    if type(node.this) is exp.Literal and node.this.is_string:
        _read_as(node.this.name, node.to)
    if literal and target in (exp.DataType.Type.DATE, exp.DataType.Type.TIMESTAMP):
        moment_literal(node, where)
    if source == ZONED and target in (exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR):
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where}: PostgreSQL writes a timestamp with "
            "time zone as text with its offset in the session's TimeZone (+02), which "
            "dpproxy does not compute",
            hint="cast its local time: CAST(CAST(ts AS TIMESTAMP) AS TEXT)",
        )
    if not constant and source not in safe and not number_cast_fits(node, source, scope, raw=raw):
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where} could fail on some values, and the "
            "error would reveal them",
            hint="compare or round instead of casting, or cast to text",
        )
    return _target_kind(target)


def _read_as(text: str, to: exp.DataType) -> None:
    """Refuse a quoted text cast to a number, boolean, date or timestamp that PostgreSQL's
    input function of the type refuses (``'1.5'::int``, which DuckDB would round to 2;
    ``literal_input``)."""
    number = cast_type(to)
    if number is not None:
        read_as_number(text, number)
    elif to.this == exp.DataType.Type.BOOLEAN:
        read_as_boolean(text)
    elif to.this in (exp.DataType.Type.DATE, exp.DataType.Type.TIMESTAMP):
        read_as_moment(text, date=to.this == exp.DataType.Type.DATE)


def _target_kind(target: exp.DType) -> str:
    if target in (exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR):
        return TEXT
    if target == exp.DataType.Type.DATE:
        return DATE
    if target == exp.DataType.Type.TIMESTAMP:
        return TIME
    if target == exp.DataType.Type.BOOLEAN:
        return BOOLEAN
    return NUMBER
