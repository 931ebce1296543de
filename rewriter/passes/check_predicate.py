"""Pass 2: check row-level expressions and resolve their columns.

WHERE conditions, GROUP BY keys, aggregate arguments and FILTER conditions are row-level
expressions over the query's tables. Only an allowlist of deterministic, side-effect-free
expressions passes; every column reference is replaced by a quoted reference to its
table's column under a generated alias (``t0``, ``t1``, …), so the generated SQL never
carries an identifier the analyst spelled.
"""

from __future__ import annotations

import decimal
import math
from typing import Protocol

from sqlglot import exp

from rewriter.catalog import ColumnType
from rewriter.errors import Rejected
from rewriter.output_names import function_name
from rewriter.passes.check_types import (
    VALUE_CONTEXTS,
    check_condition,
    check_types,
    is_boolean_count,
    value_kind,
)
from rewriter.passes.row_functions import MAX_NODES, is_row_function, restored, row_functions
from rewriter.passes.value_types.kinds import BOOLEAN, NULL, NUMBER
from rewriter.scope import Scope
from rewriter.sql_values import TINY, number
from rewriter.zones import is_instant_literal

_STRUCTURE = (
    exp.And,
    exp.Or,
    exp.Not,
    exp.Paren,
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.Is,
    exp.In,
    exp.Between,
    exp.Like,
    exp.ILike,
    exp.NullSafeEQ,
    exp.NullSafeNEQ,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.Mod,
    exp.Neg,
    exp.DPipe,
    exp.Literal,
    exp.Boolean,
    exp.Null,
    exp.Column,
    exp.Identifier,
    exp.Cast,
    exp.DataType,
    exp.Var,
    exp.Interval,
    exp.Tuple,
    exp.Case,
    exp.If,
)
_FUNCTIONS = (
    exp.Lower,
    exp.Upper,
    exp.Abs,
    exp.Coalesce,
    exp.Length,
    exp.Trim,
    exp.Extract,
    exp.Round,
    exp.Floor,
    exp.Ceil,
    exp.Substring,
    exp.Sign,
    exp.Greatest,
    exp.Least,
    exp.DateTrunc,
    exp.TimestampTrunc,
    exp.WidthBucket,
    exp.StrPosition,
)
# Functions that one engine lacks are rewritten into portable SQL after resolution.

ALLOWED_FUNCTIONS = (
    "lower, upper, abs, coalesce, length, trim, extract, round, floor, ceil, substring, sign, "
    "greatest, least, date_trunc, width_bucket, nullif, left, concat, strpos, position"
)
_CAST_TYPES = frozenset(
    {
        exp.DataType.Type.INT,
        exp.DataType.Type.BIGINT,
        exp.DataType.Type.SMALLINT,
        exp.DataType.Type.DOUBLE,
        exp.DataType.Type.FLOAT,
        exp.DataType.Type.DECIMAL,
        exp.DataType.Type.TEXT,
        exp.DataType.Type.VARCHAR,
        exp.DataType.Type.DATE,
        exp.DataType.Type.TIMESTAMP,
        exp.DataType.Type.BOOLEAN,
    }
)


class SubqueryCheck(Protocol):
    """Checks one subquery of a predicate (``x IN (SELECT …)``, ``EXISTS (…)``, or a scalar
    ``(SELECT …)``) as a whole, recursively, and returns it resolved, with a stand-in of
    the same type (a literal or a cast NULL) for the type check of the predicate around it.
    """

    def __call__(self, node: exp.Expr, scope: Scope, where: str) -> tuple[exp.Expr, exp.Expr]: ...


def check_predicate(
    predicate: exp.Expr,
    scope: Scope,
    where: str = "WHERE",
    subqueries: SubqueryCheck | None = None,
    *,
    condition: bool = False,
) -> exp.Expr:
    """Return a copy of ``predicate`` with resolved columns, or raise Rejected.

    Subqueries are rejected unless ``subqueries`` checks them (see where_subqueries).
    ``condition``: ``predicate`` is a condition (of WHERE, FILTER, JOIN … ON), which must
    be a boolean (``value_types.conditions``).
    """
    nested = subqueries is not None
    for node in predicate.walk(prune=lambda n: isinstance(n, (exp.Subquery, exp.Exists))):
        _check_node(node, where, nested=nested)
    # nullif, left and concat as forms checked below (rewriter.passes.row_functions).
    predicate = row_functions(predicate, scope, where)
    standins: list[tuple[exp.Expr, exp.Expr]] = []

    def resolve(node: exp.Expr) -> exp.Expr:
        if subqueries is not None and is_subquery(node):
            # Returning a new node: the transform does not descend into it.
            resolved, standin = subqueries(node, scope, where)
            standins.append((resolved, standin))
            return resolved
        if isinstance(node, exp.Column):
            return scope.resolve(node, where)
        return node

    # Columns first, then portability rewrites (which copy resolved sub-expressions).
    holder = exp.Paren(this=predicate.transform(resolve))  # transform copies
    # Each subquery, checked on its own, counts as a value of its type here.
    for resolved, standin in standins:
        resolved.replace(standin)
    try:
        check_types(holder.this, scope, where)
        if condition:
            check_condition(holder.this, scope, where)
        _check_bucketed(holder.this, scope, where)
    except Rejected as rejection:
        raise restored(rejection, holder.this) from None  # nullif … as the analyst wrote it
    finally:
        for resolved, standin in standins:
            standin.replace(resolved)
    checked: exp.Expr = holder.this.pop()  # a copy of its own (the first transform's)
    return _Portable(scope, where, cleaned=where in VALUE_CONTEXTS).rewrite(checked)


def _check_bucketed(node: exp.Expr, scope: Scope, where: str) -> None:
    """The x of each width_bucket(x, lo, hi, n) is a number: any other value would be cast
    to DOUBLE row by row, and a text that is not a number (or a date on PostgreSQL) fail
    on those rows only."""
    for bucket in node.find_all(exp.WidthBucket):
        kind = value_kind(bucket.this, scope, where)
        if kind not in (NUMBER, NULL):
            raise Rejected(
                f"{bucket.sql(dialect='postgres')} in {where}: width_bucket(x, lo, hi, n) "
                f"needs a number x, not a {kind}; converting each value would fail on some "
                "rows only, and the error would reveal them",
                hint="bucket a numeric column, e.g. width_bucket(age, 0, 100, 10)",
            )


def is_subquery(node: exp.Expr) -> bool:
    """``x IN (SELECT …)``, ``EXISTS (SELECT …)`` or a scalar ``(SELECT …)``."""
    if isinstance(node, exp.In):
        return node.args.get("query") is not None
    return isinstance(node, (exp.Exists, exp.Subquery))


class _Portable:
    """Rewrites the functions one engine lacks, or computes differently, into SQL both run.

    ``cleaned``: the expression is a value inside an aggregate, whose columns are replaced
    by their cleaned values later (``bound_per_unit.clean``: finite, within their bounds, and
    DOUBLE for FLOAT and DECIMAL columns); otherwise it reads the columns' raw values."""

    def __init__(self, scope: Scope, where: str, *, cleaned: bool) -> None:
        self.scope = scope
        self.where = where
        self.cleaned = cleaned

    def rewrite(self, node: exp.Expr) -> exp.Expr:
        """``node`` rewritten in place (its root may be replaced: use the result)."""
        return node.transform(self._node, copy=False)

    def _node(self, node: exp.Expr) -> exp.Expr:
        if is_subquery(node):
            return node.copy()  # already portable: checked and rewritten on its own
        if isinstance(node, exp.WidthBucket):
            if node.this.find(exp.WidthBucket) is not None:
                # Each level writes x four to six times: nesting would multiply the SQL.
                raise Rejected(
                    "width_bucket of a value that is itself a width_bucket is not supported",
                    hint="bucket the column once, e.g. width_bucket(cost, 0, 100, 8)",
                )
            # Returning a new node: the transform does not descend into x, rewritten here.
            value = self.rewrite(node.this.copy())
            return width_bucket_case(node, value, guarded=not self._fits_double(value))
        if (
            isinstance(node, exp.Cast)
            and is_boolean_count(node)
            and value_kind(node.this, self.scope, self.where) == BOOLEAN
        ):
            return self._boolean_count(node)
        if isinstance(node, (exp.Div, exp.Mod)):
            # Dividing by zero fails on some engines: NULL instead, on every engine, so that
            # whether some row has a zero divisor cannot show as an error.
            divisor = exp.func(
                "NULLIF", self.rewrite(node.expression.copy()), exp.Literal.number(0)
            )
            return node.__class__(this=self.rewrite(node.this.copy()), expression=divisor)
        if (
            isinstance(node, exp.Round)
            and node.args.get("decimals") is not None
            and self._floating(node.this)
        ):
            return self._round(node)
        if self.cleaned and _numeric_type(node) and not node.expressions:
            # numeric inside an aggregate (value_types.number_casts): DuckDB's DECIMAL is
            # DECIMAL(18, 3), which a value within ±2^52 may not fit; DECIMAL(38, 12) holds
            # it on both engines.
            return exp.DataType.build("DECIMAL(38, 12)")
        return node

    def _boolean_count(self, node: exp.Cast) -> exp.Expr:
        """CAST(b AS INTEGER) of a boolean b: CASE WHEN b THEN 1 WHEN NOT b THEN 0 END, its
        value on PostgreSQL and DuckDB (NULL for NULL). As a cast it would become one to
        bigint inside an aggregate (``bound_per_unit.clean`` computes integers as
        bigint), which PostgreSQL does not have for a boolean; as a CASE of constants it
        is bounded to [0, 1] there (``rewriter.intervals``) and is a key with a public
        domain (1, 0, NULL) in GROUP BY. b is written twice: casts nested in b double it
        at each level, so an expression beyond MAX_NODES nodes is refused."""
        value = self.rewrite(node.this.copy())
        negated = value.copy() if isinstance(value, exp.Paren) else exp.Paren(this=value.copy())
        made = exp.Case(
            ifs=[
                exp.If(this=value, true=exp.Literal.number(1)),
                exp.If(this=exp.Not(this=negated), true=exp.Literal.number(0)),
            ]
        )
        if sum(1 for _ in made.walk()) > MAX_NODES:
            raise Rejected(
                f"{node.sql(dialect='postgres')} in {self.where}: boolean casts nested in one "
                "another make the statement too large",
                sqlstate="54001",
                hint="cast each condition once, e.g. SUM((stay > 0)::int)",
            )
        return made

    def _round(self, node: exp.Round) -> exp.Expr:
        """round(x, d) of a floating-point x. PostgreSQL has round(numeric, d) but no
        round(double precision, d) nor round(real, d): x is written as an explicit DOUBLE,
        which sqlglot's PostgreSQL dialect rounds as round(CAST(x AS NUMERIC), d) (DuckDB
        keeps its round(x, d)). On raw values the numeric is cast back to DOUBLE, so that
        it compares as x would, and only finite values within ±1e308 are rounded: NaN,
        ±infinity (PostgreSQL before 14 cannot convert it to numeric) and larger values
        (whose numeric, of 15 significant digits, can exceed the largest double and fail
        the cast back) are left as they are, as DuckDB's round leaves them.

        That guard writes x three times: a round within x (round(round(cost, 1), 1)) is
        refused on raw values, since each level would triple the SQL (12 levels: 55 MB)."""
        if not self.cleaned and node.this.find(exp.Round) is not None:
            raise Rejected(
                "round(x, d) of a value that is itself rounded is supported only inside aggregates",
                hint="round once, e.g. round(cost, 1)",
            )
        value = exp.cast(self.rewrite(node.this.copy()), exp.DataType.Type.DOUBLE)
        rounded = node.copy()
        rounded.set("this", value)
        if self.cleaned:
            return rounded  # finite, within the column's bounds (within ±2^52)
        finite = exp.Between(this=value.copy(), low=number(-1e308), high=number(1e308))
        back = exp.cast(rounded, exp.DataType.Type.DOUBLE)
        return exp.Case(ifs=[exp.If(this=finite, true=back)], default=value.copy())

    def _floating(self, node: exp.Expr) -> bool:
        """Whether PostgreSQL computes ``node`` (resolved, checked) as double precision or
        real: a FLOAT column (also a DECIMAL one once cleaned), a cast to either, or an
        expression with such a value. Literals are numeric, EXTRACT is numeric (PostgreSQL
        14 and later), length and width_bucket are integers."""
        if isinstance(node, exp.Paren):
            return self._floating(node.this)
        if isinstance(node, exp.Column):
            kind = self.scope.info(node).type
            return kind is ColumnType.FLOAT or (self.cleaned and kind is ColumnType.DECIMAL)
        if isinstance(node, exp.Cast):
            return node.to.this in _FLOATING_TYPES
        values: list[exp.Expr]
        if isinstance(node, exp.Case):
            values = [b.args["true"] for b in node.args.get("ifs", [])]
            values += [node.args["default"]] if node.args.get("default") is not None else []
        elif isinstance(node, exp.If):
            values = [node.args["true"], *([node.args["false"]] if node.args.get("false") else [])]
        elif isinstance(node, (exp.Coalesce, exp.Greatest, exp.Least)):
            values = [node.this, *node.expressions]
        elif isinstance(node, (exp.Round, exp.Floor, exp.Ceil, exp.Abs, exp.Sign, exp.Neg)):
            values = [node.this]
        elif isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)):
            values = [node.this, node.expression]
        else:
            return False
        return any(self._floating(v) for v in values)

    def _fits_double(self, node: exp.Expr) -> bool:
        """Whether every value of ``node`` (resolved, portable) casts to DOUBLE on either
        engine: a DOUBLE, an integer, or a numeric known to lie within ±1e300 and to be 0
        or at least TINY in magnitude. False for what PostgreSQL may compute as a numeric
        beyond that (an unconstrained NUMERIC column of raw values holds 1e400 and 1e-400,
        which the cast refuses; so can numeric arithmetic, 1e-200 * 1e-200), and for
        anything not known here."""
        if isinstance(node, exp.Paren):
            return self._fits_double(node.this)
        if isinstance(node, exp.Column):
            info = self.scope.info(node)
            if info.type in (ColumnType.INTEGER, ColumnType.FLOAT):
                return True
            if info.type is not ColumnType.DECIMAL:
                return False
            # Cleaned DECIMAL values are DOUBLE (bound_per_unit.clean); raw ones fit when
            # their declared digits keep them within 10^±300.
            digits = info.digits
            return self.cleaned or (
                digits is not None and digits[0] <= _SAFE_DIGITS and digits[1] <= _SAFE_DIGITS
            )
        if isinstance(node, exp.Literal):
            return not node.is_string and _literal_fits(node.this)
        if isinstance(node, (exp.Null, exp.Extract, exp.Length, exp.StrPosition, exp.Sign)):
            return True  # EXTRACT: a date or timestamp field; sign: -1, 0 or 1
        if isinstance(node, exp.Cast):
            if node.to.this in _FLOATING_TYPES or node.to.this in _INTEGER_TYPES:
                return True  # the cast's own failures are check_types' (raw) or bounded
            return node.to.this is exp.DataType.Type.DECIMAL and self._fits_double(node.this)
        if isinstance(node, (exp.Neg, exp.Abs, exp.Floor, exp.Ceil, exp.Round)):
            return self._fits_double(node.this)
        if isinstance(node, (exp.Case, exp.If, exp.Coalesce, exp.Greatest, exp.Least)):
            return all(self._fits_double(v) for v in _values(node))
        if isinstance(node, exp.Nullif):
            return self._fits_double(node.this)
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Mod)):
            # DOUBLE arithmetic (numeric operands cast to DOUBLE first) or integer
            # arithmetic (bounded: rewriter.intervals); numeric arithmetic may leave the range.
            operands = [node.this, node.expression]
            if not all(self._fits_double(o) for o in operands):
                return False
            return self._floating(node) or (
                not isinstance(node, exp.Div) and all(self._integral(o) for o in operands)
            )
        return False

    def _integral(self, node: exp.Expr) -> bool:
        """Whether PostgreSQL computes ``node`` as an integer type (never numeric)."""
        if isinstance(node, (exp.Paren, exp.Neg, exp.Abs, exp.Sign)):
            return self._integral(node.this)
        if isinstance(node, exp.Column):
            return self.scope.info(node).type is ColumnType.INTEGER
        if isinstance(node, exp.Literal):
            return node.is_int
        if isinstance(node, exp.Cast):
            return node.to.this in _INTEGER_TYPES
        if isinstance(node, (exp.Null, exp.Length, exp.StrPosition)):
            return True
        if isinstance(node, (exp.Case, exp.If, exp.Coalesce, exp.Greatest, exp.Least)):
            return all(self._integral(v) for v in _values(node))
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Mod)):
            return self._integral(node.this) and self._integral(node.expression)
        return False


def _values(node: exp.Expr) -> list[exp.Expr]:
    """The values a CASE, IF, COALESCE, GREATEST or LEAST chooses among."""
    if isinstance(node, exp.Case):
        values = [b.args["true"] for b in node.args.get("ifs", [])]
        return values + ([node.args["default"]] if node.args.get("default") is not None else [])
    if isinstance(node, exp.If):
        return [node.args["true"], *([node.args["false"]] if node.args.get("false") else [])]
    return [node.this, *node.expressions]


def _literal_fits(text: str) -> bool:
    """A number literal that PostgreSQL casts from numeric to DOUBLE, with room to spare."""
    try:
        value = abs(decimal.Decimal(text))
    except decimal.InvalidOperation:
        return False
    return value.is_finite() and (
        value == 0 or decimal.Decimal(TINY) <= value <= decimal.Decimal(10) ** _SAFE_DIGITS
    )


_FLOATING_TYPES = frozenset({exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT})
_INTEGER_TYPES = frozenset(
    {
        exp.DataType.Type.BIGINT,
        exp.DataType.Type.INT,
        exp.DataType.Type.SMALLINT,
        exp.DataType.Type.TINYINT,
    }
)
#: Decimal digits (whole, or places) within which a numeric casts to DOUBLE: 10^300 is far
#: below the largest double, 10^-300 (TINY) far above the smallest subnormal.
_SAFE_DIGITS = 300


def width_bucket_case(node: exp.WidthBucket, value: exp.Expr, *, guarded: bool) -> exp.Expr:
    """width_bucket(x, lo, hi, n) with constant lo < hi and n, as CASE arithmetic on
    ``value`` (x, resolved and made portable).

    ``guarded``: x may be a numeric that does not cast to DOUBLE (PostgreSQL refuses
    numerics beyond ±1.8e308 or closer to 0 than 4.9e-324, an error on those rows only).
    It is then compared with lo and hi in its own type (bucket 0 below lo, n + 1 at or
    above hi, NaN included, as for a DOUBLE), and cast only between them, where it is
    finite; a value closer to 0 than TINY falls in the bucket of 0, computed here."""
    args = [node.args.get(k) for k in ("min_value", "max_value", "num_buckets")]
    numbers = []
    for arg in args:
        literal = arg.this if isinstance(arg, exp.Neg) else arg
        if not (isinstance(literal, exp.Literal) and not literal.is_string):
            raise Rejected("width_bucket(x, lo, hi, n) needs constant lo, hi and n")
        numbers.append(-float(literal.this) if isinstance(arg, exp.Neg) else float(literal.this))
    low, high, count = numbers
    width = (high - low) / count if count else 0.0
    if not (
        low < high
        and math.isfinite(width)
        and math.isfinite((high - low) * count)  # offset * n below stays finite
        and width > 2**-900
        and count.is_integer()
        and 0 < count <= 10_000
    ):
        raise Rejected(
            "width_bucket(x, lo, hi, n) needs finite lo < hi, 1 <= n <= 10000 and "
            "(hi - lo) * n below about 1.8e308",
            hint="for example width_bucket(age, 0, 100, 10)",
        )
    low_l, high_l = exp.Literal.number(repr(low)), exp.Literal.number(repr(high))
    # Offsets below 2^-60 of a bucket's width are raised to it (still bucket 1): otherwise
    # dividing a tiny offset could underflow, which PostgreSQL reports as an error that
    # would depend on the data (rewriter.underflow).
    smallest = math.ldexp(width, -60)

    def inside(x: exp.Expr) -> exp.Expr:
        """The bucket of a DOUBLE x within [lo, hi)."""
        # (CASE, not GREATEST: GREATEST would turn a NULL into the floor.)
        raw = exp.Sub(this=x.copy(), expression=low_l.copy())
        floor = exp.Literal.number(repr(smallest))
        offset = exp.Case(
            ifs=[exp.If(this=exp.LT(this=raw.copy(), expression=floor.copy()), true=floor)],
            default=raw,
        )
        scaled = exp.Paren(this=exp.Mul(this=offset, expression=exp.Literal.number(int(count))))
        quotient = exp.Div(this=scaled, expression=exp.Literal.number(repr(high - low)))
        return exp.Add(this=exp.Floor(this=quotient), expression=exp.Literal.number(1))

    if not guarded:
        x = exp.cast(value, exp.DataType.Type.DOUBLE)
        ifs = [
            exp.If(this=exp.LT(this=x.copy(), expression=low_l), true=exp.Literal.number(0)),
            exp.If(
                this=exp.GTE(this=x.copy(), expression=high_l),
                true=exp.Literal.number(int(count) + 1),
            ),
        ]
        case = exp.Case(ifs=ifs, default=inside(x))
        return exp.cast(case, exp.DataType.Type.BIGINT)
    # Limits spelled with an exponent: DuckDB compares a DECIMAL with them as DOUBLE, which
    # never fails (a DECIMAL literal could widen it to a type its values overflow).
    below = exp.LT(this=value.copy(), expression=_double_literal(low))
    above = exp.GTE(this=value.copy(), expression=_double_literal(high))
    tiny = exp.and_(
        exp.GT(this=value.copy(), expression=_double_literal(-TINY)),
        exp.LT(this=value.copy(), expression=_double_literal(TINY)),
    )
    case = exp.Case(
        ifs=[
            exp.If(this=below, true=exp.Literal.number(0)),
            exp.If(this=above, true=exp.Literal.number(int(count) + 1)),
            exp.If(this=tiny, true=exp.Literal.number(_bucket_of_zero(low, high, int(count)))),
        ],
        default=inside(exp.cast(value, exp.DataType.Type.DOUBLE)),  # within [lo, hi)
    )
    return exp.cast(case, exp.DataType.Type.BIGINT)


def _bucket_of_zero(low: float, high: float, count: int) -> int:
    """The bucket of a value within [low, high) closer to 0 than TINY, as the CASE
    arithmetic computes it for 0 (buckets are wider than 2^-900, far above TINY)."""
    if low >= 0:
        return 1
    if high <= 0:
        return count
    offset = max(-low, math.ldexp((high - low) / count, -60))
    return min(max(math.floor((offset * count) / (high - low)) + 1, 1), count)


def _double_literal(value: float) -> exp.Expr:
    """``value`` as a literal with an exponent: DOUBLE on DuckDB, numeric on PostgreSQL."""
    text = repr(abs(value))
    literal = exp.Literal.number(text if "e" in text else f"{text}e0")
    return exp.Neg(this=literal) if value < 0 else literal


def allowed_node(node: exp.Expr) -> bool:
    """An expression node of the allowlist (structure, operators, functions)."""
    if isinstance(node, exp.Cast) and node.to.this not in _CAST_TYPES:
        return False
    return isinstance(node, _STRUCTURE + _FUNCTIONS)


def _check_node(node: exp.Expr, where: str, *, nested: bool = False) -> None:
    if nested and isinstance(node, (exp.Subquery, exp.Exists)):
        return  # checked as a whole by the subquery check
    if isinstance(node, exp.In) and node.args.get("unnest"):
        raise Rejected(f"UNNEST in {where} is not supported", hint="use IN (list)")
    if isinstance(node, exp.In) and node.args.get("query") and not nested:
        raise Rejected(
            f"subqueries in {where} are not supported",
            hint="subqueries are supported in WHERE only; see docs/sql.md",
        )
    if isinstance(node, exp.Cast) and node.to.this not in _CAST_TYPES:
        if is_instant_literal(node):
            return  # a constant timestamp with time zone, compared (passes.time_constants)
        raise Rejected(f"casting to {node.to.sql(dialect='postgres')} is not supported in {where}")
    if isinstance(node, exp.Column) and not isinstance(node.this, exp.Identifier):
        raise Rejected(f"{where} may refer to columns by name only")
    if isinstance(node, _STRUCTURE + _FUNCTIONS) or is_row_function(node):
        return  # nullif, left, concat (row_functions): not allowed_node's
    if isinstance(node, exp.AggFunc):
        raise Rejected(f"aggregates are not allowed in {where}", sqlstate="42803")
    if isinstance(node, exp.Window):
        # PostgreSQL's words: a window runs over the released groups (post_windows) only.
        raise Rejected(f"window functions are not allowed in {where}", sqlstate="42P20")
    if isinstance(node, (exp.Subquery, exp.Select, exp.Exists)):
        raise Rejected(
            f"subqueries in {where} are not supported",
            hint="subqueries are supported in WHERE only; see docs/sql.md",
        )
    if isinstance(node, exp.Placeholder | exp.Parameter):
        raise no_parameter(node)
    if isinstance(node, exp.Func):
        written = _WRITTEN.get(type(node))
        raise Rejected(
            f"{written or f'function {function_name(node)}()'} is not allowed in {where}",
            hint=f"allowed functions: {ALLOWED_FUNCTIONS}",
        )
    if isinstance(node, exp.DataTypeParam):
        if where in VALUE_CONTEXTS and _numeric_type(node.parent):
            return  # numeric(p, s) of a bounded value: rewriter.intervals checks it fits
        # numeric(10, 2) fails on values it cannot hold, varchar(3) cuts texts: either
        # would depend on the data.
        typed = node.parent.sql(dialect="postgres") if node.parent else "the type"
        raise Rejected(
            f"a cast to {typed} (a type with a precision or length) is not supported in {where}",
            hint="round instead (round(x, 2)), compare the column itself, or cast to text",
        )
    grouping = _GROUPINGS.get(type(node))
    if grouping is not None:
        raise Rejected(
            f"{grouping} is not supported in {where}",
            hint="run one query per grouping: GROUP BY the keys of each, and the query "
            "without GROUP BY for the total",
        )
    raise Rejected(f"{written_name(node)} is not allowed in {where}", hint=_HINTS.get(type(node)))


#: GROUP BY forms PostgreSQL has and dpproxy does not, as PostgreSQL writes them.
_GROUPINGS: dict[type[exp.Expr], str] = {
    exp.GroupingSets: "GROUPING SETS",
    exp.Rollup: "ROLLUP",
    exp.Cube: "CUBE",
}


def _numeric_type(node: exp.Expr | None) -> bool:
    return isinstance(node, exp.DataType) and node.is_type(exp.DataType.Type.DECIMAL)


def no_parameter(node: exp.Placeholder | exp.Parameter) -> Rejected:
    """A parameter in a query sent without values (the simple query protocol), as
    PostgreSQL refuses it."""
    return Rejected(
        f"there is no parameter {node.sql(dialect='postgres')}",
        sqlstate="42P02",
        hint="send the values with the query (parameters numbered from $1, extended "
        "protocol), or write them in the SQL",
    )


def written_name(node: exp.Expr) -> str:
    """How the analyst wrote ``node``, in a message: an operator as PostgreSQL spells it
    (``the operator >>``), a GROUP BY form by its keywords, else its SQL (shortened), never
    sqlglot's name for it (GROUPINGSETS)."""
    return _WRITTEN.get(type(node)) or _GROUPINGS.get(type(node)) or _operator(node) or _shown(node)


#: The most characters of an expression a message quotes.
_SHOWN = 60


def _shown(node: exp.Expr) -> str:
    text = node.sql(dialect="postgres")
    return text if len(text) <= _SHOWN else f"{text[: _SHOWN - 1]}…"


def _operator(node: exp.Expr) -> str | None:
    """``the operator <op>`` for a binary operator, as PostgreSQL writes it; None for a
    node that is not one (or that PostgreSQL writes as a function)."""
    if not isinstance(node, exp.Binary):
        return None
    shown = type(node)(this=exp.var("x"), expression=exp.var("y")).sql(dialect="postgres")
    if not (shown.startswith("x ") and shown.endswith(" y")):
        return None
    return f"the operator {shown[2:-2]}"


#: How the analyst wrote what sqlglot reads as another function.
_WRITTEN: dict[type[exp.Expr], str] = {
    exp.RegexpLike: "the regular expression match ~",
    exp.RegexpILike: "the regular expression match ~*",
    exp.SimilarTo: "SIMILAR TO",
    exp.Pad: "lpad() or rpad()",
    exp.Collate: "COLLATE",
    exp.RawString: "a dollar-quoted string ($$…$$)",
    exp.UnicodeString: "a Unicode escape string (U&'…')",
    exp.ByteString: "an escape string (E'…')",
    exp.BitString: "a bit string (B'…')",
    exp.HexString: "a hexadecimal bit string (X'…')",
}
_PLAIN_STRING = "write the text as a plain string in single quotes ('it''s')"
_HINTS: dict[type[exp.Expr], str] = {
    exp.RawString: _PLAIN_STRING,
    exp.UnicodeString: _PLAIN_STRING,
    exp.ByteString: _PLAIN_STRING,
}
