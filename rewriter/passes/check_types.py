"""Row-level expressions must not fail on particular values.

An error that happens only for some rows tells the analyst that such a row exists: it is a
channel around the noise. So a resolved row-level expression may not cast a value to a
type it might not fit (text to a number, a real to an integer, a narrowing integer), nor
compare or combine values of unrelated types (DuckDB would cast a text column to a number
to compare it with ``5``, and fail on the first non-numeric value). Literals may be cast
freely: whether they fit does not depend on the data. A boolean cast to integer is 1, 0 or
NULL and never fails (``(x > 0)::int``; PostgreSQL has no other cast of a boolean to a
number, and dpproxy refuses them as it does). But a constant still meets the
column it is compared with: numbers are spelled so that DuckDB compares them as DOUBLE
(``value_types.comparisons.numbers_meet``: ``i > (0.5)`` would convert each ``i`` to a
DECIMAL it may not fit), and a date meets a timestamp only written as a literal (DuckDB
converts the date). Date arithmetic has the type the engines give it: a date ± an
INTERVAL is a timestamp, a date − a date a number.

Arithmetic on raw column values (WHERE, GROUP BY, FILTER, COUNT arguments, conditions) is
refused too (``abs`` included: the smallest integer has no absolute value): it could
overflow for one particular value. Inside SUM/AVG/… values, columns are first clamped to
their declared bounds and every intermediate result is bounded by interval arithmetic
(rewriter.intervals), so arithmetic there cannot overflow.

Function arguments that an engine checks only when it calls the function, on the rows
that reach it, must be constants checked here: ``substring``'s start and length, the
unit of ``date_trunc``, the digits of ``round`` and ``LIKE`` patterns (a pattern ending
in its escape character fails on PostgreSQL only on the values that match up to it).
Constant expressions themselves (``CAST('x' AS INTEGER)``) are evaluated before the query
runs (``rewriter.passes.constants``).

A timestamp with time zone is of its own kind (``kinds.ZONED``): compared as an instant
(``value_types.zoned``), its local time elsewhere (``rewriter.zones``).

This module finds the kind of each expression, bottom up, and applies the checks of
``rewriter.passes.value_types`` to it, one module per concern (casts, comparisons,
constant arguments, dates and timestamps, literals, number types, text).
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.errors import Rejected
from rewriter.passes.value_types.casts import cast_kind
from rewriter.passes.value_types.comparisons import common, compare
from rewriter.passes.value_types.conditions import check_conditions, condition
from rewriter.passes.value_types.constant_arguments import check_constant_arguments
from rewriter.passes.value_types.kinds import (
    BOOLEAN,
    LITERAL_TEXT,
    NULL,
    NUMBER,
    OTHER,
    TEXT,
    ZONED,
    TypeMemo,
    chosen,
    column_kind,
)
from rewriter.passes.value_types.literals import number_in_range
from rewriter.passes.value_types.moments import date_trunc_kind, extract_kind, moment_arithmetic
from rewriter.passes.value_types.text import check_text_argument
from rewriter.scope import Scope
from rewriter.zones import is_instant_literal

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
#: Functions of a number (their first argument).
_ON_NUMBERS = (exp.Abs, exp.Round, exp.Floor, exp.Ceil, exp.Sign)

#: Contexts whose value is computed from clamped columns, bounded by interval arithmetic.
VALUE_CONTEXTS = frozenset(
    {"SUM", "AVG", "VAR_POP", "VAR_SAMP", "STDDEV_POP", "STDDEV_SAMP", "MIN", "MAX"}
    # Quantiles (rewriter.passes.quantiles) bin clamped values, bounded the same way.
    | {"MEDIAN", "PERCENTILE_CONT", "PERCENTILE_DISC", "QUANTILE_CONT", "QUANTILE_DISC", "QUANTILE"}
)


def check_types(node: exp.Expr, scope: Scope, where: str) -> None:
    """Raise Rejected if ``node`` (resolved) could fail on some values."""
    _kind(node, scope, where, TypeMemo(), raw=where not in VALUE_CONTEXTS)


def check_condition(node: exp.Expr, scope: Scope, where: str) -> None:
    """Raise Rejected if ``node`` (resolved, checked), the condition of a WHERE, FILTER or
    JOIN … ON, is not a boolean (``value_types.conditions``)."""
    condition(node, value_kind(node, scope, where), where)


def value_kind(node: exp.Expr, scope: Scope, where: str) -> str:
    """The kind of value ``node`` (resolved, checked) has: NUMBER, TEXT, DATE, …"""
    return _kind(node, scope, where, TypeMemo(), raw=where not in VALUE_CONTEXTS)


def _kind(node: exp.Expr, scope: Scope, where: str, memo: TypeMemo, *, raw: bool = True) -> str:
    found = memo.kinds.get((id(node), raw))
    if found is not None and found[0] is node:
        return found[1]
    kind = _find_kind(node, scope, where, memo, raw=raw)
    memo.kinds[(id(node), raw)] = (node, kind)
    return kind


def _find_kind(node: exp.Expr, scope: Scope, where: str, memo: TypeMemo, *, raw: bool) -> str:
    check_constant_arguments(node, where, raw=raw)
    if raw and isinstance(node, (*_ARITHMETIC, exp.Neg, exp.Abs)) and memo.has_column(node, scope):
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where}: arithmetic on a column's raw values "
            "could overflow for one particular value, and the error would reveal it",
            hint="compare the column itself (e.g. cost > 100 / 1.1), or compute inside "
            "SUM/AVG, where values are clamped to their bounds",
        )
    if isinstance(node, exp.Paren):
        return _kind(node.this, scope, where, memo, raw=raw)
    if isinstance(node, exp.Case) and node.args.get("this") is not None:
        # CASE x WHEN y …: x is compared with each WHEN value, row by row.
        whens = [branch.this for branch in node.args.get("ifs", [])]
        _comparable(node, [node.this, *whens], scope, where, memo, raw=True)
    if isinstance(node, (exp.Case, exp.If)):
        # Conditions see raw values; the branches are values (raw or not, as the CASE).
        for branch in node.args.get("ifs", []) if isinstance(node, exp.Case) else [node]:
            found_kind = _kind(branch.this, scope, where, memo, raw=True)
            if isinstance(node, exp.If) or node.args.get("this") is None:  # not CASE x WHEN y
                condition(branch.this, found_kind, where)
        values = chosen(node)
        kinds = [_kind(v, scope, where, memo, raw=raw) for v in values]
        return common(node, values, kinds, scope, where, memo=memo, raw=raw)
    if isinstance(node, exp.Column):
        return column_kind(scope.info(node))
    if isinstance(node, exp.Literal):
        if raw and not node.is_string:  # values inside aggregates: rewriter.intervals
            number_in_range(node, where)
        return LITERAL_TEXT if node.is_string else NUMBER
    if isinstance(node, exp.Null):
        return NULL
    if isinstance(node, exp.Boolean):
        return BOOLEAN
    if isinstance(node, exp.Cast) and is_instant_literal(node):
        return ZONED  # a constant timestamp with time zone (rewriter.passes.time_constants)
    if isinstance(node, exp.Cast):
        source = _kind(node.this, scope, where, memo, raw=raw)
        if source == BOOLEAN and node.to.this in _NUMBER_TYPES:
            return _boolean_number(node, where)
        return cast_kind(node, source, scope, where, raw=raw)
    if isinstance(node, exp.Extract) and raw:  # inside aggregates: rewriter.intervals
        return extract_kind(node, _kind(node.expression, scope, where, memo), where)
    if isinstance(node, (*_COMPARISONS, exp.Between, exp.In)) and any(
        isinstance(o, exp.Tuple) for o in (node.this, node.args.get("expression"))
    ):
        # The kind of a row is not its fields' ((d, 1) > (TIMESTAMP '…', 0) would convert
        # d to a timestamp row by row, unchecked): compare the fields one by one.
        raise Rejected(
            f"row comparisons such as {node.sql(dialect='postgres')} are not supported in {where}",
            hint="compare each column: (a, b) > (x, y) is a > x OR (a = x AND b > y)",
        )
    if isinstance(node, _COMPARISONS):
        _comparable(node, [node.this, node.expression], scope, where, memo, raw=raw)
        return BOOLEAN
    if isinstance(node, exp.Between):
        operands = [node.this, node.args["low"], node.args["high"]]
        _comparable(node, operands, scope, where, memo, raw=raw)
        return BOOLEAN
    if isinstance(node, exp.In):
        _comparable(node, [node.this, *node.expressions], scope, where, memo, raw=raw)
        return BOOLEAN
    if isinstance(node, exp.Neg):
        return _numeric(node, where, [_kind(node.this, scope, where, memo, raw=raw)])
    if isinstance(node, _ARITHMETIC):
        kinds = [
            _kind(node.this, scope, where, memo, raw=raw),
            _kind(node.expression, scope, where, memo, raw=raw),
        ]
        moment = moment_arithmetic(node, kinds)
        return moment if moment is not None else _numeric(node, where, kinds)
    found = {
        id(child): _kind(child, scope, where, memo, raw=raw) for child in node.iter_expressions()
    }
    if isinstance(node, exp.StrPosition):
        return _text_position(node, found, where)
    if isinstance(node, _ON_NUMBERS) and node.this is not None:
        # round(department, 1) would fail on every row, after the query was charged.
        _numeric(node, where, [found[id(node.this)]])
    check_text_argument(node, found, where)
    check_conditions(node, found, where)
    if isinstance(node, (exp.And, exp.Or, exp.Not, exp.Is, exp.Like, exp.ILike)):
        return BOOLEAN
    if isinstance(node, _TEXT_FUNCTIONS):
        return TEXT
    if isinstance(node, _NUMBER_FUNCTIONS):
        return NUMBER
    if isinstance(node, (exp.Coalesce, exp.Greatest, exp.Least)):
        values = chosen(node)
        kinds = [found[id(v)] for v in values]
        return common(node, values, kinds, scope, where, memo=memo, raw=raw)
    if isinstance(node, (exp.DateTrunc, exp.TimestampTrunc)):
        return date_trunc_kind(node, found, where, raw=raw)
    return OTHER


#: The number types a cast may name. PostgreSQL casts a boolean to integer only.
_NUMBER_TYPES = frozenset(
    {
        exp.DataType.Type.INT,
        exp.DataType.Type.BIGINT,
        exp.DataType.Type.SMALLINT,
        exp.DataType.Type.TINYINT,
        exp.DataType.Type.DOUBLE,
        exp.DataType.Type.FLOAT,
        exp.DataType.Type.DECIMAL,
    }
)


def is_boolean_count(node: exp.Cast) -> bool:
    """A cast to ``integer`` (``int4``; of a boolean: true 1, false 0, NULL NULL)."""
    return node.to.this == exp.DataType.Type.INT and not node.to.expressions


def _boolean_number(node: exp.Cast, where: str) -> str:
    """A boolean cast to a number: ``(x > 0)::int`` is 1, 0 or NULL and never fails
    (PostgreSQL's ``int4(boolean)``; ``check_predicate`` writes it as a CASE, which both
    engines compute alike, also where an aggregate's values are computed as bigint).
    PostgreSQL has no cast of a boolean to any other number type."""
    if not is_boolean_count(node):
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where}: cannot cast type boolean to "
            f"{node.to.sql(dialect='postgres').lower()}",
            sqlstate="42846",
            hint="cast a boolean to integer: CAST(x > 0 AS INTEGER), or (x > 0)::int",
        )
    return NUMBER


def _comparable(
    node: exp.Expr, operands: list[exp.Expr], scope: Scope, where: str, memo: TypeMemo, *, raw: bool
) -> None:
    """Check the comparison ``node`` of ``operands``, whose kinds are found here on their
    raw values (``value_types.comparisons.compare``)."""
    each = [_kind(o, scope, where, memo) for o in operands]
    compare(node, operands, each, scope, where, memo=memo, raw=raw)


def _text_position(node: exp.StrPosition, found: dict[int, str], where: str) -> str:
    """``strpos(text, text)``, ``position(text IN text)``: the character position of the
    first match (1 for an empty one), 0 for none, NULL of a NULL; it cannot fail on any
    text (the PostgreSQL SQL reads the searched text under the default collation,
    ``passes.collations``). Of another kind, or with a start or an occurrence (other
    dialects' forms), refused."""
    extra = [k for k in ("position", "occurrence") if node.args.get(k) is not None]
    kinds = [found.get(id(node.this)), found.get(id(node.args.get("substr")))]
    if extra or any(k not in (TEXT, LITERAL_TEXT, NULL) for k in kinds):
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where}: strpos(text, text) needs two text values",
            hint="for example strpos(lower(diagnosis), 'z00') > 0, or cast to text first",
        )
    return NUMBER


def _numeric(node: exp.Expr, where: str, kinds: list[str]) -> str:
    """NUMBER, if the operands' ``kinds`` are numbers (or NULL)."""
    if any(k not in (NUMBER, NULL) for k in kinds):
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where} does arithmetic on a value that is "
            "not a number",
            hint="arithmetic needs numeric columns and literals",
        )
    return NUMBER
