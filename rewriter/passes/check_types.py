"""Row-level expressions must not fail on particular values.

An error that happens only for some rows tells the analyst that such a row exists: it is a
channel around the noise. So a resolved row-level expression may not cast a value to a
type it might not fit (text to a number, a real to an integer, a narrowing integer), nor
compare or combine values of unrelated types (DuckDB would cast a text column to a number
to compare it with ``5``, and fail on the first non-numeric value). Literals may be cast
freely: whether they fit does not depend on the data. But a constant still meets the
column it is compared with: numbers are spelled so that DuckDB compares them as DOUBLE
(``_numbers_meet``: ``i > (0.5)`` would convert each ``i`` to a DECIMAL it may not fit),
and a date meets a timestamp only written as a literal (DuckDB converts the date).
Date arithmetic has the type the engines give it: a date ± an INTERVAL is a timestamp, a
date − a date a number.

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
"""

from __future__ import annotations

import contextlib
import datetime as dt
import decimal
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

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
#: Functions of a number (their first argument).
_ON_NUMBERS = (exp.Abs, exp.Round, exp.Floor, exp.Ceil, exp.Sign)
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

#: In raw contexts, casts to these types only of columns of these types (see ``_cast``).
_RAW_NARROWED = {
    exp.DataType.Type.DOUBLE: {ColumnType.INTEGER, ColumnType.FLOAT},
    exp.DataType.Type.FLOAT: set(),
    exp.DataType.Type.TIMESTAMP: {ColumnType.TIMESTAMP},
}

#: Contexts whose value is computed from clamped columns, bounded by interval arithmetic.
VALUE_CONTEXTS = frozenset(
    {"SUM", "AVG", "VAR_POP", "VAR_SAMP", "STDDEV_POP", "STDDEV_SAMP", "MIN", "MAX"}
    # Quantiles (rewriter.passes.quantiles) bin clamped values, bounded the same way.
    | {"MEDIAN", "PERCENTILE_CONT", "PERCENTILE_DISC", "QUANTILE_CONT", "QUANTILE_DISC", "QUANTILE"}
)


def check_types(node: exp.Expr, scope: Scope, where: str) -> None:
    """Raise Rejected if ``node`` (resolved) could fail on some values."""
    _kind(node, scope, where, _Memo(), raw=where not in VALUE_CONTEXTS)


def value_kind(node: exp.Expr, scope: Scope, where: str) -> str:
    """The kind of value ``node`` (resolved, checked) has: NUMBER, TEXT, DATE, …"""
    return _kind(node, scope, where, _Memo(), raw=where not in VALUE_CONTEXTS)


@dataclass
class _Memo:
    """What one check has found about each node, so that each is examined once: the kinds
    of nested expressions, and whether they hold a column, were found again at every level
    (``1 + 1 + … + 1`` of 16,000 terms: 42 s). Keyed by ``id(node)``; each entry keeps its
    node, so that no id is reused for another node while the check runs."""

    kinds: dict[tuple[int, bool], tuple[exp.Expr, str]] = field(default_factory=dict)
    #: (holds a column, holds a DECIMAL column)
    columns: dict[int, tuple[exp.Expr, tuple[bool, bool]]] = field(default_factory=dict)
    #: (the number type of a value, ``_number_type``; whether its columns are cleaned)
    numbers: dict[tuple[int, bool], tuple[exp.Expr, int]] = field(default_factory=dict)
    #: whether a value's literals were respelled, integers too (``_respell``)
    respelled: dict[int, tuple[exp.Expr, bool]] = field(default_factory=dict)

    def has_column(self, node: exp.Expr, scope: Scope) -> bool:
        return self._columns(node, scope)[0]

    def has_decimal(self, node: exp.Expr, scope: Scope) -> bool:
        return self._columns(node, scope)[1]

    def _columns(self, node: exp.Expr, scope: Scope) -> tuple[bool, bool]:
        found = self.columns.get(id(node))
        if found is not None and found[0] is node:
            return found[1]

        def known(n: exp.Expr) -> bool:
            entry = self.columns.get(id(n))
            return entry is not None and entry[0] is n

        # Breadth first, then backwards: children before their parents, each node once
        # (a node found before is neither entered nor computed again).
        for n in reversed(list(node.walk(prune=known))):
            if known(n):
                continue
            if isinstance(n, exp.Column):
                value = (True, scope.info(n).type is ColumnType.DECIMAL)
            else:
                parts = [self._columns(c, scope) for c in n.iter_expressions()]
                value = (any(c for c, _ in parts), any(d for _, d in parts))
            self.columns[id(n)] = (n, value)
        return self.columns[id(node)][1]


#: date_trunc units: the same on both engines (decades, centuries and millennia begin on
#: different years on DuckDB and PostgreSQL).
TRUNC_UNITS = {
    **dict.fromkeys(("SECOND", "SECONDS", "SEC", "SECS"), "SECOND"),
    **dict.fromkeys(("MINUTE", "MINUTES", "MIN", "MINS"), "MINUTE"),
    **dict.fromkeys(("HOUR", "HOURS", "HR", "HRS"), "HOUR"),
    **dict.fromkeys(("DAY", "DAYS"), "DAY"),
    **dict.fromkeys(("WEEK", "WEEKS"), "WEEK"),
    **dict.fromkeys(("MONTH", "MONTHS", "MON", "MONS"), "MONTH"),
    **dict.fromkeys(("QUARTER", "QUARTERS", "QTR"), "QUARTER"),
    **dict.fromkeys(("YEAR", "YEARS", "YR", "YRS"), "YEAR"),
}
#: EXTRACT fields both engines compute alike, as whole numbers, for dates (and the time
#: fields for timestamps only: PostgreSQL fails on EXTRACT(hour FROM a date) row by row).
#: Not week or isoyear: DuckDB fails on them for dates near its range's ends, even on
#: rows a condition or a clamp leaves out.
DATE_FIELDS = frozenset(
    {"YEAR", "QUARTER", "MONTH", "DAY", "DOW", "ISODOW", "DOY", "DECADE"}
    | {"CENTURY", "MILLENNIUM"}
)
TIME_FIELDS = frozenset({"HOUR", "MINUTE"})
MAX_ROUND_DIGITS = 15  # round(x, d): |d| at most this (10^d is an exact double)
_MAX_INT4 = 2**31 - 1


def _kind(node: exp.Expr, scope: Scope, where: str, memo: _Memo, *, raw: bool = True) -> str:
    found = memo.kinds.get((id(node), raw))
    if found is not None and found[0] is node:
        return found[1]
    kind = _find_kind(node, scope, where, memo, raw=raw)
    memo.kinds[(id(node), raw)] = (node, kind)
    return kind


def _find_kind(node: exp.Expr, scope: Scope, where: str, memo: _Memo, *, raw: bool) -> str:
    _constant_arguments(node, where, raw=raw)
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
            _kind(branch.this, scope, where, memo, raw=True)
        values = _chosen(node)
        kinds = [_kind(v, scope, where, memo, raw=raw) for v in values]
        return _common(node, values, kinds, scope, where, memo=memo, raw=raw)
    if isinstance(node, exp.Column):
        return _COLUMN_KINDS[scope.info(node).type]
    if isinstance(node, exp.Literal):
        if raw and not node.is_string:  # values inside aggregates: rewriter.intervals
            _number_in_range(node, where)
        return LITERAL_TEXT if node.is_string else NUMBER
    if isinstance(node, exp.Null):
        return NULL
    if isinstance(node, exp.Boolean):
        return BOOLEAN
    if isinstance(node, exp.Cast):
        return _cast(node, scope, where, memo, raw=raw)
    if isinstance(node, exp.Extract) and raw:  # inside aggregates: rewriter.intervals
        return _extract(node, scope, where, memo)
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
        moment = _moment_arithmetic(node, kinds)
        return moment if moment is not None else _numeric(node, where, kinds)
    found = {
        id(child): _kind(child, scope, where, memo, raw=raw) for child in node.iter_expressions()
    }
    if isinstance(node, _ON_NUMBERS) and node.this is not None:
        # round(department, 1) would fail on every row, after the query was charged.
        _numeric(node, where, [found[id(node.this)]])
    if isinstance(node, (exp.Like, exp.ILike)) and found.get(id(node.this)) == OTHER:
        # bytea, citext, arrays: the PostgreSQL SQL reads the text LIKE matches under the
        # default collation (passes.collations), which bytea refuses on every row.
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where}: LIKE needs a text value, not a "
            "value of a type dpproxy does not read as text (bytea, citext, an array); the "
            "database could fail on it after the query was charged",
            hint="apply LIKE to a text or varchar column",
        )
    if isinstance(node, _ON_TEXT) and found.get(id(node.this)) in _NOT_TEXT:
        # lower(stay > 1), (cost > 1) LIKE 'a%' fail on every row, after the charge.
        name = "LIKE" if isinstance(node, (exp.Like, exp.ILike)) else f"{node.key}()"
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where}: {name} needs a text value, not a "
            f"{found[id(node.this)]}; the database would fail on every row, after the query "
            "was charged",
            hint="apply it to a text column, or cast the value to text first, e.g. "
            "CAST(stay AS TEXT) LIKE '1%'",
        )
    if isinstance(node, (exp.And, exp.Or, exp.Not, exp.Is, exp.Like, exp.ILike)):
        return BOOLEAN
    if isinstance(node, _TEXT_FUNCTIONS):
        return TEXT
    if isinstance(node, _NUMBER_FUNCTIONS):
        return NUMBER
    if isinstance(node, (exp.Coalesce, exp.Greatest, exp.Least)):
        values = _chosen(node)
        kinds = [found[id(v)] for v in values]
        return _common(node, values, kinds, scope, where, memo=memo, raw=raw)
    if isinstance(node, (exp.DateTrunc, exp.TimestampTrunc)):
        if raw and where != "GROUP BY" and found[id(node.this)] in (DATE, TIME):
            # PostgreSQL truncates a date as a timestamp, and fails on dates beyond the
            # year 294276; DuckDB fails on timestamps in its first month and year (290309
            # BC), which have no month or year start. GROUP BY keys are computed within
            # the years 1 to 9999.
            raise Rejected(
                f"{node.sql(dialect='postgres')} in {where}: date_trunc of a date or "
                "timestamp could fail on extreme values, and the error would reveal them",
                hint="compare the value itself, e.g. visit_date >= DATE '2024-03-01' "
                "(date_trunc is fine in GROUP BY)",
            )
        return TIME
    return OTHER


#: Functions and operators of a text (their first argument): any other value fails.
_ON_TEXT = (exp.Lower, exp.Upper, exp.Trim, exp.Substring, exp.Length, exp.Like, exp.ILike)
_NOT_TEXT = frozenset({NUMBER, DATE, TIME, BOOLEAN})


def _moment_arithmetic(node: exp.Expr, kinds: list[str]) -> str | None:
    """The kind of ``+`` or ``-`` with a date or timestamp operand, as both engines compute
    it (None for arithmetic on numbers): a date ± days is a date, a date − a date is a
    number of days, a date or timestamp ± an INTERVAL is a timestamp, a timestamp − a
    timestamp (or a date) is an interval; anything else fails on every row (OTHER)."""
    if not isinstance(node, (exp.Add, exp.Sub)) or not {DATE, TIME} & set(kinds):
        return None
    left, right = kinds
    if isinstance(node, exp.Add) and left not in (DATE, TIME):
        left, right = right, left  # days + a date: as a date + days
        operands = [node.expression, node.this]
    else:
        operands = [node.this, node.expression]
    if left == DATE and right in (NUMBER, NULL):
        return DATE
    if left in (DATE, TIME) and _is_interval(operands[1]):
        return TIME
    if left == TIME and right == NULL:
        return TIME
    if isinstance(node, exp.Sub) and left == DATE and right == DATE:
        return NUMBER
    return OTHER  # an interval (timestamp − timestamp), or fails on every row


def _is_interval(node: exp.Expr) -> bool:
    while isinstance(node, exp.Paren):
        node = node.this
    return isinstance(node, exp.Interval)


def _constant_arguments(node: exp.Expr, where: str, *, raw: bool = True) -> None:
    """Raise Rejected if an argument that an engine validates only when it calls the
    function (so only on the rows that reach it) is not a constant that is valid."""
    if isinstance(node, (exp.Floor, exp.Ceil, exp.Round)):
        extra = {key for key, value in node.args.items() if value is not None} - {"this"}
        if extra - ({"decimals"} if isinstance(node, exp.Round) else set()):
            # floor(x, d) is rewritten to arithmetic on the raw value (which overflows on
            # PostgreSQL for some values only); round(x, d, mode) fails on both engines.
            form = "round(x) or round(x, d)" if isinstance(node, exp.Round) else f"{node.key}(x)"
            raise Rejected(
                f"{node.key}() with {len(extra) + 1} arguments in {where}: only {form} is "
                "supported",
                hint="write round(x, d) to round to d decimal places, or floor(x) / ceil(x)",
            )
    if isinstance(node, exp.Substring):
        start, length = node.args.get("start"), node.args.get("length")
        for value, least in ((start, -_MAX_INT4), (length, 0)):
            if value is not None and constant_integer(value, least, _MAX_INT4) is None:
                raise Rejected(
                    f"{_written(node)} in {where}: substring needs constant whole numbers for its "
                    "start and length (a length of 0 or more); other values could fail on "
                    "some rows only, and the error would reveal them",
                    hint="for example substring(zip3, 1, 2)",
                )
    elif isinstance(node, (exp.DateTrunc, exp.TimestampTrunc)):
        unit = node.args.get("unit")
        if (
            not isinstance(unit, (exp.Var, exp.Literal))
            or unit.name.upper() not in TRUNC_UNITS
            or node.args.get("zone") is not None
        ):
            raise Rejected(
                f"{_written(node)} in {where}: date_trunc needs a constant unit of second, minute, "
                "hour, day, week, month, quarter or year",
                hint="for example date_trunc('month', visit_date)",
            )
    elif isinstance(node, exp.Round):
        digits = node.args.get("decimals")
        bound = MAX_ROUND_DIGITS
        least = 0 if raw else -bound  # raw DECIMAL(38,0) values overflow when rounded up
        if digits is not None and constant_integer(digits, least, bound) is None:
            raise Rejected(
                f"{_written(node)} in {where}: round(x, d) needs a constant whole number d from "
                f"{least} to {bound}",
                hint="for example round(cost, 1)",
            )
    elif isinstance(node, (exp.Like, exp.ILike)):
        pattern = node.expression
        if not (isinstance(pattern, exp.Literal) and pattern.is_string):
            raise Rejected(
                f"{_written(node)} in {where}: the pattern of LIKE must be a quoted text; a "
                "pattern computed from the data could be invalid on some rows only, and the "
                "error would reveal them",
                hint="for example diagnosis LIKE 'I1%'",
            )
        trailing = len(pattern.name) - len(pattern.name.rstrip("\\"))
        if trailing % 2:
            raise Rejected(
                f"{_written(node)} in {where}: the pattern ends with the escape character \\",
                hint="double it to match a backslash: LIKE 'a\\\\'",
            )


def _written(node: exp.Expr) -> str:
    """``node`` as the analyst would read it: written only for a message (writing each
    node checked would take time quadratic in the nesting of expressions)."""
    return node.sql(dialect="postgres")


def _number_in_range(node: exp.Literal, where: str) -> None:
    """A number that every engine reads and compares as it is: an integer below 10^18
    (DuckDB casts a longer one to the type of the column it is compared with, or makes it
    a BIGNUM, on the first row compared with it, and that can fail), otherwise a finite
    DOUBLE that is 0 or at least the smallest normal one."""
    text = node.this
    try:
        value = decimal.Decimal(text)
    except decimal.InvalidOperation:
        value = decimal.Decimal("NaN")
    if value.is_finite():
        if node.is_int:
            if abs(value) < 10**18:
                return
        else:
            real = float(value)
            if math.isfinite(real) and (value == 0 or abs(real) >= sys.float_info.min):
                return
    raise Rejected(
        f"the number {text[:40]}{'…' if len(text) > 40 else ''} in {where} is out of the "
        "range the database compares exactly, and comparing it could fail on some rows only",
        hint="use integers of up to 18 digits (write larger ones as 1.5e20) and other "
        "numbers between 1e-307 and 1e308 in size",
    )


def constant_integer(node: exp.Expr, least: int, most: int) -> int | None:
    """The whole number a literal (or a negated one) spells, if within [least, most]."""
    negative = isinstance(node, exp.Neg)
    literal = node.this if negative else node
    if not (isinstance(literal, exp.Literal) and literal.is_int):
        return None
    value = -int(literal.this) if negative else int(literal.this)
    return value if least <= value <= most else None


def _extract(node: exp.Extract, scope: Scope, where: str, memo: _Memo) -> str:
    """EXTRACT(field FROM x): a field both engines compute for every value of x's type."""
    source = _kind(node.expression, scope, where, memo)
    field = node.this.name.upper()
    if field in TIME_FIELDS and source == DATE:
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where}: a date has no {field.lower()} "
            "(PostgreSQL fails on each such value)",
            hint="extract it from a timestamp column",
        )
    allowed = DATE_FIELDS | (TIME_FIELDS if source == TIME else frozenset())
    if source not in (DATE, TIME, NULL) or field not in allowed:
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where}: EXTRACT needs a date or timestamp column "
            "and one of the fields "
            + ", ".join(sorted(f.lower() for f in DATE_FIELDS))
            + " (and hour, minute of a timestamp); other fields fail on some values or "
            "differ between the engines",
            hint="for example EXTRACT(year FROM visit_date)",
        )
    return NUMBER


def _cast(node: exp.Cast, scope: Scope, where: str, memo: _Memo, *, raw: bool = True) -> str:
    source = _kind(node.this, scope, where, memo, raw=raw)
    target = node.to.this
    literal = isinstance(node.this, (exp.Literal, exp.Null, exp.Boolean))
    safe = _SAFE_CAST_TARGETS.get(target, set())
    if raw and target in _RAW_NARROWED:
        # Raw values keep their physical type: a HUGEINT does not fit a BIGINT, a DOUBLE
        # not a REAL, a PostgreSQL NUMERIC of 1e400 not a DOUBLE, a date of the year
        # 300000 not a TIMESTAMP (errors on those rows only). Inside aggregates values
        # are cleaned first (clamped, as DOUBLE or BIGINT), so these casts are safe there.
        column = node.this if isinstance(node.this, exp.Column) else None
        fits = column is not None and scope.info(column).type in _RAW_NARROWED[target]
        safe = safe if fits else set()
    if literal and target in (exp.DataType.Type.DATE, exp.DataType.Type.TIMESTAMP):
        _moment_literal(node, where)
    if not literal and source not in safe:
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where} could fail on some values, and the "
            "error would reveal them",
            hint="compare or round instead of casting, or cast to text",
        )
    return _target_kind(target)


def _moment_literal(node: exp.Cast, where: str) -> None:
    """A date or timestamp written as text: a valid one within the years 1 to 9999. Later
    years fit a DATE but not a TIMESTAMP, which DuckDB would find out only on the rows
    where the value is converted (``date_trunc('month', CASE … THEN DATE '300000-01-01'
    …)``)."""
    if isinstance(node.this, exp.Null):
        return
    text = node.this.name if isinstance(node.this, exp.Literal) else ""
    date = node.to.this == exp.DataType.Type.DATE
    if _is_moment(text, date=date):
        return
    kind = "date" if date else "timestamp"
    raise Rejected(
        f"{node.sql(dialect='postgres')} in {where}: '{text}' is not a {kind} from the year "
        "1 to 9999 written as 2024-01-31" + ("" if date else " 08:00:00"),
        hint=f"for example {kind.upper()} '2024-01-31" + ("'" if date else " 08:00:00'"),
    )


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


def _numeric(node: exp.Expr, where: str, kinds: list[str]) -> str:
    """NUMBER, if the operands' ``kinds`` are numbers (or NULL)."""
    if any(k not in (NUMBER, NULL) for k in kinds):
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where} does arithmetic on a value that is "
            "not a number",
            hint="arithmetic needs numeric columns and literals",
        )
    return NUMBER


def _comparable(
    node: exp.Expr, operands: list[exp.Expr], scope: Scope, where: str, memo: _Memo, *, raw: bool
) -> None:
    operands = list(operands)
    each = [_kind(o, scope, where, memo) for o in operands]
    kinds = set(each) - {NULL}
    if LITERAL_TEXT in kinds and len(kinds - {LITERAL_TEXT}) == 1:
        (other,) = kinds - {LITERAL_TEXT}
        if other == TEXT:
            return
        for index, kind in enumerate(each):
            if kind == LITERAL_TEXT:
                typed = _typed_literal(operands[index], other, node, where)
                if raw and isinstance(typed, exp.Literal):
                    _number_in_range(typed, where)
                operands[index] = operands[index].replace(typed)
        kinds = {other}
    if kinds == {NUMBER}:
        _one_decimal_column(node, operands, scope, where, memo)
        _numbers_meet(node, operands, scope, where, memo, exact=raw, cleaned=False)
    if len(kinds) <= 1:
        return
    if kinds == {DATE, TIME}:
        if all(k != DATE or date_literal(o) for o, k in zip(operands, each, strict=True)):
            return  # a date written as a literal (within the years 1 to 9999), and timestamps
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where} compares values of different types "
            "(date, timestamp): the database converts each date to a timestamp, which fails "
            "on dates beyond the year 294276, and the error would reveal them",
            hint="compare a date with a date (visit_date >= DATE '2024-03-01', or DATE "
            "'2024-03-01' - 30: a date ± days is a date, ± an INTERVAL a timestamp), or a "
            "timestamp with a date written as DATE '2024-03-01'",
        )
    raise Rejected(
        f"{node.sql(dialect='postgres')} in {where} compares values of different types "
        f"({', '.join(sorted(kinds))}); the database would convert them row by row and could "
        "fail on some values",
        hint="compare a text column with a quoted text value, e.g. department = 'Cardiology'",
    )


def date_literal(node: exp.Expr) -> bool:
    """NULL or a date written as text (checked by ``_moment_literal``: years 1 to 9999),
    which converts to a timestamp whatever the data: the only dates compared with
    timestamps. A date column, or a date computed (``DATE '9999-12-31' + 200000000``),
    can lie beyond the timestamp's range (year 294276), and converting it fails on the
    rows where it does."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Null):
        return True
    return (
        isinstance(node, exp.Cast)
        and node.to.this == exp.DataType.Type.DATE
        and isinstance(node.this, (exp.Literal, exp.Null))
    )


def _chosen(node: exp.Expr) -> list[exp.Expr]:
    """The values a CASE, IF, COALESCE, GREATEST or LEAST chooses among."""
    if isinstance(node, exp.Case):
        values = [b.args["true"] for b in node.args.get("ifs", [])]
        if node.args.get("default") is not None:
            values.append(node.args["default"])
        return values
    if isinstance(node, exp.If):
        return [node.args["true"], *([node.args["false"]] if node.args.get("false") else [])]
    return [node.this, *node.expressions]


def _common(
    node: exp.Expr,
    values: list[exp.Expr],
    each: list[str],
    scope: Scope,
    where: str,
    *,
    memo: _Memo,
    raw: bool = True,
) -> str:
    """The kind of a choice among ``values``, whose kinds (``each``) the caller found
    (finding them again here would take time exponential in the nesting of CASEs)."""
    kinds = set(each) - {NULL}
    if len(kinds - {LITERAL_TEXT}) > 1 or (LITERAL_TEXT in kinds and kinds - {LITERAL_TEXT, TEXT}):
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where} mixes values of different types",
            hint="give every branch the same type",
        )
    kind = next(iter(kinds), NULL)
    if kind == NUMBER:
        if raw:  # inside aggregates columns are cleaned (as DOUBLE or BIGINT) first
            _one_decimal_column(node, values, scope, where, memo)
        # Never kept as written here: a chosen literal would make the whole expression a
        # DECIMAL (COALESCE(i, 0.5) is DECIMAL(11,1)), which a HUGEINT it meets overflows.
        _numbers_meet(node, values, scope, where, memo, exact=False, cleaned=not raw)
    return TEXT if kind == LITERAL_TEXT else kind


def _one_decimal_column(
    node: exp.Expr, operands: list[exp.Expr], scope: Scope, where: str, memo: _Memo
) -> None:
    """Refuse comparing or choosing between a DECIMAL column and another column, unless
    one DECIMAL holds every value of each (``_one_decimal``): DuckDB would cast both to a
    decimal type that extreme values of either overflow, and PostgreSQL a NUMERIC beyond
    DOUBLE's range to DOUBLE (errors on those rows only)."""
    with_columns = [o for o in operands if memo.has_column(o, scope)]
    if len(with_columns) < 2:
        return
    decimal = any(memo.has_decimal(o, scope) for o in with_columns)
    if decimal and not _one_decimal(operands, scope):
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where} compares a decimal column with "
            "another column; their common type could overflow on extreme values, and the "
            "error would reveal them",
            hint="compare each column with a number, or compute inside SUM/AVG",
        )


def _numbers_meet(
    node: exp.Expr,
    operands: list[exp.Expr],
    scope: Scope,
    where: str,
    memo: _Memo,
    *,
    exact: bool,
    cleaned: bool,
) -> None:
    """Numbers compared or chosen among (``operands``) as both engines convert them
    whatever the data.

    Number literals met with a DECIMAL column, and fractions met with any number, are
    spelled with an exponent (``5e-1``), also within a constant (``(0.5)``, ``-(-0.5)``,
    ``0.5 * 2``, ``abs(-0.5)``, ``CASE … THEN 0.5 …``): DuckDB then reads them as DOUBLE
    and compares the column as DOUBLE, which never fails. Otherwise it would cast the
    column, or the number, to a DECIMAL wide enough for both, and a HUGEINT or
    DECIMAL(38, …) value, or the number, can overflow it on the first row compared
    (``h > 0.5``, ``i > 0.1111111111111111111111111111111111111 * 1``, ``d > 10`` for a
    DECIMAL(38,37) ``d``): an error that depends on the data. PostgreSQL reads such a
    literal as NUMERIC, exactly as before. Changed in place: a subquery's stand-in keeps
    its identity. A constant that stays of such a type (``CAST(5 AS DECIMAL)``; a
    quotient, ``length('ab')`` or a cast to DOUBLE met with a DECIMAL column, which
    PostgreSQL converts to DOUBLE) is refused (``_refuse_mismatch``).

    ``exact``: raw columns and numbers that one DECIMAL holds exactly (``_one_decimal``:
    TPC-H's ``l_discount BETWEEN 0.05 AND 0.07`` on a DECIMAL(15,2)) keep their spelling:
    DuckDB compares them exactly and can push the comparison into the scan. ``cleaned``:
    the columns are values inside an aggregate, cleaned (DOUBLE for FLOAT and DECIMAL)."""
    if exact and _one_decimal(operands, scope):
        return
    decimal_column = any(memo.has_decimal(o, scope) for o in operands)
    for operand in operands:
        _respell(operand, scope, memo, integers=decimal_column)
    _refuse_mismatch(
        lambda: f"{node.sql(dialect='postgres')} in {where}",
        [(o, scope) for o in operands],
        memo,
        cleaned=cleaned,
    )


# The number types of values (``_number_type``), narrowest first: an integer, a DECIMAL, a
# literal with an exponent (DOUBLE on DuckDB, NUMERIC on PostgreSQL), a DOUBLE on both.
NULL_T, INTEGER_T, DECIMAL_T, EXPONENT_T, FLOAT_T = range(5)
DATE_T, UNKNOWN_T = 5, 6
_COLUMN_NUMBERS = {
    ColumnType.INTEGER: INTEGER_T,
    ColumnType.DECIMAL: DECIMAL_T,
    ColumnType.FLOAT: FLOAT_T,
    ColumnType.DATE: DATE_T,
    ColumnType.TIMESTAMP: DATE_T,
}
_CAST_NUMBERS = {
    exp.DataType.Type.INT: INTEGER_T,
    exp.DataType.Type.BIGINT: INTEGER_T,
    exp.DataType.Type.SMALLINT: INTEGER_T,
    exp.DataType.Type.DECIMAL: DECIMAL_T,
    exp.DataType.Type.DOUBLE: FLOAT_T,
    exp.DataType.Type.FLOAT: FLOAT_T,
    exp.DataType.Type.DATE: DATE_T,
    exp.DataType.Type.TIMESTAMP: DATE_T,
}
#: Functions whose value has the number type of their first argument.
_SAME_NUMBER = (exp.Paren, exp.Neg, exp.Abs, exp.Floor, exp.Ceil, exp.Round)
_CHOICES = (exp.Case, exp.If, exp.Coalesce, exp.Greatest, exp.Least)


def _number_type(node: exp.Expr, scope: Scope, memo: _Memo, *, cleaned: bool) -> int:
    """The type a number value has on both engines (see NULL_T …); DATE_T for dates,
    timestamps and intervals, UNKNOWN_T for anything else."""
    entry = memo.numbers.get((id(node), cleaned))
    if entry is not None and entry[0] is node:
        return entry[1]
    found = _find_number_type(node, scope, memo, cleaned=cleaned)
    memo.numbers[(id(node), cleaned)] = (node, found)
    return found


def _find_number_type(node: exp.Expr, scope: Scope, memo: _Memo, *, cleaned: bool) -> int:
    def of(child: exp.Expr) -> int:
        return _number_type(child, scope, memo, cleaned=cleaned)

    if isinstance(node, exp.Literal):
        if node.is_string:
            return UNKNOWN_T
        if "e" in node.this.lower():
            return EXPONENT_T
        return INTEGER_T if node.is_int else DECIMAL_T
    if isinstance(node, exp.Null):
        return NULL_T
    if isinstance(node, exp.Column):
        kind = scope.info(node).type
        if cleaned and kind is ColumnType.DECIMAL:
            return FLOAT_T  # cleaned as DOUBLE
        return _COLUMN_NUMBERS.get(kind, UNKNOWN_T)
    if isinstance(node, exp.Cast):
        if isinstance(node.this, exp.Null):
            return NULL_T
        return _CAST_NUMBERS.get(node.to.this, UNKNOWN_T)
    if isinstance(node, (exp.Interval, exp.DateTrunc, exp.TimestampTrunc)):
        return DATE_T
    if isinstance(node, _SAME_NUMBER):
        return of(node.this)
    if isinstance(node, exp.Sign):
        return FLOAT_T if of(node.this) == FLOAT_T else INTEGER_T
    if isinstance(node, (exp.Length, exp.Extract, exp.WidthBucket)):
        return INTEGER_T
    if isinstance(node, exp.Div):
        return FLOAT_T  # DuckDB divides as DOUBLE; so does PostgreSQL, as written for it
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Mod)):
        left, right = of(node.this), of(node.expression)
        if DATE_T in (left, right):
            days = isinstance(node, exp.Sub) and left == right == DATE_T  # date − date
            return INTEGER_T if days else DATE_T
        return _wider([left, right])
    if isinstance(node, _CHOICES):
        return _wider([of(v) for v in _chosen(node)])
    return UNKNOWN_T


def _wider(types: list[int]) -> int:
    return UNKNOWN_T if DATE_T in types else max(types, default=NULL_T)


def _respell(node: exp.Expr, scope: Scope, memo: _Memo, *, integers: bool) -> None:
    """Spell with an exponent the fractions (and with ``integers`` the integers) of the
    value ``node``: the literals it can take as its value, within parentheses, signs,
    arithmetic (not dates', nor quotients: DOUBLE on both engines already), abs, floor,
    ceil, round and choices. Each node once (once more for ``integers``)."""
    stack = [node]
    while stack:
        part = stack.pop()
        done = memo.respelled.get(id(part))
        if done is not None and done[0] is part and (done[1] or not integers):
            continue
        memo.respelled[id(part)] = (part, integers)
        memo.numbers.pop((id(part), False), None)  # its type may change
        memo.numbers.pop((id(part), True), None)
        if isinstance(part, exp.Literal):
            if not part.is_string and (integers or not part.is_int):
                with contextlib.suppress(decimal.InvalidOperation):  # then left as it is
                    part.set("this", f"{decimal.Decimal(part.this):e}")
        elif isinstance(part, _SAME_NUMBER):
            stack.append(part.this)
        elif isinstance(part, (exp.Add, exp.Sub, exp.Mul, exp.Mod)):
            sides = [part.this, part.expression]
            if all(_number_type(s, scope, memo, cleaned=False) != DATE_T for s in sides):
                stack.extend(sides)
        elif isinstance(part, _CHOICES):
            stack.extend(_chosen(part))


def _refuse_mismatch(
    written: Callable[[], str],
    operands: list[tuple[exp.Expr, Scope]],
    memo: _Memo,
    *,
    cleaned: bool,
) -> None:
    """Refuse a constant (respelled) that meets a column's values with a type that one of
    them would be converted to row by row, failing on some: a DECIMAL met with an integer
    or DECIMAL column (DuckDB converts the column, or the constant, to a DECIMAL that
    either may not fit); an integer or a DOUBLE met with a DECIMAL column (DuckDB converts
    the integer to the column's type, PostgreSQL the column's numerics to DOUBLE, which
    1e400 does not fit); a number of a type dpproxy does not know."""
    typed = [
        (o, memo.has_column(o, scope), _number_type(o, scope, memo, cleaned=cleaned))
        for o, scope in operands
    ]
    columns = {t for _, column, t in typed if column}
    if not columns:
        return  # constants only: evaluated before the query runs
    integral = bool(columns & {INTEGER_T, DECIMAL_T, DATE_T, UNKNOWN_T})
    decimal_column = bool(columns & {DECIMAL_T, DATE_T, UNKNOWN_T})
    for operand, column, number in typed:
        if column or number in (NULL_T, EXPONENT_T):
            continue
        if (
            number in (DATE_T, UNKNOWN_T)
            or (number == DECIMAL_T and integral)
            or (number in (INTEGER_T, FLOAT_T) and decimal_column)
        ):
            raise Rejected(
                f"{written()} compares a column with {operand.sql(dialect='postgres')}, a "
                "number of a type that the database would convert the column's values to, "
                "or convert to the column's type, row by row; that could fail on some "
                "values, and the error would reveal them",
                hint="write the number itself (stay > 2.5, amount > 90.91), not a cast "
                "or a quotient",
            )


#: The widest DECIMAL: DuckDB's common type of two decimals has max(integer digits) +
#: max(decimal places) digits, and fails on the values that do not fit beyond this.
DECIMAL_DIGITS = 38


def _one_decimal(operands: list[exp.Expr], scope: Scope) -> bool:
    """Whether ``operands`` (NULL, number literals and raw columns; sums and differences
    of literals) all fit one DECIMAL exactly: then DuckDB's common type of any two of them
    holds both, and no value fails to convert. Measured on DuckDB 1.5 for every integer
    type and 40 decimal types, against 300 literals and each other, extreme values stored.
    A column's digits come from its declared type (``ColumnInfo.digits``); None (unknown,
    HUGEINT, a float, a derived column) answers False."""
    return _fit_one_decimal([(o, scope) for o in operands if not isinstance(o, exp.Null)])


def numbers_compare_safely(operands: list[tuple[exp.Expr, Scope]]) -> bool:
    """Whether numbers from different scopes (a value and the column of ``IN (SELECT …)``)
    compare without failing on some values: when a DECIMAL column is among them, only if
    all are number literals or columns that one DECIMAL holds (``_one_decimal``).
    Otherwise their fractions are spelled as DOUBLE (``_numbers_meet``; changed in place)
    and a constant of a type a column would be converted to is refused (Rejected)."""
    memo = _Memo()
    if any(memo.has_decimal(o, scope) for o, scope in operands):
        return _fit_one_decimal(operands)
    for operand, scope in operands:
        _respell(operand, scope, memo, integers=False)
    _refuse_mismatch(
        lambda: " IN (SELECT ".join(o.sql(dialect="postgres") for o, _ in operands) + " …)",
        operands,
        memo,
        cleaned=False,
    )
    return True


def _fit_one_decimal(operands: list[tuple[exp.Expr, Scope]]) -> bool:
    """Whether every operand (each read in its scope) has known digits, and all fit one
    DECIMAL of DECIMAL_DIGITS digits; False for none."""
    found: list[tuple[int, int]] = []
    for operand, scope in operands:
        digits = _exact_digits(operand, scope)
        if digits is None:
            return False
        found.append(digits)
    return bool(found) and (
        max(whole for whole, _ in found) + max(places for _, places in found) <= DECIMAL_DIGITS
    )


def _exact_digits(operand: exp.Expr, scope: Scope) -> tuple[int, int] | None:
    """(integer digits, decimal places) of a DECIMAL that holds ``operand``'s type on
    DuckDB: a column's declared type, a literal's own digits (DuckDB fits a literal to
    what it meets), and within parentheses, signs, sums and differences DuckDB's type of
    each part (an integer literal an INTEGER or a BIGINT; a sum one digit more than its
    widest part). None when unknown."""
    if isinstance(operand, exp.Column):
        return scope.info(operand).digits
    literal = operand.this if isinstance(operand, exp.Neg) else operand
    if isinstance(literal, exp.Literal):
        return _literal_digits(literal, typed=False)
    return _typed_digits(operand)


def _typed_digits(node: exp.Expr) -> tuple[int, int] | None:
    """(integer digits, decimal places) of the DECIMAL type DuckDB gives a constant made of
    number literals, parentheses, signs, sums and differences; None for anything else."""
    if isinstance(node, (exp.Paren, exp.Neg)):
        return _typed_digits(node.this)
    if isinstance(node, exp.Literal):
        return _literal_digits(node, typed=True)
    if isinstance(node, (exp.Add, exp.Sub)):
        left, right = _typed_digits(node.this), _typed_digits(node.expression)
        if left is None or right is None:
            return None
        return max(left[0], right[0]) + 1, max(left[1], right[1])
    return None


def _literal_digits(literal: exp.Literal, *, typed: bool) -> tuple[int, int] | None:
    if literal.is_string or (typed and "e" in literal.this.lower()):
        return None  # a DOUBLE
    try:
        sign, digits, exponent = decimal.Decimal(literal.this).as_tuple()
    except decimal.InvalidOperation:
        return None
    if not isinstance(exponent, int):
        return None  # NaN or infinity
    if typed and literal.is_int:
        # An INTEGER or a BIGINT: its type's digits, not its own.
        size = abs(int(literal.this))
        return (10, 0) if size < 2**31 else (19, 0) if size < 2**63 else None
    return max(1, len(digits) + exponent), max(0, -exponent)


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
        if kind == DATE and _is_moment(text, date=True):
            return exp.cast(exp.Literal.string(text.strip()), exp.DataType.Type.DATE)
        if kind == TIME and _is_moment(text, date=False):
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


def _is_moment(text: str, *, date: bool) -> bool:
    """Whether ``text`` is a valid date (``date``) or timestamp within the years 1 to
    9999, written as 2024-01-31 or 2024-01-31 08:00:00."""
    try:
        if date:
            return bool(_DATE_TEXT.fullmatch(text)) and bool(dt.date.fromisoformat(text.strip()))
        return bool(_TIME_TEXT.fullmatch(text)) and bool(dt.datetime.fromisoformat(text.strip()))
    except ValueError:
        return False
