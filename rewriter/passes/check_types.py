"""Row-level expressions must not fail on particular values.

An error that happens only for some rows tells the analyst that such a row exists: it is a
channel around the noise. So a resolved row-level expression may not cast a value to a
type it might not fit (text to a number, a real to an integer, a narrowing integer), nor
compare or combine values of unrelated types (DuckDB would cast a text column to a number
to compare it with ``5``, and fail on the first non-numeric value). Literals may be cast
freely: whether they fit does not depend on the data.

Arithmetic on raw column values (WHERE, GROUP BY, FILTER, COUNT arguments, conditions) is
refused too: it could overflow for one particular value. Inside SUM/AVG/… values, columns
are first clamped to their declared bounds and every intermediate result is bounded by
interval arithmetic (rewriter.intervals), so arithmetic there cannot overflow.
"""

from __future__ import annotations

import datetime as dt
import math
import re

from sqlglot import exp

from rewriter.catalog import ColumnType
from rewriter.errors import Rejected
from rewriter.scope import Scope

NUMBER, TEXT, DATE, TIME, BOOLEAN, NULL, LITERAL_TEXT, OTHER = (
    "number",
    "text",
    "date",
    "timestamp",
    "boolean",
    "null",
    "text literal",
    "other",
)
_COLUMN_KINDS = {
    ColumnType.INTEGER: NUMBER,
    ColumnType.FLOAT: NUMBER,
    ColumnType.DECIMAL: NUMBER,
    ColumnType.TEXT: TEXT,
    ColumnType.DATE: DATE,
    ColumnType.TIMESTAMP: TIME,
    ColumnType.BOOLEAN: BOOLEAN,
    ColumnType.OTHER: OTHER,
}
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ)
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)
_TEXT_FUNCTIONS = (exp.Lower, exp.Upper, exp.Trim, exp.Substring, exp.DPipe)
_NUMBER_FUNCTIONS = (
    exp.Length,
    exp.Abs,
    exp.Round,
    exp.Floor,
    exp.Ceil,
    exp.Sign,
    exp.Extract,
    exp.WidthBucket,
)
_SAFE_CAST_TARGETS = {
    # target type -> the kinds of values that always fit it
    exp.DataType.Type.TEXT: {NUMBER, TEXT, DATE, TIME, BOOLEAN, NULL, LITERAL_TEXT},
    exp.DataType.Type.VARCHAR: {NUMBER, TEXT, DATE, TIME, BOOLEAN, NULL, LITERAL_TEXT},
    exp.DataType.Type.DOUBLE: {NUMBER, NULL},
    exp.DataType.Type.FLOAT: {NUMBER, NULL},
    exp.DataType.Type.DATE: {DATE, TIME, NULL},
    exp.DataType.Type.TIMESTAMP: {DATE, TIME, NULL},
    exp.DataType.Type.BOOLEAN: {BOOLEAN, NULL},
}


#: Contexts whose value is computed from clamped columns, bounded by interval arithmetic.
VALUE_CONTEXTS = frozenset(
    {"SUM", "AVG", "VAR_POP", "VAR_SAMP", "STDDEV_POP", "STDDEV_SAMP", "MIN", "MAX"}
    # Quantiles (rewriter.passes.quantiles) bin clamped values, bounded the same way.
    | {"MEDIAN", "PERCENTILE_CONT", "PERCENTILE_DISC", "QUANTILE_CONT", "QUANTILE_DISC", "QUANTILE"}
)


def check_types(node: exp.Expr, scope: Scope, where: str) -> None:
    """Raise Rejected if ``node`` (resolved) could fail on some values."""
    _kind(node, scope, where, raw=where not in VALUE_CONTEXTS)


def value_kind(node: exp.Expr, scope: Scope, where: str) -> str:
    """The kind of value ``node`` (resolved, checked) has: NUMBER, TEXT, DATE, …"""
    return _kind(node, scope, where, raw=where not in VALUE_CONTEXTS)


def _kind(node: exp.Expr, scope: Scope, where: str, *, raw: bool = True) -> str:
    if raw and isinstance(node, (*_ARITHMETIC, exp.Neg)) and node.find(exp.Column):
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where}: arithmetic on a column's raw values "
            "could overflow for one particular value, and the error would reveal it",
            hint="compare the column itself (e.g. cost > 100 / 1.1), or compute inside "
            "SUM/AVG, where values are clamped to their bounds",
        )
    if isinstance(node, exp.Paren):
        return _kind(node.this, scope, where, raw=raw)
    if isinstance(node, (exp.Case, exp.If)) and not raw:
        # Conditions see raw values; the branches are values.
        for branch in node.args.get("ifs", []) if isinstance(node, exp.Case) else [node]:
            _kind(branch.this, scope, where, raw=True)
        values: list[exp.Expr] = (
            [b.args["true"] for b in node.args.get("ifs", [])]
            + ([node.args["default"]] if node.args.get("default") is not None else [])
            if isinstance(node, exp.Case)
            else [node.args["true"], *([node.args["false"]] if node.args.get("false") else [])]
        )
        for value in values:
            _kind(value, scope, where, raw=False)
        return _common(node, scope, where)
    if isinstance(node, exp.Column):
        return _COLUMN_KINDS[scope.info(node).type]
    if isinstance(node, exp.Literal):
        return LITERAL_TEXT if node.is_string else NUMBER
    if isinstance(node, exp.Null):
        return NULL
    if isinstance(node, exp.Boolean):
        return BOOLEAN
    if isinstance(node, exp.Cast):
        return _cast(node, scope, where)
    if isinstance(node, _COMPARISONS):
        _comparable(node, [node.this, node.expression], scope, where)
        return BOOLEAN
    if isinstance(node, exp.Between):
        _comparable(node, [node.this, node.args["low"], node.args["high"]], scope, where)
        return BOOLEAN
    if isinstance(node, exp.In):
        _comparable(node, [node.this, *node.expressions], scope, where)
        return BOOLEAN
    if isinstance(node, exp.Neg):
        return _numeric(node, [node.this], scope, where, [_kind(node.this, scope, where, raw=raw)])
    if isinstance(node, _ARITHMETIC):
        kinds = [
            _kind(node.this, scope, where, raw=raw),
            _kind(node.expression, scope, where, raw=raw),
        ]
        if any(k in (DATE, TIME) for k in kinds) and isinstance(node, (exp.Add, exp.Sub)):
            return DATE  # date arithmetic with intervals or days
        return _numeric(node, [node.this, node.expression], scope, where, kinds)
    for child in node.iter_expressions():
        _kind(child, scope, where, raw=raw)
    if isinstance(node, (exp.And, exp.Or, exp.Not, exp.Is, exp.Like, exp.ILike)):
        return BOOLEAN
    if isinstance(node, _TEXT_FUNCTIONS):
        return TEXT
    if isinstance(node, _NUMBER_FUNCTIONS):
        return NUMBER
    if isinstance(node, (exp.Coalesce, exp.Greatest, exp.Least, exp.Case, exp.If)):
        return _common(node, scope, where)
    if isinstance(node, (exp.DateTrunc, exp.TimestampTrunc)):
        return TIME
    return OTHER


def _cast(node: exp.Cast, scope: Scope, where: str) -> str:
    source = _kind(node.this, scope, where)
    target = node.to.this
    literal = isinstance(node.this, (exp.Literal, exp.Null, exp.Boolean))
    safe = _SAFE_CAST_TARGETS.get(target, set())
    if target == exp.DataType.Type.BIGINT and isinstance(node.this, exp.Column):
        column = scope.info(node.this)
        if column.type is ColumnType.INTEGER:
            safe = {NUMBER}
    if not literal and source not in safe:
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where} could fail on some values, and the "
            "error would reveal them",
            hint="compare or round instead of casting, or cast to text",
        )
    return _target_kind(target)


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


def _numeric(
    node: exp.Expr,
    operands: list[exp.Expr],
    scope: Scope,
    where: str,
    kinds: list[str] | None = None,
) -> str:
    found = kinds or [_kind(o, scope, where) for o in operands]
    if any(k not in (NUMBER, NULL) for k in found):
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where} does arithmetic on a value that is "
            "not a number",
            hint="arithmetic needs numeric columns and literals",
        )
    return NUMBER


def _comparable(node: exp.Expr, operands: list[exp.Expr], scope: Scope, where: str) -> None:
    kinds = {_kind(o, scope, where) for o in operands} - {NULL}
    if len(kinds) <= 1:
        return
    if LITERAL_TEXT in kinds and len(kinds - {LITERAL_TEXT}) == 1:
        (other,) = kinds - {LITERAL_TEXT}
        if other != TEXT:
            for operand in operands:
                if _kind(operand, scope, where) == LITERAL_TEXT:
                    operand.replace(_typed_literal(operand, other, node, where))
        return
    if kinds == {DATE, TIME}:
        return
    raise Rejected(
        f"{node.sql(dialect='postgres')} in {where} compares values of different types "
        f"({', '.join(sorted(kinds))}); the database would convert them row by row and could "
        "fail on some values",
        hint="compare a text column with a quoted text value, e.g. department = 'Cardiology'",
    )


def _common(node: exp.Expr, scope: Scope, where: str) -> str:
    values: list[exp.Expr]
    if isinstance(node, exp.Case):
        values = [b.args["true"] for b in node.args.get("ifs", [])]
        if node.args.get("default") is not None:
            values.append(node.args["default"])
    elif isinstance(node, exp.If):
        values = [node.args["true"], *([node.args["false"]] if node.args.get("false") else [])]
    else:
        values = [node.this, *node.expressions]
    kinds = {_kind(v, scope, where) for v in values} - {NULL}
    if len(kinds - {LITERAL_TEXT}) > 1 or (LITERAL_TEXT in kinds and kinds - {LITERAL_TEXT, TEXT}):
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where} mixes values of different types",
            hint="give every branch the same type",
        )
    kind = next(iter(kinds), NULL)
    return TEXT if kind == LITERAL_TEXT else kind


_NUMBER_TEXT = re.compile(r"\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*")
_DATE_TEXT = re.compile(r"\s*\d{4}-\d{2}-\d{2}\s*")
_TIME_TEXT = re.compile(r"\s*\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?)?\s*")
_BOOLEANS = {
    "true": True,
    "t": True,
    "yes": True,
    "on": True,
    "1": True,
    "false": False,
    "f": False,
    "no": False,
    "off": False,
    "0": False,
}


def _typed_literal(literal: exp.Expr, kind: str, node: exp.Expr, where: str) -> exp.Expr:
    """A quoted literal compared with a number, date, timestamp or boolean, as a literal of
    that type, checked now: DuckDB would convert it only on the rows that reach the
    comparison, so a value that does not convert would fail depending on the data."""
    text = literal.name
    try:
        if kind == NUMBER and _NUMBER_TEXT.fullmatch(text) and math.isfinite(float(text)):
            return exp.Literal.number(text.strip())
        if kind == DATE and _DATE_TEXT.fullmatch(text):
            dt.date.fromisoformat(text.strip())
            return exp.cast(exp.Literal.string(text.strip()), exp.DataType.Type.DATE)
        if kind == TIME and _TIME_TEXT.fullmatch(text):
            dt.datetime.fromisoformat(text.strip())
            return exp.cast(exp.Literal.string(text.strip()), exp.DataType.Type.TIMESTAMP)
        if kind == BOOLEAN and text.strip().lower() in _BOOLEANS:
            return exp.Boolean(this=_BOOLEANS[text.strip().lower()])
    except ValueError:
        pass
    raise Rejected(
        f"{node.sql(dialect='postgres')} in {where}: '{text}' is not a valid {kind}, and "
        "the database would find out only on the rows that reach the comparison",
        hint="write a number as 5, a date as '2024-01-31', a timestamp as "
        "'2024-01-31 08:00:00', a boolean as true",
    )
