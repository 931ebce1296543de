"""PostgreSQL's number functions in a catalog query where DuckDB's differ: abs(), div(),
round(), trunc(), ceil(), floor() and sqrt().

round(x), trunc(x), ceil(x) and floor(x) of an integer or a float are double precision
(round of a float rounds half to even, as rint() does); of a numeric, a numeric.
round(numeric, d) and trunc(numeric, d) have d decimals (round(2.5, 3) is 2.500, where
DuckDB keeps 2.5); of a float they do not exist. div() is numeric, truncated toward zero.
sqrt() of a negative number fails.
"""

from __future__ import annotations

from sqlglot import exp

from proxy.catalog.arithmetic import engine_function_call, operand
from proxy.catalog.arithmetic_macros import FLOAT_SQRT, arithmetic_call
from proxy.catalog.number_kinds import FLOATS, INTEGERS, Kind, kind_of, marked, resolved
from proxy.catalog.numeric_constants import constant_value, numeric_constant
from proxy.catalog.numeric_udfs import SQUARE_ROOT, TRUNCATED_DIVIDE
from proxy.catalog.pg_numeric import DUCK_DIGITS, square_root, truncated_quotient
from proxy.catalog.raised import RaisedError
from proxy.catalog.refusal import CatalogRefused

_FUNCTION_HINT = (
    "No function matches the given name and argument types. "
    "You might need to add explicit type casts."
)
_Rounding = exp.Round | exp.Trunc


def rewrite_numeric_function(node: exp.Expression) -> exp.Expression | None:
    """``node`` (its arguments translated) if it is one of these functions, else None."""
    if isinstance(node, exp.Abs):
        return _abs(node.this)
    if isinstance(node, exp.IntDiv):
        return _div(node.this, node.expression)
    if isinstance(node, exp.Round | exp.Trunc):
        return _rounding(node)
    if isinstance(node, exp.Ceil | exp.Floor):
        return _to_whole(node)
    if isinstance(node, exp.Sqrt):
        return _sqrt(node.this)
    return None


def _abs(value: exp.Expression) -> exp.Expression:
    kind = kind_of(value)
    if kind is Kind.UNTYPED:
        kind = Kind.FLOAT8  # abs('-7'): the unknown constant is a double precision
    if kind in (*INTEGERS, *FLOATS):
        # DuckDB's abs() of the smallest integer fails ("Overflow on abs"), as PostgreSQL's.
        return marked(exp.Abs(this=operand(value, kind)), kind)
    if kind is Kind.NUMERIC:
        constant = constant_value(value)
        if constant is not None:
            return numeric_constant(constant.copy_abs())
        return marked(exp.Abs(this=value), kind)
    return exp.Abs(this=value)


def _div(left: exp.Expression, right: exp.Expression) -> exp.Expression:
    left_kind, right_kind = resolved(kind_of(left), kind_of(right))
    if left_kind in FLOATS or right_kind in FLOATS:
        raise CatalogRefused(
            f"function div({left_kind.value}, {right_kind.value}) does not exist",
            hint=_FUNCTION_HINT,
            sqlstate="42883",
        )
    a = operand(left, Kind.NUMERIC) if left_kind is not Kind.UNKNOWN else left
    b = operand(right, Kind.NUMERIC) if right_kind is not Kind.UNKNOWN else right
    dividend, divisor = constant_value(a), constant_value(b)
    if dividend is not None and divisor is not None:
        try:
            return numeric_constant(truncated_quotient(dividend, divisor))
        except RaisedError as error:
            raise CatalogRefused(error.message, sqlstate=error.sqlstate) from None
    texts = [exp.cast(v, exp.DataType.build("VARCHAR")) for v in (a, b)]
    return marked(engine_function_call(TRUNCATED_DIVIDE, *texts), Kind.NUMERIC)


def _rounding(node: _Rounding) -> exp.Expression:
    value: exp.Expression = node.this
    decimals = node.args.get("decimals")
    kind = kind_of(value)
    kind = Kind.FLOAT8 if kind is Kind.UNTYPED and decimals is None else kind
    function = type(node)
    name = "round" if isinstance(node, exp.Round) else "trunc"
    if decimals is None:
        if kind in (*INTEGERS, *FLOATS):
            as_double = operand(value, Kind.FLOAT8)
            if isinstance(node, exp.Round):  # rint(): half to even
                even = exp.Anonymous(
                    this="round_even", expressions=[as_double, exp.Literal.number(0)]
                )
                return marked(even, Kind.FLOAT8)
            return marked(function(this=as_double), Kind.FLOAT8)
        if kind is Kind.NUMERIC:
            return marked(function(this=value), Kind.NUMERIC)
        return node
    if kind in FLOATS:
        raise CatalogRefused(
            f"function {name}({kind.value}, integer) does not exist",
            hint=_FUNCTION_HINT,
            sqlstate="42883",
        )
    places = constant_value(decimals)
    if kind not in (*INTEGERS, Kind.NUMERIC, Kind.UNTYPED) or places is None:
        return node
    if abs(places) > DUCK_DIGITS or places != places.to_integral_value():
        raise CatalogRefused(
            f"dpproxy's catalog rounds numeric values to at most {DUCK_DIGITS} places"
        )
    numeric = operand(value, Kind.NUMERIC) if kind is not Kind.NUMERIC else value
    if kind in INTEGERS:
        numeric = exp.cast(numeric, exp.DataType.build("DECIMAL(38, 0)"))
    rounded = function(this=numeric, decimals=operand(decimals, Kind.INT4))
    # round(2.5, 3) is 2.500 in PostgreSQL: the result has exactly d decimals.
    scale = max(int(places), 0)
    cast = exp.cast(rounded, exp.DataType.build(f"DECIMAL({DUCK_DIGITS}, {scale})"))
    return marked(cast, Kind.NUMERIC)


def _to_whole(node: exp.Ceil | exp.Floor) -> exp.Expression:
    value: exp.Expression = node.this
    kind = kind_of(value)
    function = type(node)
    if kind in (*INTEGERS, *FLOATS, Kind.UNTYPED):
        return marked(function(this=operand(value, Kind.FLOAT8)), Kind.FLOAT8)
    if kind is Kind.NUMERIC:
        return marked(function(this=value), Kind.NUMERIC)
    return node


def _sqrt(value: exp.Expression) -> exp.Expression:
    kind = kind_of(value)
    if kind in (*INTEGERS, *FLOATS, Kind.UNTYPED):
        return marked(arithmetic_call(FLOAT_SQRT, operand(value, Kind.FLOAT8)), Kind.FLOAT8)
    if kind is Kind.NUMERIC:
        constant = constant_value(value)
        if constant is not None:
            try:
                return numeric_constant(square_root(constant))
            except RaisedError as error:
                raise CatalogRefused(error.message, sqlstate=error.sqlstate) from None
        text = exp.cast(value, exp.DataType.build("VARCHAR"))
        return marked(engine_function_call(SQUARE_ROOT, text), Kind.NUMERIC)
    return exp.Sqrt(this=value)
