"""Numeric GROUP BY keys from the data: arithmetic and rounding over bounded columns.

``GROUP BY floor(cost / 10) * 10``, ``GROUP BY stay / 7``, ``GROUP BY round(cost, 1)``: the
key is computed in the database on every row, so it must not fail on any value (an error
would reveal that such a row exists), and DuckDB and PostgreSQL must compute the same
value. So:

- every column in it must be numeric with declared bounds. It is cleaned first, as inside
  aggregates: NaN and ±infinity become NULL, values are clamped to the bounds, and real
  values tiny next to the bounds become 0 (``rewriter.underflow``). The key is computed
  from the clamped values. A decimal column is tested in its own type before it becomes
  a double (``rewriter.sql_values``), because PostgreSQL cannot convert a numeric beyond
  the range of a double, or below its smallest subnormal, into one: NaN, ±infinity and
  finite decimals beyond that range become NULL (a NULL key), those closer to 0 than
  1e-300 become 0;
- interval arithmetic (``rewriter.intervals``) proves that no step can overflow (every
  intermediate value stays within ±2^52), that no divisor can be 0, and that no product or
  quotient can underflow;
- the SQL states its types, so both engines compute the same thing: integers are BIGINT,
  everything else DOUBLE (decimal columns and literals included). Integer / integer
  truncates toward zero, as in PostgreSQL (DuckDB's ``/`` would not): the quotient of the
  two as doubles, truncated, which is exact because both lie within ±2^52. ``round(x, d)``
  is x·10^d rounded half away from zero in double precision, then divided by 10^d
  (PostgreSQL has no round(double, d), and rounds doubles half to even);
- integer % integer (``mod(x, n)`` too) has the sign of the dividend on both engines, as
  in PostgreSQL; % of anything else is refused (PostgreSQL has no % of a double, and a
  numeric's remainder is exact where a double's is not). ``trunc(x, d)`` of a DOUBLE
  treats x·10^d within 2^-50 below a whole number as that number, as PostgreSQL's
  trunc(numeric, d) of the decimal the double stands for (``_Builder.truncate``);
- the key is released as BIGINT when it is an integer expression and as DOUBLE otherwise,
  with -0 released as 0 (``canonical_double``). A cast to an integer type (Tableau's
  ``CAST(TRUNC(EXTRACT(YEAR FROM d)) AS INTEGER)``) is of an integer expression, or of a
  whole DOUBLE (floor, ceil, trunc or round to 0 places), whose interval must lie within
  the type's range (PostgreSQL fails beyond it);
- a CASE condition that compares computed values (``WHEN (CAST(EXTRACT(dow FROM d) AS
  integer) + 6) % 7 = 0``, Metabase's day of the week from Monday) compares them as the
  key computes them, from clamped columns, every step bounded; as a row-level predicate
  its arithmetic would run on the raw values, which could fail. Other conditions are
  checked as predicates.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from rewriter.catalog import ColumnType
from rewriter.errors import Rejected
from rewriter.intervals import Interval, interval_of
from rewriter.passes.check_predicate import check_predicate
from rewriter.passes.value_types.constant_arguments import MAX_ROUND_DIGITS, constant_integer
from rewriter.scope import Scope
from rewriter.sql_values import (
    as_double,
    between_keeping_null,
    in_double_range,
    integer,
    number,
)
from rewriter.underflow import flushed_bounds

#: Nodes that compute on numbers: a key with one of them over a column is a numeric key.
COMPUTING = (
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.Mod,
    exp.Neg,
    exp.Floor,
    exp.Ceil,
    exp.Round,
    exp.Trunc,
    exp.Abs,
)
MAX_DIGITS = MAX_ROUND_DIGITS
MAX_KEY_SQL = 50_000  # characters of one key's SQL
_INTEGER = re.compile(r"\d+")
_DOUBLE = exp.DataType.Type.DOUBLE
_BIGINT = exp.DataType.Type.BIGINT
#: The integer types a key may be cast to, and the largest magnitude each holds here.
_INTEGER_CASTS = {
    exp.DataType.Type.SMALLINT: 2**15 - 1,
    exp.DataType.Type.INT: 2**31 - 1,
    exp.DataType.Type.BIGINT: 2**52,
}
_NAMES = {
    exp.DataType.Type.SMALLINT: "smallint",
    exp.DataType.Type.INT: "integer",
    exp.DataType.Type.BIGINT: "bigint",
}
#: The comparisons a CASE condition computes as the key does (``_Builder.condition``).
_COMPARED = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)

#: Refuses a node the key forms do not include (``original``: the whole key, as written).
Unknown = Callable[[exp.Expr], Rejected]
#: A part of a numeric key that is a key of its own whose values lie within [0, PART_MAX]
#: (``data_keys``: EXTRACT of a date or timestamp column, within the years 1 to 9999, cast
#: to an integer or not): its SQL and whether it is an integer; None for anything else.
Part = Callable[[exp.Expr], tuple[exp.Expr, bool] | None]
PART_MAX = 9999


def computes(node: exp.Expr) -> bool:
    """Whether the value of a key does arithmetic or rounding on a column (the conditions
    of a CASE do not count: they are checked as predicates, unless they compare computed
    values, ``_computes_compared``)."""
    if isinstance(node, exp.Case):
        return any(computes(v) for v in case_values(node)) or _compares_computed(node)
    if isinstance(node, COMPUTING) and node.find(exp.Column) is not None:
        return True
    return any(computes(child) for child in node.iter_expressions())


def numeric_value(node: exp.Expr) -> bool:
    """Whether the key's value is itself a computation on numbers: arithmetic or rounding,
    or a CASE, COALESCE, GREATEST or LEAST with such a value (then the whole key is built
    here, all its columns clamped)."""
    if isinstance(node, exp.Paren):
        return numeric_value(node.this)
    if isinstance(node, exp.Case):
        return any(numeric_value(v) for v in case_values(node)) or _compares_computed(node)
    if isinstance(node, (exp.Coalesce, exp.Greatest, exp.Least)):
        return any(numeric_value(a) for a in [node.this, *node.expressions])
    if isinstance(node, exp.Cast) and node.to.this in _INTEGER_CASTS:
        return numeric_value(node.this)
    return isinstance(node, COMPUTING) and node.find(exp.Column) is not None


def check_not_unit(column: exp.Column, scope: Scope, original: exp.Expr) -> None:
    """Refuse a key computed from the privacy unit column (``column``: resolved)."""
    table = next(s.table for s in scope.sources if s.alias == column.table)
    unit = table.privacy_unit
    if unit is None or unit.name.lower() != column.name.lower():
        return
    written = _written(original)
    if isinstance(original.unnest(), exp.Column):
        raise Rejected(
            f"GROUP BY {written} would make one group per person: partition selection "
            "would release (almost) none of them",
            hint=f"count the persons instead, e.g. COUNT(DISTINCT {written})",
        )
    raise Rejected(
        f"GROUP BY {written} is computed from {unit.name}, the column that identifies "
        "persons (the privacy unit): dpproxy does not group by it",
        hint=f"count the persons instead, e.g. COUNT(DISTINCT {unit.name}), or group by "
        "another column",
    )


def skipping_nulls(node: exp.Greatest | exp.Least) -> exp.Greatest | exp.Least:
    """A GREATEST or LEAST built here, marked as skipping NULL arguments, as both engines
    do: without the mark, sqlglot writes it for DuckDB as NULL when any argument is NULL."""
    node.set("ignore_nulls", True)
    return node


def case_values(node: exp.Case) -> list[exp.Expr]:
    """The values a searched CASE can take (its THEN and ELSE expressions)."""
    values: list[exp.Expr] = [branch.args["true"] for branch in node.args.get("ifs", [])]
    default = node.args.get("default")
    return [*values, *([default] if default is not None else [])]


def numeric_key(
    node: exp.Expr, scope: Scope, original: exp.Expr, unknown: Unknown, part: Part | None = None
) -> tuple[exp.Expr, str]:
    """The SQL of a numeric key and its released type, or raise Rejected; ``part`` reads
    the parts that are keys of their own (``CAST(EXTRACT(dow FROM d) AS integer) + 1``)."""
    builder = _Builder(scope, original, unknown, part)
    built = builder.number(node)
    if built.null:
        raise unknown(node)
    try:
        interval_of(_without_nulls(built.check), lambda c: column_interval(c, scope))
        for check, limit, sql_type in builder.ranges:
            found = interval_of(_without_nulls(check), lambda c: column_interval(c, scope))
            if max(abs(found.lower), abs(found.upper)) > limit:
                raise Rejected(
                    f"a value cast to {sql_type} can fall outside its range (±{limit:,}), "
                    "where PostgreSQL fails",
                    hint="cast to bigint, or declare tighter column bounds",
                )
    except Rejected as refused:
        raise Rejected(
            f"GROUP BY {_written(original)} cannot be computed safely on every row: "
            + _reason(refused.message),
            hint=refused.hint,
        ) from None

    def clean(sub: exp.Expr) -> exp.Expr:
        if isinstance(sub, exp.Column):
            return _cleaned(sub, scope)
        if isinstance(sub, exp.Placeholder):  # a CASE condition: checked, not cleaned
            return builder.conditions[sub.name].copy()
        return sub

    cleaned = built.sql.transform(clean)
    key: exp.Expr
    if built.integer:
        key, sql_type = exp.cast(cleaned, _BIGINT), "BIGINT"
    else:
        # Cleaned columns and bounded steps: never NaN.
        key, sql_type = canonical_double(exp.cast(cleaned, _DOUBLE), nan=False), "DOUBLE"
    if len(key.sql()) > MAX_KEY_SQL:
        raise Rejected(
            f"GROUP BY {_written(original)} is too complex: its SQL, with every column clamped "
            f"to its bounds, would exceed {MAX_KEY_SQL:,} characters",
            hint="group by a simpler expression (fewer nested round() or divisions)",
        )
    return key, sql_type


def canonical_double(value: exp.Expr, *, nan: bool = True) -> exp.Expr:
    """A DOUBLE key (``value``, of that type already) in one spelling per group: -0.0 as
    0.0 and, with ``nan``, every NaN as the one ``CAST('NaN' AS DOUBLE)``. Both engines put
    -0.0 with 0.0, and all NaNs, in one group and return whichever value they met first:
    released as such, its spelling ('-0.0' or '0.0'; DuckDB's '-nan' or 'nan') would tell
    whose row came first. ``=`` holds between all NaNs on both engines."""
    zero = exp.EQ(this=value.copy(), expression=exp.Literal.number(0))
    ifs = [exp.If(this=zero, true=_double(0.0))]
    if nan:
        same = exp.EQ(this=value.copy(), expression=_not_a_number())
        ifs.append(exp.If(this=same, true=_not_a_number()))
    return exp.Case(ifs=ifs, default=value)


def _not_a_number() -> exp.Expr:
    return exp.cast(exp.Literal.string("NaN"), _DOUBLE)


def _reason(message: str) -> str:
    """What rewriter.intervals or rewriter.underflow found, said of a key (their messages
    speak of aggregates and show the expression as rewritten)."""
    if "exceed" in message or "no finite bounds" in message:
        return "with its columns within their declared bounds, a step of it can exceed ±2^52"
    if "underflow" in message:
        return (
            "it can produce numbers so small that PostgreSQL fails on them (underflow), and "
            "such an error would depend on the data"
        )
    if "divisor" in message:
        return "a divisor in it can be 0 (with its columns within their declared bounds)"
    return message.replace("inside an aggregate", "in a key")


def column_interval(column: exp.Column, scope: Scope) -> Interval:
    """The values of a cleaned (bounded) column of a numeric key."""
    info = scope.info(column)
    bounds = info.policy.bounds
    if bounds is None:
        raise ValueError(f"column {info.name} has no bounds")
    whole = info.whole_bounds
    if whole is not None:
        return Interval(*whole, True)
    return Interval(bounds[0], bounds[1], False)


#: The most SQL nodes a GROUP BY key's value and check may take together.
MAX_KEY_NODES = 5_000


def _size(tree: exp.Expr) -> int:
    return sum(1 for _ in tree.walk())


@dataclass(frozen=True)
class _Number:
    """A numeric key part, over resolved columns (cleaned only once it is checked)."""

    sql: exp.Expr  # what the database computes
    #: The same values as interval arithmetic and the underflow check understand them
    #: (``sql`` may use functions they do not know, with values within this one's).
    check: exp.Expr
    integer: bool  # BIGINT, else DOUBLE
    null: bool = False  # the NULL literal: takes its siblings' type

    def double(self) -> _Number:
        """As a DOUBLE (PostgreSQL would divide integers as integers)."""
        if not self.integer or self.null:
            return self
        return _Number(exp.cast(self.sql, _DOUBLE), exp.cast(self.check, _DOUBLE), False)


_NULL = _Number(exp.Null(), exp.Null(), True, null=True)


def _same(node_class: type[exp.Expr], parts: list[_Number], integer: bool) -> _Number:
    """``node_class`` over the parts, in both trees (a function of one or more arguments)."""

    def made(trees: list[exp.Expr]) -> exp.Expr:
        if len(trees) == 1:
            return node_class(this=trees[0])
        if issubclass(node_class, (exp.Greatest, exp.Least)):
            return skipping_nulls(node_class(this=trees[0], expressions=trees[1:]))
        return node_class(this=trees[0], expressions=trees[1:])

    return _Number(made([p.sql for p in parts]), made([p.check for p in parts]), integer)


class _Builder:
    def __init__(
        self, scope: Scope, original: exp.Expr, unknown: Unknown, part: Part | None = None
    ) -> None:
        self.scope = scope
        self.original = original
        self.unknown = unknown
        self.part = part
        #: CASE conditions, checked as predicates (their columns are not clamped); the
        #: built expression holds a placeholder for each until its columns are cleaned.
        self.conditions: dict[str, exp.Expr] = {}
        #: Values computed besides the key's own (compared in a CASE condition, cast to an
        #: integer type), each with the largest magnitude it may take and the type.
        self.ranges: list[tuple[exp.Expr, float, str]] = []

    def number(self, node: exp.Expr) -> _Number:
        found = self._number(node)
        # round and trunc write their argument more than once: nested, the SQL would grow
        # exponentially with the depth (round(round(…)), 20 levels: gigabytes).
        if _size(found.sql) + _size(found.check) > MAX_KEY_NODES:
            raise Rejected(
                f"GROUP BY {_written(self.original)} is too complex to compute exactly",
                hint="simplify the key, e.g. round once: round(cost, 1)",
            )
        return found

    def _number(self, node: exp.Expr) -> _Number:
        if isinstance(node, exp.Paren):
            return self.number(node.this)
        if isinstance(node, exp.Column):
            return self.column(node)
        if isinstance(node, exp.Literal) and not node.is_string:
            literal = exp.cast(node.copy(), _BIGINT if _INTEGER.fullmatch(node.this) else _DOUBLE)
            return _Number(literal, literal.copy(), _INTEGER.fullmatch(node.this) is not None)
        if isinstance(node, exp.Null):
            return _NULL
        if isinstance(node, (exp.Neg, exp.Abs)):
            inner = self.number(node.this)
            if inner.null:
                return inner
            wrap = (lambda e: exp.Neg(this=_p(e))) if isinstance(node, exp.Neg) else _abs
            return _Number(wrap(inner.sql), wrap(inner.check), inner.integer)
        if isinstance(node, exp.Div):
            return self.divide(node)
        if isinstance(node, exp.Mod):
            return self.remainder(node)
        if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
            left, right = self.number(node.this), self.number(node.expression)
            if left.null or right.null:
                return _NULL
            integer = left.integer and right.integer
            a, b = (left, right) if integer else (left.double(), right.double())
            return _Number(
                node.__class__(this=_p(a.sql), expression=_p(b.sql)),
                node.__class__(this=_p(a.check), expression=_p(b.check)),
                integer,
            )
        if isinstance(node, (exp.Floor, exp.Ceil)) and not _extra(node, "decimals", "to"):
            inner = self.number(node.this)
            if inner.null or inner.integer:
                return inner
            return _same(node.__class__, [inner], False)
        if isinstance(node, exp.Round) and not _extra(node, "truncate"):
            return self.round(node)
        if isinstance(node, exp.Trunc):
            return self.truncate(node)
        if isinstance(node, (exp.Coalesce, exp.Greatest, exp.Least)):
            # Both engines skip NULL arguments of all three.
            parts = [self.number(a) for a in [node.this, *node.expressions]]
            present = [p for p in parts if not p.null]
            if not present:
                return _NULL
            integer = all(p.integer for p in present)
            args = present if integer else [p.double() for p in present]
            return args[0] if len(args) == 1 else _same(node.__class__, args, integer)
        if isinstance(node, exp.Case) and node.this is None:
            return self.case(node)
        found = self.part(node) if self.part is not None else None
        if found is not None:
            return self.key_part(*found)
        if isinstance(node, exp.Cast) and node.to.this in _INTEGER_CASTS:
            return self.integer_cast(node)
        raise self.unknown(node)

    def integer_cast(self, node: exp.Cast) -> _Number:
        """``CAST(x AS integer)`` (smallint, bigint) of an integer expression, or of a DOUBLE
        that is a whole number (floor, ceil, trunc or round to 0 places): the same number,
        within the type's range (checked); PostgreSQL would round any other."""
        if node.to.expressions:
            raise self.unknown(node)
        inner = self.number(node.this)
        if inner.null:
            return inner
        if not inner.integer:
            if not _whole(node.this):
                raise Rejected(
                    f"GROUP BY {_written(self.original)}: a cast to an integer type in a key "
                    "needs a whole number (PostgreSQL rounds the others, half to even for a "
                    "double precision value, away from zero for a numeric one)",
                    hint="round first: CAST(round(x) AS integer), CAST(floor(x) AS integer)",
                )
            inner = _Number(exp.cast(inner.sql, _BIGINT), exp.cast(inner.check, _BIGINT), True)
        self.ranges.append((inner.check, _INTEGER_CASTS[node.to.this], _NAMES[node.to.this]))
        return inner

    def condition(self, node: exp.Expr) -> exp.Expr:
        """A CASE condition: a comparison of computed values (``_computes_compared``), or
        AND, OR, NOT of conditions, with such a comparison computed as the key's values
        are; anything else checked as a predicate, held as a placeholder."""
        inner = node.unnest()
        if _computes_compared(inner):
            if isinstance(inner, (exp.And, exp.Or)):
                parts = [exp.Paren(this=self.condition(p)) for p in (inner.this, inner.expression)]
                return inner.__class__(this=parts[0], expression=parts[1])
            if isinstance(inner, exp.Not):
                return exp.Not(this=exp.Paren(this=self.condition(inner.this)))
            if isinstance(inner, _COMPARED):
                return self.comparison(inner)
        name = f"condition{len(self.conditions)}"
        self.conditions[name] = check_predicate(node, self.scope, "GROUP BY")
        return exp.Placeholder(this=name)

    def comparison(self, node: exp.Expr) -> exp.Expr:
        """``a = b`` (``<>``, ``<``, ``<=``, ``>``, ``>=``) of numbers built as the key's:
        NULL if either is the NULL literal (as in SQL), of DOUBLEs unless both are
        integers; both sides bounded (``ranges``)."""
        left, right = self.number(node.this), self.number(node.expression)
        if left.null or right.null:
            return exp.Null()
        if not (left.integer and right.integer):
            left, right = left.double(), right.double()
        for side in (left, right):
            self.ranges.append((side.check, _MAX_VALUE, "a number"))
        return node.__class__(this=_p(left.sql), expression=_p(right.sql))

    def key_part(self, sql: exp.Expr, whole: bool) -> _Number:
        """A part that is a key of its own (``Part``): its SQL held apart, as a CASE
        condition is (its columns are not numbers to clean), and bounded by [0, PART_MAX]."""
        name = f"part{len(self.conditions)}"
        self.conditions[name] = sql
        check = skipping_nulls(exp.Greatest(this=integer(0), expressions=[integer(PART_MAX)]))
        return _Number(exp.Placeholder(this=name), check, whole)

    def column(self, node: exp.Column) -> _Number:
        if not isinstance(node.this, exp.Identifier):
            raise Rejected("GROUP BY may refer to columns by name only")
        resolved = self.scope.resolve(node, "GROUP BY")
        check_not_unit(resolved, self.scope, self.original)
        info = self.scope.info(resolved)
        written = _written(self.original)
        if not info.type.numeric:
            raise Rejected(
                f"GROUP BY {written} does arithmetic on {info.name}, which is not a number",
                hint="arithmetic in a key needs numeric columns and literals",
            )
        bounds = info.policy.bounds
        if bounds is None:
            table = next(s.table.name for s in self.scope.sources if s.alias == resolved.table)
            raise Rejected(
                f"GROUP BY {written} computes on {info.name}, which has no declared bounds: "
                "a key computed from a column is computed from its values clamped to its "
                "bounds, so that no value can make the computation fail",
                hint=f"ask an admin to declare [tables.{table}.columns.{info.name}] lower and "
                "upper, or group by the column itself",
            )
        whole = info.whole_bounds
        if whole is not None and whole[0] > whole[1]:
            raise Rejected(
                f"GROUP BY {written}: the bounds of {info.name} contain no whole number",
                hint="ask an admin to fix the column's bounds",
            )
        return _Number(resolved, resolved.copy(), info.type is ColumnType.INTEGER)

    def divide(self, node: exp.Div) -> _Number:
        left, right = self.number(node.this), self.number(node.expression)
        if left.null or right.null:
            return _NULL
        real = _quotient(left, right)
        if not (left.integer and right.integer):
            return real
        return _truncated_quotient(real)

    def remainder(self, node: exp.Mod) -> _Number:
        """``x % y`` (and ``mod(x, y)``) of integers: PostgreSQL's, of the sign of x,
        which DuckDB's ``%`` of BIGINTs computes alike; checked as ``x - y * trunc(x /
        y)``, the same value (so a divisor that could be 0 is refused, as for ``/``).
        PostgreSQL has no % of a double, and a numeric's remainder is exact where one
        computed in double precision is not: those are refused."""
        left, right = self.number(node.this), self.number(node.expression)
        if left.null or right.null:
            return _NULL
        if not (left.integer and right.integer):
            raise Rejected(
                f"GROUP BY {_written(self.original)}: % (mod) in a key needs whole-number "
                "operands (integer columns and constants): PostgreSQL has no % of a double "
                "precision value, and a decimal's remainder computed in double precision "
                "would not be PostgreSQL's exact one",
                hint="group by ranges instead: floor(cost / 10) * 10, or "
                "width_bucket(cost, lo, hi, n)",
            )
        whole = _truncated_quotient(_quotient(left, right))
        divisor = exp.func("NULLIF", right.sql, exp.Literal.number(0))  # defence in depth
        multiple = exp.Mul(this=_p(right.check), expression=_p(whole.check))
        return _Number(
            exp.Mod(this=_p(left.sql), expression=divisor),
            exp.Sub(this=_p(left.check), expression=_p(multiple)),
            True,
        )

    def digits(self, node: exp.Round | exp.Trunc) -> int:
        """The constant d of ``round(x, d)`` or ``trunc(x, d)`` (0 without one)."""
        decimals = node.args.get("decimals")
        digits = 0 if decimals is None else constant_integer(decimals, -MAX_DIGITS, MAX_DIGITS)
        if digits is None:
            name = "round" if isinstance(node, exp.Round) else "trunc"
            raise Rejected(
                f"GROUP BY {_written(self.original)}: {name}(x, d) needs a constant whole "
                f"number d from -{MAX_DIGITS} to {MAX_DIGITS}",
                hint=f"for example {name}(cost, 1)",
            )
        return digits

    def round(self, node: exp.Round) -> _Number:
        inner = self.number(node.this)
        digits = self.digits(node)
        if inner.null or (inner.integer and digits >= 0):
            return inner
        x = inner.double().sql
        scale = _double(10.0 ** abs(digits))
        scaled = _scaled(x, digits)
        # Half away from zero: sign(s) * floor(|s| + 0.5).
        magnitude = exp.Floor(this=exp.Add(this=_abs(scaled.copy()), expression=_double(0.5)))
        away: exp.Expr = exp.Mul(this=exp.Sign(this=scaled), expression=magnitude)
        if digits > 0:
            away = exp.Div(this=_p(away), expression=scale)
        elif digits < 0:
            away = exp.Mul(this=_p(away), expression=scale)
        check = _rounded_check(inner, digits)
        if inner.integer:
            return _Number(exp.cast(away, _BIGINT), exp.cast(check, _BIGINT), True)
        return _Number(away, check, False)

    def truncate(self, node: exp.Trunc) -> _Number:
        """``trunc(x[, d])``: x toward zero (to d decimal places). Of an integer, itself
        (d >= 0) or the integer quotient by 10^-d times 10^-d (d < 0), exact. Of a DOUBLE,
        ``trunc(x)`` for d = 0 (PostgreSQL's trunc(double precision)). For d != 0
        PostgreSQL has only trunc(numeric, d), exact on the decimal: s = x·10^d (x /
        10^-d) is truncated, except that s within 2^-50 of its magnitude below a whole
        number is that number. 0.29 is 0.28999999999999998 as a double, 0.29 × 100 is
        28.999999999999996, and its truncation would give 0.28 where PostgreSQL's numeric
        0.29 gives 0.29: a decimal of up to 15 significant digits (as PostgreSQL turns a
        double into a numeric) lands within that margin. Checked as ``round(x, d)``, whose
        interval holds these values."""
        inner = self.number(node.this)
        digits = self.digits(node)
        if inner.null or (inner.integer and digits >= 0):
            return inner
        if inner.integer:
            scale = _Number(integer(10**-digits), integer(10**-digits), True)
            whole = _truncated_quotient(_quotient(inner, scale))
            return _Number(
                exp.Mul(this=_p(whole.sql), expression=scale.sql.copy()),
                exp.Mul(this=_p(whole.check), expression=scale.check.copy()),
                True,
            )
        if digits != 0 and self.of_double(node.this):
            # As PostgreSQL, which has trunc(numeric, d) only: the double's decimal is
            # not computed here (0.2899999999999996::numeric is 0.290000000000000).
            raise Rejected(
                "function trunc(double precision, integer) does not exist",
                sqlstate="42883",
                hint="truncate to whole numbers, trunc(x), or scale first: "
                "trunc(x * 100) / 100, floor(x * 100) / 100",
            )
        x = inner.double().sql
        check = _rounded_check(inner, digits)
        if digits == 0:
            return _Number(exp.func("TRUNC", x), check, False)
        scaled = _scaled(x, digits)
        magnitude = _abs(scaled.copy())
        nearest = exp.Floor(this=exp.Add(this=magnitude.copy(), expression=_double(0.5)))
        slack = exp.Mul(this=nearest.copy(), expression=_double(_SNAP))
        near = exp.GTE(
            this=magnitude.copy(), expression=exp.Sub(this=nearest.copy(), expression=slack)
        )
        toward_zero = exp.Case(
            ifs=[exp.If(this=near, true=nearest)], default=exp.Floor(this=magnitude)
        )
        signed: exp.Expr = exp.Mul(this=exp.Sign(this=scaled), expression=toward_zero)
        back = _double(10.0 ** abs(digits))
        if digits > 0:
            return _Number(exp.Div(this=_p(signed), expression=back), check, False)
        return _Number(exp.Mul(this=_p(signed), expression=back), check, False)

    def of_double(self, node: exp.Expr) -> bool:
        """Whether PostgreSQL computes ``node`` as a double precision: it reads a double
        or real column, or casts to one."""
        doubles = (exp.DataType.Type.DOUBLE, exp.DataType.Type.FLOAT)
        for part in node.walk():
            if isinstance(part, exp.Cast) and part.to.this in doubles:
                return True
            if isinstance(part, exp.Column):
                resolved = self.scope.resolve(part, "GROUP BY")
                if self.scope.info(resolved).type is ColumnType.FLOAT:
                    return True
        return False

    def case(self, node: exp.Case) -> _Number:
        conditions = [self.condition(branch.this) for branch in node.args.get("ifs", [])]
        parts = [self.number(value) for value in case_values(node)]
        present = [p for p in parts if not p.null]
        if not present:
            return _NULL
        integer = all(p.integer for p in present)
        values = parts if integer else [p.double() for p in parts]
        has_default = node.args.get("default") is not None

        def made(trees: list[exp.Expr], checked: list[exp.Expr]) -> exp.Case:
            ifs = [exp.If(this=c.copy(), true=t) for c, t in zip(checked, trees, strict=False)]
            return exp.Case(ifs=ifs, default=trees[len(ifs)] if has_default else None)

        # Interval arithmetic reads the values only: the conditions stand in as placeholders.
        held: list[exp.Expr] = [exp.Placeholder(this="condition") for _ in conditions]
        return _Number(
            made([v.sql for v in values], conditions),
            made([v.check for v in values], held),
            integer,
        )


def _compares_computed(node: exp.Case) -> bool:
    """Whether a searched CASE has a condition that compares computed values, and results
    that are numbers: number literals, NULL, or computed (a column's type is not known
    here: ``THEN department`` keeps the CASE a predicate's)."""
    ifs = node.args.get("ifs", []) if node.this is None else []
    if not any(_computes_compared(branch.this) for branch in ifs):
        return False
    return all(_number_result(value) for value in case_values(node))


def _number_result(node: exp.Expr) -> bool:
    node = node.unnest()
    if isinstance(node, exp.Neg):
        node = node.this.unnest()
    if isinstance(node, exp.Null) or (isinstance(node, exp.Literal) and not node.is_string):
        return True
    return numeric_value(node) or _cast_part(node)


def _computes_compared(node: exp.Expr) -> bool:
    """Whether a condition compares a computed value (arithmetic or rounding on a column,
    or an EXTRACT cast to an integer), itself or in AND, OR, NOT."""
    node = node.unnest()
    if isinstance(node, (exp.And, exp.Or)):
        return _computes_compared(node.this) or _computes_compared(node.expression)
    if isinstance(node, exp.Not):
        return _computes_compared(node.this)
    if not isinstance(node, _COMPARED):
        return False
    return any(numeric_value(side) or _cast_part(side) for side in (node.this, node.expression))


def _cast_part(node: exp.Expr) -> bool:
    """``CAST(EXTRACT(field FROM c) AS integer)`` (a part of a numeric key)."""
    node = node.unnest()
    return isinstance(node, exp.Cast) and isinstance(node.this.unnest(), exp.Extract)


def _whole(node: exp.Expr) -> bool:
    """Whether a numeric key's value is a whole number: floor, ceil, trunc or round to 0
    places, an EXTRACT (a part: its fields are whole numbers), a whole literal, or +, -, *
    of such."""
    node = node.unnest()
    if isinstance(node, exp.Extract) or (isinstance(node, exp.Literal) and node.is_int):
        return True
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
        return _whole(node.this) and _whole(node.expression)
    if isinstance(node, (exp.Neg, exp.Abs)):
        return _whole(node.this)
    if isinstance(node, (exp.Floor, exp.Ceil)):
        return not _extra(node, "decimals", "to")
    if isinstance(node, (exp.Trunc, exp.Round)):
        decimals = node.args.get("decimals")
        return decimals is None or constant_integer(decimals, 0, 0) == 0
    return False


#: The largest magnitude of a compared value (as every step of a key: ``rewriter.intervals``).
_MAX_VALUE = 2.0**52


#: trunc(x, d > 0) of a DOUBLE: x·10^d this close (relatively) below a whole number is it.
_SNAP = 2.0**-50


def _scaled(x: exp.Expr, digits: int) -> exp.Expr:
    """x·10^d (x / 10^-d for d < 0), of a DOUBLE x."""
    scale = _double(10.0 ** abs(digits))
    if digits > 0:
        return exp.Mul(this=_p(x), expression=scale)
    if digits < 0:
        return exp.Div(this=_p(x), expression=scale)
    return x


def _rounded_check(inner: _Number, digits: int) -> exp.Expr:
    """``round(x, d)`` as interval arithmetic understands it (x / 10^-d rounded, times
    10^-d, for d < 0): its interval holds every value of x rounded or truncated to d
    places."""
    if digits >= 0:
        return exp.Round(this=inner.double().check, decimals=exp.Literal.number(digits))
    scale = _double(10.0**-digits)
    shrunk = exp.Div(this=_p(inner.double().check), expression=scale.copy())
    return exp.Mul(this=exp.Round(this=shrunk), expression=scale)


def _quotient(left: _Number, right: _Number) -> _Number:
    """``left / right`` as DOUBLEs, the divisor NULL for 0 (defence in depth: the interval
    check refuses a divisor that could be 0)."""
    a, b = left.double(), right.double()

    def divided(x: exp.Expr, y: exp.Expr) -> exp.Expr:
        return exp.Div(this=_p(x), expression=exp.func("NULLIF", y, exp.Literal.number(0)))

    return _Number(divided(a.sql, b.sql), divided(a.check, b.check), False)


def _truncated_quotient(real: _Number) -> _Number:
    """PostgreSQL's integer division: the DOUBLE quotient of two integers (within ±2^52,
    so exact enough that truncating it is) truncated toward zero (TRUNC; checked as the
    CASE that computes the same), as a BIGINT."""
    positive = exp.GTE(this=real.check.copy(), expression=exp.Literal.number(0))
    truncated = exp.Case(
        ifs=[exp.If(this=positive, true=exp.Floor(this=real.check.copy()))],
        default=exp.Ceil(this=real.check.copy()),
    )
    return _Number(
        exp.cast(exp.func("TRUNC", real.sql), _BIGINT), exp.cast(truncated, _BIGINT), True
    )


def _cleaned(column: exp.Column, scope: Scope) -> exp.Expr:
    """The column's value clamped to its bounds: BIGINT for an integer column; DOUBLE,
    with NaN and ±infinity as NULL and values tiny next to the bounds as 0, for a real one
    (rewriter.underflow). NULL stays NULL (CASE, not GREATEST/LEAST, which skip NULL)."""
    info = scope.info(column)
    bounds = info.policy.bounds
    if bounds is None:
        raise ValueError(f"column {info.name} has no bounds")
    whole = info.whole_bounds
    if whole is not None:
        return exp.cast(between_keeping_null(column.copy(), *(integer(b) for b in whole)), _BIGINT)
    # As rewriter.passes.bound_per_unit.clean: NaN, ±infinity and decimals beyond DOUBLE's
    # range are NULL, the others cast to DOUBLE without fail (rewriter.sql_values), and
    # every cleaned value is 0 or at least the flush threshold in magnitude.
    value = as_double(column, info.type)
    finite = in_double_range(column, info.type)
    lower, upper, threshold = flushed_bounds(*bounds)
    ifs = [exp.If(this=exp.Not(this=exp.Paren(this=finite)), true=exp.Null())]
    if threshold > 0 and lower <= 0 <= upper:
        tiny = exp.and_(
            exp.GT(this=value.copy(), expression=number(-threshold)),
            exp.LT(this=value.copy(), expression=number(threshold)),
        )
        ifs.append(exp.If(this=tiny, true=_double(0.0)))
    ifs.append(
        exp.If(this=exp.LT(this=value.copy(), expression=number(lower)), true=_double(lower))
    )
    ifs.append(
        exp.If(this=exp.GT(this=value.copy(), expression=number(upper)), true=_double(upper))
    )
    return exp.cast(exp.Case(ifs=ifs, default=value), _DOUBLE)


def _without_nulls(node: exp.Expr) -> exp.Expr:
    """For the interval check: the expression without its NULL branches and arguments
    (they add no value; interval arithmetic cannot bound a NULL literal)."""

    def drop(sub: exp.Expr) -> exp.Expr:
        if isinstance(sub, exp.Case):
            ifs = [b for b in sub.args.get("ifs", []) if not isinstance(b.args["true"], exp.Null)]
            default = sub.args.get("default")
            return exp.Case(ifs=ifs, default=None if isinstance(default, exp.Null) else default)
        return sub

    return node.copy().transform(drop)


def _extra(node: exp.Expr, *names: str) -> bool:
    """Whether ``node`` has one of these optional arguments (other dialects' forms)."""
    return any(node.args.get(name) is not None for name in names)


def _p(node: exp.Expr) -> exp.Expr:
    """Parenthesised where precedence could change its meaning (sqlglot prints the tree as
    it is, without adding parentheses)."""
    if isinstance(node, (exp.Column, exp.Literal, exp.Cast, exp.Func, exp.Paren, exp.Null)):
        return node
    return exp.Paren(this=node)


def _abs(node: exp.Expr) -> exp.Expr:
    return exp.Abs(this=node)


def _double(value: float) -> exp.Expr:
    return exp.cast(number(value), _DOUBLE)


def _written(node: exp.Expr) -> str:
    return node.sql(dialect="postgres")
