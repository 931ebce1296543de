"""Part of pass 7 (post_process): the numeric functions of post-processing, computed as
PostgreSQL 15 computes them over the released values, its errors included.

``nullif``, ``sqrt`` (``|/``), ``cbrt`` (``||/``), ``power``/``pow`` (``^``), ``exp``,
``ln``, ``log`` (one argument: base 10), ``log10``, ``mod`` (``%``), ``trunc`` (one or
two arguments), ``div``, ``pi``, ``degrees`` and ``radians`` are allowed in the select
list, HAVING and ORDER BY of a DP query and in a query around one (``released_source``).

Post-processing runs in DuckDB, which returns NaN, ±infinity, 0 or NULL where PostgreSQL
fails (``sqrt(-1)``, ``ln(0)``, ``power(0, -1)``, ``exp(1000)``). Each call is written as
DuckDB SQL that computes PostgreSQL's value with the same C library functions (both
engines call the platform's libm; compared bit for bit), handles NaN and infinities as
PostgreSQL's float.c does, and calls DuckDB's ``error()`` where PostgreSQL raises an
error: the post-processing fails (``proxy.postprocess``), as the query would on
PostgreSQL. ``mod(x, 0)`` and ``div(x, 0)`` give NULL instead, as ``x / 0`` and ``x % 0``
do in post-processing (``post_process.safe_division``): the zero may come from the noise.

Types follow PostgreSQL's choice of function (:func:`kind`): an integer or a double
argument gives a double (``sqrt(COUNT(*))``, ``trunc(AVG(x))``), ``mod`` of integers an
integer, ``div`` and ``trunc(x, n)`` a numeric, ``trunc`` of a numeric a numeric. Refused
before the charge:

- ``sqrt``, ``exp``, ``ln``, ``log``, ``log10`` and ``power`` of numeric values (a
  ``::numeric`` cast, a literal such as ``0.5`` beside integers, ``AVG`` of integers in a
  query around a DP query): PostgreSQL computes them in numeric, to 16 or more significant
  digits, which a double does not hold; ``sqrt(x::float8)`` is computed;
- ``log(b, x)``: PostgreSQL has it for numeric only (see above). sqlglot reads
  ``log10(x)`` as ``log(10, x)``, so ``log(10, x)`` is computed as ``log10(x)``, a double
  (PostgreSQL's is a numeric of the same value, to 16 significant digits);
- ``mod``, ``div`` and ``trunc(x, n)`` of a double: PostgreSQL has no such function
  (``mod(x::numeric, 2)`` is computed); ``div`` of numerics that are not integers, which
  DuckDB does not divide exactly.

Where the type of an argument is not known from the query (a column of the DP subquery
read by the query around it), the SQL checks DuckDB's type of the value (``typeof``, the
same on every row) and fails on every row when it is not one the computation was chosen
for, so that the check before the charge (``proxy.pre_charge``) refuses the query.

An argument that the SQL reads more than once (``sqrt(x)`` compares x with 0 first) is
bound once, in a DuckDB lambda (``LIST_TRANSFORM([x], LAMBDA v : …)[1]``), so that nested
calls do not multiply the SQL.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from functools import cache

import sqlglot
from sqlglot import exp

from rewriter.errors import Rejected
from rewriter.output_names import function_name
from rewriter.passes.check_predicate import allowed_node
from rewriter.passes.post_kinds import ColumnKinds, Kind
from rewriter.passes.post_rounding import ROUNDING, Rounding, computed, rounded, rounding_kind

#: What a value of unknown type may be (text, dates and booleans fail to bind in DuckDB's
#: numeric functions, or are refused by the type check).
_CONCRETE = (Kind.INTEGER, Kind.DOUBLE, Kind.NUMERIC, Kind.NULL)

POST_FUNCTIONS = (
    exp.Nullif,
    exp.Sqrt,
    exp.Cbrt,
    exp.Pow,
    exp.Exp,
    exp.Ln,
    exp.Log,
    exp.Trunc,
    exp.IntDiv,
    exp.Pi,
    exp.Degrees,
    exp.Radians,
)
# mod(x, y) and x % y are exp.Mod, of the row-level allowlist (check_predicate).
#: The text functions of post-processing (these classes exactly: post_strings), and
#: to_char (an Anonymous: rewriter.parse).
STRING_FUNCTIONS = (
    exp.Left,
    exp.Right,
    exp.Concat,
    exp.ConcatWs,
    exp.Replace,
    exp.StrPosition,
    exp.Initcap,
    exp.Pad,
    exp.Repeat,
)

#: Those of the row-level allowlist that post-processing allows too (allowed_node), and
#: these.
ALLOWED_POST_FUNCTIONS = (
    "lower, upper, abs, coalesce, length, trim, extract, round, floor, ceil, substring, sign, "
    "greatest, least, date_trunc, width_bucket, nullif, sqrt, cbrt, power, exp, ln, log, "
    "log10, mod, trunc, div, pi, degrees, radians, left, right, concat, concat_ws, replace, "
    "position, strpos, initcap, lpad, rpad, repeat, to_char (of a date or timestamp key)"
)
POST_FUNCTIONS_HINT = (
    f"allowed functions in the select list, HAVING and ORDER BY: {ALLOWED_POST_FUNCTIONS}"
)

#: The arguments each function may have (sqlglot may add others: fail closed).
_ARGUMENTS: dict[type[exp.Expr], frozenset[str]] = {
    exp.Nullif: frozenset({"this", "expression"}),
    exp.Sqrt: frozenset({"this"}),
    exp.Cbrt: frozenset({"this"}),
    exp.Pow: frozenset({"this", "expression"}),
    exp.Exp: frozenset({"this"}),
    exp.Ln: frozenset({"this"}),
    exp.Log: frozenset({"this", "expression"}),
    exp.Trunc: frozenset({"this", "decimals"}),
    exp.IntDiv: frozenset({"this", "expression"}),
    exp.Pi: frozenset(),
    exp.Degrees: frozenset({"this"}),
    exp.Radians: frozenset({"this"}),
}
_REQUIRED: dict[type[exp.Expr], frozenset[str]] = {
    exp.Nullif: frozenset({"this", "expression"}),
    exp.Pow: frozenset({"this", "expression"}),
    exp.IntDiv: frozenset({"this", "expression"}),
}


def is_post_function(node: exp.Expr) -> bool:
    """One of POST_FUNCTIONS exactly (a subclass sqlglot may add is another function)."""
    return type(node) in POST_FUNCTIONS


def allowed_post_node(node: exp.Expr) -> bool:
    """A node of post-processing: the row-level allowlist, these functions and the text
    functions (post_strings)."""
    if type(node) in STRING_FUNCTIONS:
        return True
    if isinstance(node, exp.Anonymous) and node.name.lower() == "to_char":
        return True
    return allowed_node(node) or is_post_function(node)


def check_post_function(node: exp.Expr, where: str) -> None:
    """What can be refused from the call alone, before the charge: its arguments, log(b, x)
    and trunc(x, n) with an n that is not a constant whole number."""
    name = _name(node)
    allowed = _ARGUMENTS.get(type(node), frozenset())
    given = {k for k, v in node.args.items() if v not in (None, [])}
    if given - allowed or not _REQUIRED.get(type(node), frozenset()) <= given:
        raise Rejected(
            f"{node.sql(dialect='postgres')} is not supported in {where}: "
            f"{name}() takes other arguments",
            sqlstate="42883",
            hint=POST_FUNCTIONS_HINT,
        )
    if isinstance(node, exp.Log) and node.expression is not None and not _is_log10(node):
        raise Rejected(
            f"log(b, x) is not supported in {where}: PostgreSQL computes it in numeric only, "
            "to more significant digits than a double holds",
            sqlstate="0A000",
            hint="log(x) is the logarithm to base 10 and ln(x) the natural one, in double "
            "precision: ln(x) / ln(b) is the logarithm to base b",
        )
    decimals = node.args.get("decimals") if isinstance(node, exp.Trunc) else None
    if decimals is not None and _whole_number(decimals) is None:
        raise Rejected(
            f"trunc(x, n) in {where} takes a constant whole number n",
            sqlstate="0A000",
            hint="for example trunc(AVG(cost)::numeric, 2)",
        )


def kind(node: exp.Expr, columns: ColumnKinds) -> Kind:
    """The type PostgreSQL gives ``node`` (a post-processing expression), or UNKNOWN.

    Division is a double: post-processing divides exactly (``post_process``). ``AVG`` of
    anything but a double is numeric in PostgreSQL, though DuckDB computes a double."""
    if isinstance(node, exp.Paren | exp.Neg | exp.Abs):
        return kind(node.this, columns)
    if isinstance(node, exp.Null):
        return Kind.NULL
    if isinstance(node, exp.Literal):
        if node.is_string:
            return Kind.UNKNOWN
        return Kind.INTEGER if node.is_int and abs(int(node.this)) < 2**63 else Kind.NUMERIC
    if isinstance(node, exp.Column):
        return columns(node)
    if isinstance(node, exp.Cast):
        return _CASTS.get(node.to.this, Kind.UNKNOWN)
    if isinstance(node, exp.Div):
        return Kind.DOUBLE
    if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Mod | exp.Nullif):
        return _combined([kind(node.this, columns), kind(node.expression, columns)])
    if isinstance(node, exp.Coalesce | exp.Greatest | exp.Least):
        return _combined([kind(v, columns) for v in [node.this, *node.expressions]])
    if isinstance(node, exp.Case):
        values = [b.args["true"] for b in node.args.get("ifs", [])]
        values += [node.args["default"]] if node.args.get("default") is not None else []
        return _combined([kind(v, columns) for v in values])
    if isinstance(node, _DOUBLES):
        return Kind.DOUBLE
    if isinstance(node, exp.Trunc):
        if node.args.get("decimals") is not None:
            return Kind.NUMERIC
        return Kind.NUMERIC if kind(node.this, columns) is Kind.NUMERIC else Kind.DOUBLE
    if isinstance(node, exp.IntDiv):
        return Kind.NUMERIC
    if type(node) is exp.StrPosition:
        return Kind.INTEGER
    if isinstance(node, ROUNDING):
        return rounding_kind(node, kind(node.this, columns))
    if isinstance(node, exp.Window):
        return _window_kind(node, columns)
    return _aggregate_kind(node, columns)


_CASTS = {
    exp.DataType.Type.TINYINT: Kind.INTEGER,
    exp.DataType.Type.SMALLINT: Kind.INTEGER,
    exp.DataType.Type.INT: Kind.INTEGER,
    exp.DataType.Type.BIGINT: Kind.INTEGER,
    exp.DataType.Type.DOUBLE: Kind.DOUBLE,
    exp.DataType.Type.FLOAT: Kind.DOUBLE,
    exp.DataType.Type.DECIMAL: Kind.NUMERIC,
}
_DOUBLES: tuple[type[exp.Expr], ...] = (
    exp.Sqrt,
    exp.Cbrt,
    exp.Pow,
    exp.Exp,
    exp.Ln,
    exp.Log,
    exp.Pi,
    exp.Degrees,
    exp.Radians,
    exp.PercentRank,
    exp.CumeDist,
)


def _window_kind(node: exp.Window, columns: ColumnKinds) -> Kind:
    if isinstance(node.this, exp.RowNumber | exp.Rank | exp.DenseRank | exp.Ntile):
        return Kind.INTEGER
    return _aggregate_kind(node.this, columns)


def _aggregate_kind(node: exp.Expr, columns: ColumnKinds) -> Kind:
    """COUNT, SUM, AVG, MIN and MAX over released rows (a query around a DP query, or a
    window); UNKNOWN for anything else."""
    if isinstance(node, exp.Count):
        return Kind.INTEGER
    if not isinstance(node, exp.Sum | exp.Avg | exp.Min | exp.Max | exp.Lag | exp.Lead):
        return Kind.UNKNOWN
    if isinstance(node, exp.Lag | exp.Lead | exp.Min | exp.Max):
        return kind(node.this, columns)
    inner = kind(node.this, columns)
    if inner in (Kind.DOUBLE, Kind.NULL):
        return inner
    if isinstance(node, exp.Avg):
        return Kind.NUMERIC  # of integers: numeric in PostgreSQL, a double in DuckDB
    return Kind.NUMERIC if inner is Kind.INTEGER else inner  # SUM(bigint): numeric


def quotient_kind(node: exp.Expr, columns: ColumnKinds) -> Kind:
    """The type PostgreSQL gives ``node`` with its divisions read as PostgreSQL reads
    them, a numeric unless a double is divided (``COUNT(*) / 2.0``; of two integers, the
    exact quotient dpproxy computes is a numeric's), where :func:`kind` reads each as the
    double post-processing computes."""
    if isinstance(node, exp.Paren | exp.Neg | exp.Abs):
        return quotient_kind(node.this, columns)
    if isinstance(node, exp.Div | exp.Add | exp.Sub | exp.Mul):
        parts = [quotient_kind(node.this, columns), quotient_kind(node.expression, columns)]
        found = _combined(parts)
        return Kind.NUMERIC if isinstance(node, exp.Div) and found is Kind.INTEGER else found
    return kind(node, columns)


def _combined(kinds: Sequence[Kind]) -> Kind:
    """The type PostgreSQL gives arithmetic (or CASE, COALESCE…) over these."""
    present = set(kinds) - {Kind.NULL}
    if not present:
        return Kind.NULL
    if Kind.DOUBLE in present:
        return Kind.DOUBLE
    if Kind.UNKNOWN in present:
        return Kind.UNKNOWN
    return Kind.NUMERIC if Kind.NUMERIC in present else Kind.INTEGER


def post_functions(node: exp.Expr, columns: ColumnKinds, where: str) -> exp.Expr:
    """``node`` (changed in place; use the result) with each function of
    :data:`POST_FUNCTIONS` (and mod) written as PostgreSQL computes it; Rejected for those
    PostgreSQL computes otherwise (see the module). Run after ``safe_division`` and
    ``numeric_casts``, on the expressions of the post-processing query."""
    return _Writer(columns, where).write(node)


def plain_div(node: exp.Expr) -> exp.Expr:
    """``node`` (changed in place) with sqlglot's reading of ``div(x, y)``, ``CAST(x // y
    AS DECIMAL)``, back to ``x // y``, which :func:`post_functions` writes: run before
    ``numeric_casts``, which would give the quotient 12 decimals."""

    def replace(sub: exp.Expr) -> exp.Expr:
        if (
            isinstance(sub, exp.Cast)
            and isinstance(sub.this, exp.IntDiv)
            and sub.to.is_type(exp.DataType.Type.DECIMAL)
            and not sub.to.expressions
        ):
            return sub.this.transform(replace, copy=False)
        return sub

    return node.transform(replace, copy=False)


class _Writer:
    def __init__(self, columns: ColumnKinds, where: str) -> None:
        self.columns = columns
        self.where = where

    def write(self, node: exp.Expr) -> exp.Expr:
        return node.transform(self._node, copy=False)

    def _node(self, node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Mod):
            return self._mod(node)
        if isinstance(node, exp.IntDiv):
            return self._div(node)
        if isinstance(node, exp.Trunc):
            return self._trunc(node)
        if isinstance(node, exp.Log):
            if node.expression is not None and not _is_log10(node):
                raise Rejected(f"log(b, x) is not supported in {self.where}")  # checked before
            return self._float(node, [node.expression or node.this], "log10")
        for kind_, name in _FLOAT_FUNCTIONS.items():
            if isinstance(node, kind_):
                arguments = [node.this] + ([node.expression] if name == "power" else [])
                return self._float(node, arguments, name)
        if isinstance(node, exp.Nullif):
            return self._nullif(node)
        if isinstance(node, ROUNDING):
            return self._rounding(node)
        return node  # pi(): DuckDB's is PostgreSQL's

    def _rounding(self, node: Rounding) -> exp.Expr:
        """round, floor, ceil and sign in PostgreSQL's types (post_rounding); of a value
        of unknown type, DuckDB's (the transform goes on into the argument). A division
        that PostgreSQL computes as a numeric (``COUNT(*) / 2.0``) is rounded as one:
        halves away from zero."""
        (argument,) = self._kinds([node.this])
        if not computed(node, argument):
            return node
        even = quotient_kind(node.this, self.columns) is Kind.DOUBLE
        return rounded(node, self.write(node.this), argument, halves_even=even)

    def _kinds(self, arguments: Sequence[exp.Expr]) -> tuple[Kind, ...]:
        return tuple(kind(a, self.columns) for a in arguments)

    def _written(self, arguments: Sequence[exp.Expr]) -> list[exp.Expr]:
        """The arguments, their own calls written (transform does not visit the nodes a
        replacement holds)."""
        return [self.write(a) for a in arguments]

    def _float(self, node: exp.Expr, arguments: list[exp.Expr], name: str) -> exp.Expr:
        """Functions of double precision (and of numeric for some: _NUMERIC_TO_DOUBLE)."""
        kinds = self._kinds(arguments)

        def computed(combination: tuple[Kind, ...]) -> bool:
            if name in _NUMERIC_TO_DOUBLE:
                return True  # PostgreSQL casts a numeric to double precision (implicit)
            return Kind.DOUBLE in combination or Kind.NUMERIC not in combination

        accepted = _accepted(kinds, computed)
        if not accepted:
            raise Rejected(
                f"{_name(node)}() of a numeric value is not supported in {self.where}: "
                "PostgreSQL computes it in numeric, to more significant digits than a double "
                "holds",
                sqlstate="0A000",
                hint=f"cast the value to double precision, e.g. {_name(node)}(x::float8)",
            )
        return _bound(self._written(arguments), kinds, accepted, _template(_SQL[name]), name)

    def _nullif(self, node: exp.Nullif) -> exp.Expr:
        """PostgreSQL returns the first value in the type both are compared in:
        nullif(COUNT(*), AVG(x)) is a double, nullif(COUNT(*), 2.5) a numeric (DuckDB keeps
        the first value's type)."""
        first, second = self._kinds([node.this, node.expression])
        both = _combined([first, second])
        value, other = self._written([node.this, node.expression])
        if first is Kind.INTEGER and both is Kind.DOUBLE:
            value = _cast(value)
        elif first is Kind.INTEGER and both is Kind.NUMERIC:
            value = exp.Cast(this=value, to=exp.DataType.build("DECIMAL(38, 0)", dialect="duckdb"))
        elif first is Kind.NUMERIC and both is Kind.DOUBLE:
            value = _cast(value)
        return exp.Nullif(this=value, expression=other)

    def _mod(self, node: exp.Mod) -> exp.Expr:
        divisor = node.expression
        if (  # safe_division's NULLIF(y, 0): written again below
            isinstance(divisor, exp.Nullif)
            and isinstance(divisor.expression, exp.Literal)
            and divisor.expression.this == "0"
        ):
            divisor = divisor.this
        arguments = [node.this, divisor]
        kinds = self._kinds(arguments)
        accepted = _accepted(kinds, lambda combination: Kind.DOUBLE not in combination)
        if not accepted:
            raise Rejected(
                f"mod() and % of a double precision value are not supported in {self.where}: "
                "PostgreSQL has them for integers and numeric only",
                sqlstate="42883",
                hint="cast the value to numeric, e.g. mod(AVG(x)::numeric, 2), or round it",
            )
        constant = _whole_number(divisor)
        template = "plain_mod" if constant is not None and constant != -1 else "mod"
        return _bound(self._written(arguments), kinds, accepted, _template(_SQL[template]), "mod")

    def _div(self, node: exp.IntDiv) -> exp.Expr:
        arguments = [node.this, node.expression]
        kinds = self._kinds(arguments)
        accepted = _accepted(kinds, lambda c: Kind.DOUBLE not in c and Kind.NUMERIC not in c)
        if not accepted:
            raise Rejected(
                f"div() of a double precision or numeric value is not supported in "
                f"{self.where}: dpproxy computes div of whole numbers (PostgreSQL has no div "
                "of double precision)",
                sqlstate="0A000",
                hint="div(x, y) of integers, or trunc(x / y) for other values",
            )
        return _bound(self._written(arguments), kinds, accepted, _template(_SQL["div"]), "div")

    def _trunc(self, node: exp.Trunc) -> exp.Expr:
        arguments = [node.this]
        kinds = self._kinds(arguments)
        decimals = node.args.get("decimals")
        if decimals is None:
            if kinds[0] is Kind.NUMERIC:  # numeric: exact
                return exp.func("TRUNC", *self._written(arguments))
            accepted = _accepted(kinds, lambda c: Kind.NUMERIC not in c)
            return _bound(
                self._written(arguments), kinds, accepted, _template(_SQL["trunc"]), "trunc"
            )
        places = _whole_number(decimals)
        if places is None:
            raise Rejected(f"trunc(x, n) in {self.where} takes a constant whole number n")
        accepted = _accepted(kinds, lambda c: Kind.DOUBLE not in c)
        if not accepted:
            raise Rejected(
                f"trunc(x, n) of a double precision value is not supported in {self.where}: "
                "PostgreSQL has it for numeric only",
                sqlstate="42883",
                hint="cast the value to numeric, e.g. trunc(AVG(x)::numeric, 2)",
            )
        (value,) = self._written(arguments)
        if kinds[0] in (Kind.INTEGER, Kind.NULL):
            # numeric of an integer, with n decimals (PostgreSQL writes them).
            if places > 0:
                scale = exp.DataType.build(f"DECIMAL(38, {min(places, 19)})", dialect="duckdb")
                return exp.Cast(this=value, to=scale)
            hugeint = exp.Cast(this=value, to=exp.DataType.build("HUGEINT", dialect="duckdb"))
            return exp.func("TRUNC", hugeint, exp.Literal.number(places))
        # A numeric, or a value whose type is not known: + 0::DECIMAL(1, 0) keeps a
        # numeric's scale and makes an integer a numeric, as PostgreSQL's trunc returns.
        zero = exp.Cast(this=exp.Literal.number(0), to=exp.DataType.build("DECIMAL(1, 0)"))
        numeric = exp.Add(this=exp.column("__x"), expression=zero)
        truncated = exp.func("TRUNC", numeric, _number(places))
        return _bound([value], kinds, accepted, truncated, "trunc")


#: Functions of double precision, by sqlglot class, and their template.
_FLOAT_FUNCTIONS: dict[type[exp.Expr], str] = {
    exp.Sqrt: "sqrt",
    exp.Cbrt: "cbrt",
    exp.Exp: "exp",
    exp.Ln: "ln",
    exp.Pow: "power",
    exp.Degrees: "degrees",
    exp.Radians: "radians",
}
#: Those PostgreSQL computes in double precision for a numeric too.
_NUMERIC_TO_DOUBLE = frozenset({"cbrt", "degrees", "radians"})

# PostgreSQL's RADIANS_PER_DEGREE (0.0174532925199432957692) as a double: degrees(x) is
# x / it and radians(x) x * it (float.c), not DuckDB's x * (180 / pi).
_RADIANS_PER_DEGREE = "1.7453292519943295e-2"
_OVERFLOW = "error('value out of range: overflow')"
_UNDERFLOW = "error('value out of range: underflow')"

#: DuckDB SQL of each function over ``__x`` (and ``__y``), as float.c computes it.
_SQL = {
    "sqrt": "CASE WHEN __x < 0 THEN error('cannot take square root of a negative number') "
    "ELSE SQRT(__x) END",
    "cbrt": "CBRT(__x)",
    "exp": f"CASE WHEN ISINF(EXP(__x)) AND NOT ISINF(__x) THEN {_OVERFLOW} "
    f"WHEN EXP(__x) = 0 AND NOT ISINF(__x) THEN {_UNDERFLOW} ELSE EXP(__x) END",
    "ln": "CASE WHEN __x = 0 THEN error('cannot take logarithm of zero') "
    "WHEN __x < 0 THEN error('cannot take logarithm of a negative number') ELSE LN(__x) END",
    "log10": "CASE WHEN __x = 0 THEN error('cannot take logarithm of zero') "
    "WHEN __x < 0 THEN error('cannot take logarithm of a negative number') "
    "ELSE LOG10(__x) END",
    "degrees": f"CASE WHEN ISINF(__x / {_RADIANS_PER_DEGREE}) AND NOT ISINF(__x) "
    f"THEN {_OVERFLOW} WHEN __x / {_RADIANS_PER_DEGREE} = 0 AND __x <> 0 THEN {_UNDERFLOW} "
    f"ELSE __x / {_RADIANS_PER_DEGREE} END",
    "radians": f"CASE WHEN ISINF(__x * {_RADIANS_PER_DEGREE}) AND NOT ISINF(__x) "
    f"THEN {_OVERFLOW} WHEN __x * {_RADIANS_PER_DEGREE} = 0 AND __x <> 0 THEN {_UNDERFLOW} "
    f"ELSE __x * {_RADIANS_PER_DEGREE} END",
    "trunc": "TRUNC(CAST(__x AS DOUBLE))",
    # dpow (float.c): NaN, then the domain errors, then infinities, then pow() and its
    # range errors. __x and __y are cast to DOUBLE below.
    "power": "CASE WHEN __x IS NULL OR __y IS NULL THEN CAST(NULL AS DOUBLE) "
    "WHEN ISNAN(__x) THEN CASE WHEN ISNAN(__y) OR __y <> 0 THEN CAST('NaN' AS DOUBLE) "
    "ELSE CAST(1 AS DOUBLE) END "
    "WHEN ISNAN(__y) THEN CASE WHEN __x <> 1 THEN CAST('NaN' AS DOUBLE) "
    "ELSE CAST(1 AS DOUBLE) END "
    "WHEN __x = 0 AND __y < 0 THEN error('zero raised to a negative power is undefined') "
    "WHEN __x < 0 AND FLOOR(__y) <> __y "
    "THEN error('a negative number raised to a non-integer power yields a complex result') "
    "WHEN ISINF(__y) THEN CASE WHEN ABS(__x) = 1 THEN CAST(1 AS DOUBLE) "
    "WHEN (__y > 0) = (ABS(__x) > 1) THEN CAST('Infinity' AS DOUBLE) "
    "ELSE CAST(0 AS DOUBLE) END "
    "WHEN ISINF(__x) THEN CASE WHEN __y = 0 THEN CAST(1 AS DOUBLE) "
    "WHEN __y > 0 THEN CASE WHEN __x > 0 OR FLOOR(__y / 2) <> __y / 2 THEN __x ELSE -__x END "
    "WHEN __x < 0 AND FLOOR(__y / 2) <> __y / 2 THEN CAST('-0.0' AS DOUBLE) "
    "ELSE CAST(0 AS DOUBLE) END "
    f"WHEN ISINF(POWER(__x, __y)) THEN {_OVERFLOW} "
    f"WHEN POWER(__x, __y) = 0 AND __x <> 0 THEN {_UNDERFLOW} "
    "ELSE POWER(__x, __y) END",
    # int8mod: mod(x, -1) is 0 (DuckDB fails on the smallest bigint); NULL for 0.
    "mod": "CASE WHEN __y = -1 AND TYPEOF(__x) IN ('TINYINT', 'SMALLINT', 'INTEGER', "
    "'BIGINT') THEN __x - __x ELSE __x % NULLIF(__y, 0) END",
    "plain_mod": "__x % NULLIF(__y, 0)",
    # numeric: the quotient truncated towards zero (DuckDB's // of integers); NULL for 0.
    "div": "CAST(__x AS HUGEINT) // NULLIF(CAST(__y AS HUGEINT), 0)",
}


@cache
def _parsed(sql: str) -> exp.Expr:
    def log10(node: exp.Expr) -> exp.Expr:
        # sqlglot reads LOG10(x) as LOG(10, x), which DuckDB computes as ln(x) / ln(10).
        if isinstance(node, exp.Log) and node.expression is not None:
            return exp.Anonymous(this="LOG10", expressions=[node.expression])
        return node

    return sqlglot.parse_one(sql, read="duckdb").transform(log10)


def _template(sql: str) -> exp.Expr:
    return _parsed(sql).copy()


def _accepted(
    kinds: tuple[Kind, ...], computed: Callable[[tuple[Kind, ...]], bool]
) -> frozenset[tuple[Kind, ...]]:
    """The combinations of concrete kinds the arguments may have (an UNKNOWN one may be any)
    for which ``computed`` says the chosen SQL computes PostgreSQL's value."""
    choices = [_CONCRETE if k is Kind.UNKNOWN else (k,) for k in kinds]
    return frozenset(c for c in itertools.product(*choices) if computed(c))


#: DuckDB's types (typeof) of each kind.
_DUCKDB_TYPES = {
    Kind.INTEGER: ("TINYINT", "SMALLINT", "INTEGER", "BIGINT"),
    Kind.DOUBLE: ("FLOAT", "DOUBLE"),
    Kind.NULL: ('"NULL"',),
    Kind.NUMERIC: ("HUGEINT",),  # and DECIMAL(p,s)
}
_PARAMETER = "dpproxy_v"
_FIELDS = ("x", "y")


def _bound(
    arguments: list[exp.Expr],
    kinds: tuple[Kind, ...],
    accepted: frozenset[tuple[Kind, ...]],
    body: exp.Expr,
    name: str,
) -> exp.Expr:
    """``body`` (over ``__x`` and ``__y``) over ``arguments``: directly if each is a column
    or a constant, else bound once in a lambda. When a kind is UNKNOWN, the SQL fails on
    every row unless DuckDB's types of the arguments are one of ``accepted``."""
    if name == "power":  # computed in double precision whatever the integer types
        body = _filled(body, {f"__{f}": _cast(exp.column(f"__{f}")) for f in _FIELDS})
    if Kind.UNKNOWN in kinds:
        checked = exp.or_(*(_typed(combination) for combination in sorted(accepted, key=str)))
        if name == "mod":  # DuckDB computes HUGEINT % DECIMAL in DOUBLE
            checked = exp.and_(exp.Paren(this=checked), _typed_mod())
        message = (
            f"post-processing: {name}() of a value of this type is not computed as "
            "PostgreSQL computes it"
        )
        failed = exp.Anonymous(this="error", expressions=[exp.Literal.string(message)])
        body = exp.Case(
            ifs=[exp.If(this=exp.Not(this=exp.Paren(this=checked)), true=failed)], default=body
        )
    if all(_simple(a) for a in arguments):
        return _filled(body, {f"__{f}": a for f, a in zip(_FIELDS, arguments, strict=False)})
    bound: dict[str, exp.Expr]
    if len(arguments) == 1:
        bound = {"__x": exp.column(_PARAMETER)}
        values = {"__a": arguments[0]}
    else:
        bound = {
            f"__{f}": exp.func("STRUCT_EXTRACT", exp.column(_PARAMETER), exp.Literal.string(f))
            for f in _FIELDS
        }
        values = {"__a": arguments[0], "__c": arguments[1]}
    values["__b"] = _filled(body, bound)
    return _filled(_template(_LAMBDAS[len(arguments)]), values)


#: An argument (``__a``), or two (``__a``, ``__c``), bound once for ``__b``.
_LAMBDAS = {
    1: f"LIST_TRANSFORM([__a], LAMBDA {_PARAMETER} : __b)[1]",
    2: f"LIST_TRANSFORM([{{'x': __a, 'y': __c}}], LAMBDA {_PARAMETER} : __b)[1]",
}


def _typed(combination: tuple[Kind, ...]) -> exp.Expr:
    """Whether DuckDB's types of ``__x`` (and ``__y``) are of these kinds."""
    tests = []
    for field, wanted in zip(_FIELDS, combination, strict=False):
        value = exp.Typeof(this=exp.column(f"__{field}"))
        test: exp.Expr = exp.In(
            this=value, expressions=[exp.Literal.string(t) for t in _DUCKDB_TYPES[wanted]]
        )
        if wanted is Kind.NUMERIC:
            decimal = exp.Like(this=value.copy(), expression=exp.Literal.string("DECIMAL(%"))
            test = exp.Paren(this=exp.or_(test, decimal))
        tests.append(test)
    return exp.Paren(this=exp.and_(*tests))


def _typed_mod() -> exp.Expr:
    divisor = exp.Nullif(this=exp.column("__y"), expression=exp.Literal.number(0))
    quotient = exp.Mod(this=exp.column("__x"), expression=divisor)
    floats = [exp.Literal.string(t) for t in _DUCKDB_TYPES[Kind.DOUBLE]]
    return exp.Not(this=exp.In(this=exp.Typeof(this=quotient), expressions=floats))


def _filled(template: exp.Expr, values: dict[str, exp.Expr]) -> exp.Expr:
    def replace(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and not node.table and node.name in values:
            return values[node.name].copy()
        return node

    return template.transform(replace)  # transform copies


def _cast(node: exp.Expr) -> exp.Expr:
    return exp.Cast(this=node, to=exp.DataType.build("DOUBLE", dialect="duckdb"))


def _simple(node: exp.Expr) -> bool:
    """A column or a constant: written again rather than bound in a lambda."""
    while isinstance(node, exp.Paren | exp.Neg):
        node = node.this
    return isinstance(node, exp.Column | exp.Literal | exp.Null)


def _number(value: int) -> exp.Expr:
    literal = exp.Literal.number(abs(value))
    return exp.Neg(this=literal) if value < 0 else literal


def _whole_number(node: exp.Expr) -> int | None:
    """The value of a whole-number literal (``2``, ``-1``), else None."""
    negated = isinstance(node, exp.Neg)
    literal = node.this if negated else node
    if not isinstance(literal, exp.Literal) or literal.is_string or not literal.is_int:
        return None
    value = int(literal.this)
    value = -value if negated else value
    return value if -(2**31) <= value < 2**31 else None


def _is_log10(node: exp.Log) -> bool:
    """sqlglot reads log10(x) as log(10, x): both are log10(x) here (PostgreSQL computes
    log(10, x) in numeric, log10 of a double in double precision)."""
    base = node.this
    return (
        node.expression is not None
        and isinstance(base, exp.Literal)
        and not base.is_string
        and base.this == "10"
    )


def _name(node: exp.Expr) -> str:
    if isinstance(node, exp.Log):
        return "log10" if _is_log10(node) else "log"
    if isinstance(node, exp.IntDiv):
        return "div"
    if isinstance(node, exp.Pow):
        return "power"
    if isinstance(node, exp.Mod):
        return "mod"
    return function_name(node) if isinstance(node, exp.Func) else node.key
