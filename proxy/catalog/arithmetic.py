"""The arithmetic operators of a catalog query (+ - * / % ^ and unary minus) as PostgreSQL
computes them, in DuckDB.

Where PostgreSQL and DuckDB differ: 7/2 is 3 (DuckDB: 3.5), 7.0/2 is the numeric
3.5000000000000000 (DuckDB: a DOUBLE), an integer constant is an integer (DuckDB reads 1
as the narrowest type the other operand allows, so smallint + 1 overflowed at 32767), a
real with anything but a real is a double precision, % of a float does not exist, and a
float operation that overflows, underflows or divides by zero fails (DuckDB: Infinity,
0, NaN). The operands' types decide (number_kinds); constants of numeric divisions and
powers are computed here (pg_numeric), others when the query runs (numeric_udfs); when
a type is known only to DuckDB, the pg_div macro picks the division by it.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

from sqlglot import exp

from proxy.catalog.arithmetic_macros import (
    DIVIDE,
    DIVIDE_ANY,
    FLOAT_ADD,
    FLOAT_DIVIDE,
    FLOAT_MULTIPLY,
    FLOAT_POWER,
    FLOAT_SUBTRACT,
    MACRO_NAMES,
    POWER,
    arithmetic_call,
)
from proxy.catalog.functions import FUNCTIONS
from proxy.catalog.number_kinds import (
    DUCK_TYPES,
    FLOATS,
    INTEGERS,
    NUMBERS,
    Kind,
    common,
    kind_of,
    marked,
    power_kind,
    resolved,
)
from proxy.catalog.numeric_constants import constant_value, numeric_constant
from proxy.catalog.numeric_udfs import UDF_NAMES
from proxy.catalog.pg_numeric import divide, power
from proxy.catalog.raised import RaisedError
from proxy.catalog.refusal import CatalogRefused
from proxy.catalog.typed_text import typed_text
from proxy.catalog.zoned_macros import MACRO_NAMES as ZONED_MACRO_NAMES

#: How many divisions by pg_div may nest (DuckDB binds a typed macro's arguments once per
#: overload it tries: the time doubles and more with each level).
MAX_NESTED_DIVISIONS = 8
_DEPTH = "pg_div_depth"
#: Functions sqlglot does not model that are scalar: the emulation's macros and the
#: engine's Python functions.
KNOWN_SCALARS = frozenset(FUNCTIONS | UDF_NAMES | MACRO_NAMES | ZONED_MACRO_NAMES)
_OPERATOR_HINT = (
    "No operator matches the given name and argument types. "
    "You might need to add explicit type casts."
)
_NOT_UNIQUE_HINT = (
    "Could not choose a best candidate operator. You might need to add explicit type casts."
)
_SYMBOLS: dict[type[exp.Expression], str] = {
    exp.Add: "+",
    exp.Sub: "-",
    exp.Mul: "*",
    exp.Div: "/",
    exp.Mod: "%",
    exp.Pow: "^",
}
_FLOAT_MACROS: dict[type[exp.Expression], str] = {
    exp.Add: FLOAT_ADD,
    exp.Sub: FLOAT_SUBTRACT,
    exp.Mul: FLOAT_MULTIPLY,
    exp.Div: FLOAT_DIVIDE,
}
#: What DuckDB binds after a typed macro's overload is chosen: the macro would take a
#: wrong one (the first's type), or fail.
_NOT_DISPATCHABLE = (exp.AggFunc, exp.Window, exp.UDTF, exp.Unnest, exp.Explode, exp.GenerateSeries)
_Binary = exp.Add | exp.Sub | exp.Mul | exp.Div | exp.Mod


def rewrite_arithmetic(node: exp.Expression) -> exp.Expression | None:
    """``node`` (its operands translated) as DuckDB computes it the way PostgreSQL does;
    None if it is not an arithmetic operator."""
    if isinstance(node, exp.Neg):
        return _negation(node.this)
    if isinstance(node, exp.Pow):
        return _power(node.this, node.expression)
    if isinstance(node, _Binary):
        return _binary(node)
    return None


def operand(node: exp.Expression, kind: Kind) -> exp.Expression:
    """``node`` as a value of ``kind``: cast when its type differs, and when it is a
    constant (whose type DuckDB would pick from the other operand's: it reads the 1 of
    smallint + 1 as a smallint, and (1) too)."""
    core = node
    while isinstance(core, exp.Paren):
        core = core.this
    if isinstance(core, exp.Literal) and core.is_string:
        return typed_text(core, kind)
    if kind is Kind.NUMERIC:
        return node  # DuckDB's DECIMAL takes integers exactly
    if kind_of(node) is kind and not isinstance(core, exp.Literal | exp.Null):
        return node
    return marked(exp.cast(node, exp.DataType.build(DUCK_TYPES[kind])), kind)


def _binary(node: _Binary) -> exp.Expression:
    left, right = node.this, node.expression
    left_kind, right_kind = resolved(kind_of(left), kind_of(right))
    kind = common(left_kind, right_kind)
    if kind is None:
        return _unresolved(node, left_kind, right_kind)
    if isinstance(node, exp.Mod) and kind in FLOATS:
        raise CatalogRefused(
            f"operator does not exist: {left_kind.value} % {right_kind.value}",
            hint=_OPERATOR_HINT,
            sqlstate="42883",
        )
    a, b = operand(left, kind), operand(right, kind)
    if kind is Kind.NUMERIC:
        return _numeric(node, a, b)
    if kind in FLOATS:
        return marked(arithmetic_call(_FLOAT_MACROS[type(node)], a, b), kind)
    if isinstance(node, exp.Div):
        # DuckDB's // of integers truncates toward zero, and fails as PostgreSQL does on
        # a zero divisor and on the smallest value divided by -1.
        return marked(exp.IntDiv(this=a, expression=b), kind)
    if isinstance(node, exp.Mod):
        # The smallest value % -1 is 0 in PostgreSQL; DuckDB's % of it overflows.
        wide = exp.cast(a, exp.DataType.build("HUGEINT"))
        modulo = exp.Mod(this=wide, expression=b)
        return marked(exp.cast(modulo, exp.DataType.build(DUCK_TYPES[kind])), kind)
    return marked(type(node)(this=a, expression=b), kind)


def _numeric(node: _Binary, a: exp.Expression, b: exp.Expression) -> exp.Expression:
    if not isinstance(node, exp.Div):
        # DuckDB's DECIMAL adds, subtracts, multiplies and takes the remainder exactly,
        # with PostgreSQL's scales (the larger one; their sum for *).
        return marked(type(node)(this=a, expression=b), Kind.NUMERIC)
    dividend, divisor = constant_value(a), constant_value(b)
    if dividend is not None and divisor is not None:
        return _computed(lambda: divide(dividend, divisor))
    return marked(engine_function_call(DIVIDE, _text(a), _text(b)), Kind.NUMERIC)


def _power(left: exp.Expression, right: exp.Expression) -> exp.Expression:
    left_kind, right_kind = resolved(kind_of(left), kind_of(right))
    kind = power_kind(left_kind, right_kind)
    if kind is None:
        return exp.Pow(this=_typed_constant(left), expression=_typed_constant(right))
    a, b = operand(left, kind), operand(right, kind)
    if kind is Kind.NUMERIC:
        base, exponent = constant_value(a), constant_value(b)
        if base is not None and exponent is not None:
            return _computed(lambda: power(base, exponent))
        return marked(engine_function_call(POWER, _text(a), _text(b)), Kind.NUMERIC)
    return marked(arithmetic_call(FLOAT_POWER, a, b), Kind.FLOAT8)


def _negation(value: exp.Expression) -> exp.Expression:
    kind = kind_of(value)
    if kind in INTEGERS:
        # 0 - x: DuckDB's minus of the smallest integer gives a bigint (of a constant) or
        # fails without saying which type; 0 - x fails as "Overflow in subtraction of
        # INT32", which reads as PostgreSQL's "integer out of range".
        zero = operand(exp.Literal.number(0), kind)
        return marked(exp.Sub(this=zero, expression=operand(value, kind)), kind)
    if kind is Kind.NUMERIC:
        constant = constant_value(value)
        if constant is not None:
            return numeric_constant(constant.copy_negate())
        return marked(exp.Neg(this=value), kind)
    if kind is Kind.UNTYPED:
        raise CatalogRefused(
            "operator is not unique: - unknown", hint=_NOT_UNIQUE_HINT, sqlstate="42725"
        )
    return marked(exp.Neg(this=value), kind) if kind in FLOATS else exp.Neg(this=value)


def _unresolved(node: _Binary, left_kind: Kind, right_kind: Kind) -> exp.Expression:
    """An operator with an operand whose type only DuckDB will know, or not a number."""
    if left_kind is right_kind is Kind.UNTYPED:
        symbol = _SYMBOLS[type(node)]
        raise CatalogRefused(
            f"operator is not unique: unknown {symbol} unknown",
            hint=_NOT_UNIQUE_HINT,
            sqlstate="42725",
        )
    a, b = _typed_constant(node.this), _typed_constant(node.expression)
    numbers = (*NUMBERS, Kind.UNKNOWN)
    if isinstance(node, exp.Div) and left_kind in numbers and right_kind in numbers:
        if not (dispatchable(a) and dispatchable(b)):
            # DuckDB binds a typed macro's aggregate (or window) argument as if it had the
            # first overload's type, and would divide sum(7.5) as an integer; unnest() it
            # cannot bind at all. DuckDB's // then: integers truncate, floats divide (a
            # numeric gives a double precision).
            return exp.IntDiv(this=a, expression=b)
        depth = 1 + max(_division_depth(a), _division_depth(b))
        if depth > MAX_NESTED_DIVISIONS:
            raise CatalogRefused(
                f"dpproxy's catalog divides at most {MAX_NESTED_DIVISIONS} values nested in "
                "each other whose types it learns only when the query runs",
                hint="cast the operands (x::integer, x::numeric) or simplify the query",
                sqlstate="54001",
            )
        call = arithmetic_call(DIVIDE_ANY, a, b)
        call.meta[_DEPTH] = depth
        return call
    return type(node)(this=a, expression=b)


def _typed_constant(node: exp.Expression) -> exp.Expression:
    """An integer constant with its type spelled out (DuckDB would narrow it)."""
    kind = kind_of(node)
    core = node
    while isinstance(core, exp.Paren):
        core = core.this
    if isinstance(core, exp.Literal) and not core.is_string and kind in INTEGERS:
        return operand(node, kind)
    return node


def dispatchable(node: exp.Expression) -> bool:
    """Whether pg_div may take ``node``: no aggregate, window or set-returning function in
    it (unnest, generate_series), nor a function sqlglot does not know (it could be one of
    DuckDB's aggregates)."""
    for inner in node.walk():
        if isinstance(inner, _NOT_DISPATCHABLE):
            return False
        if isinstance(inner, exp.Anonymous) and str(inner.this).lower() not in KNOWN_SCALARS:
            return False
    return True


def _division_depth(node: exp.Expression) -> int:
    depths = [int(n.meta.get(_DEPTH, 0)) for n in node.walk() if _DEPTH in n.meta]
    return max(depths, default=0)


def _text(node: exp.Expression) -> exp.Expression:
    return exp.cast(node, exp.DataType.build("VARCHAR"))


def engine_function_call(name: str, *args: exp.Expression) -> exp.Expression:
    """A call of one of the engine's Python functions (numeric_udfs), in DuckDB's main
    schema."""
    return exp.Anonymous(this=name, expressions=list(args))


def _computed(compute: Callable[[], Decimal]) -> exp.Expression:
    """The numeric constant ``compute()`` gives, or PostgreSQL's error it raises."""
    try:
        value = compute()
    except RaisedError as error:
        raise CatalogRefused(error.message, sqlstate=error.sqlstate) from None
    return numeric_constant(value)
