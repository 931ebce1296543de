"""The catalog engine's macros for PostgreSQL's arithmetic, called by the translation
(proxy.catalog.arithmetic):

- float operations that fail as PostgreSQL's do (division by zero, overflow to infinity,
  underflow to zero, powers of zero and of negative numbers) where DuckDB gives
  Infinity, 0 or NaN. Each takes its operands once (a lambda over the pair), so that
  nested calls do not repeat their arguments;
- pg_div, the division of operands whose types DuckDB learns only when it binds the
  query (a column, a function's value): an overload for each type, so that integers
  divide as integers, numerics as numerics (numeric_udfs), floats as floats.
"""

from __future__ import annotations

from sqlglot import exp

from proxy.catalog.functions import macro_call
from proxy.catalog.numeric_udfs import DIVIDE, FLOAT_NUMERIC, POWER, TEXT_NUMERIC
from proxy.catalog.raised import marked
from proxy.catalog.relations import FUNCTIONS_SCHEMA

S = FUNCTIONS_SCHEMA
DIVIDE_ANY = "pg_div"
FLOAT_DIVIDE = "pg_float_div"
FLOAT_ADD = "pg_float_add"
FLOAT_SUBTRACT = "pg_float_sub"
FLOAT_MULTIPLY = "pg_float_mul"
FLOAT_POWER = "pg_float_pow"
FLOAT_SQRT = "pg_float_sqrt"
NUMERIC_OF = "pg_numeric"


def _error(sqlstate: str, message: str) -> str:
    return f"error('{marked(sqlstate, message)}')"


_ZERO_DIVIDE = _error("22012", "division by zero")
_OVERFLOW = _error("22003", "value out of range: overflow")
_UNDERFLOW = _error("22003", "value out of range: underflow")


def _pairwise(body: str) -> str:
    """A macro over the pair (a, b), each evaluated once: the body's X and Y."""
    return f"(a, b) AS list_transform([[a, b]], lambda v: {body})[1]"


X, Y = "v[1]", "v[2]"
# float8pl, float8mi, float8mul, float8div and dpow of PostgreSQL's float.c, over operands
# the translation casts both to real or both to double precision.
_FLOAT_MACROS = {
    FLOAT_ADD: _pairwise(
        f"CASE WHEN isinf({X} + {Y}) AND NOT isinf({X}) AND NOT isinf({Y}) THEN {_OVERFLOW} "
        f"ELSE {X} + {Y} END"
    ),
    FLOAT_SUBTRACT: _pairwise(
        f"CASE WHEN isinf({X} - {Y}) AND NOT isinf({X}) AND NOT isinf({Y}) THEN {_OVERFLOW} "
        f"ELSE {X} - {Y} END"
    ),
    FLOAT_MULTIPLY: _pairwise(
        f"CASE WHEN isinf({X} * {Y}) AND NOT isinf({X}) AND NOT isinf({Y}) THEN {_OVERFLOW} "
        f"WHEN {X} * {Y} = 0 AND {X} != 0 AND {Y} != 0 THEN {_UNDERFLOW} ELSE {X} * {Y} END"
    ),
    FLOAT_DIVIDE: _pairwise(
        f"CASE WHEN {Y} = 0 AND NOT isnan({X}) THEN {_ZERO_DIVIDE} "
        f"WHEN isinf({X} / {Y}) AND NOT isinf({X}) THEN {_OVERFLOW} "
        f"WHEN {X} / {Y} = 0 AND {X} != 0 AND NOT isinf({Y}) THEN {_UNDERFLOW} "
        f"ELSE {X} / {Y} END"
    ),
    FLOAT_POWER: _pairwise(
        f"CASE WHEN isnan({X}) THEN (CASE WHEN isnan({Y}) OR {Y} != 0 THEN {X} ELSE 1 END) "
        f"WHEN isnan({Y}) THEN (CASE WHEN {X} != 1 THEN {Y} ELSE 1 END) "
        f"WHEN {X} = 0 AND {Y} < 0 THEN "
        + _error("2201F", "zero raised to a negative power is undefined")
        + f" WHEN {X} < 0 AND floor({Y}) != {Y} THEN "
        + _error("2201F", "a negative number raised to a non-integer power yields a complex result")
        + f" WHEN isinf(power({X}, {Y})) AND NOT isinf({X}) AND NOT isinf({Y}) THEN {_OVERFLOW}"
        f" WHEN power({X}, {Y}) = 0 AND {X} != 0 AND NOT isinf({X}) AND NOT isinf({Y}) "
        f"THEN {_UNDERFLOW} ELSE power({X}, {Y}) END"
    ),
}

_FLOAT_MACROS[FLOAT_SQRT] = (
    "(a) AS list_transform([a], lambda v: CASE WHEN v < 0 THEN "
    + _error("2201F", "cannot take square root of a negative number")
    + " ELSE sqrt(v) END)[1]"
)

_NUMERIC = "DECIMAL(38, 20)"
#: Division by the types DuckDB binds: each overload divides as PostgreSQL does for
#: those types. Integers truncate (DuckDB's // on integers truncates toward zero, and
#: fails on zero and on the smallest value / -1); numerics (and HUGEINT, a numeric in
#: PostgreSQL) divide exactly; anything else (intervals) as DuckDB's /.
_DIVISION = (
    "(a SMALLINT, b SMALLINT) AS a // b",
    "(a INTEGER, b INTEGER) AS a // b",
    "(a BIGINT, b BIGINT) AS a // b",
    f"(a HUGEINT, b HUGEINT) AS {DIVIDE}(CAST(a AS VARCHAR), CAST(b AS VARCHAR))",
    f"(a {_NUMERIC}, b {_NUMERIC}) AS {DIVIDE}(CAST(a AS VARCHAR), CAST(b AS VARCHAR))",
    f"(a FLOAT, b FLOAT) AS {S}.{FLOAT_DIVIDE}(a, b)",
    f"(a DOUBLE, b DOUBLE) AS {S}.{FLOAT_DIVIDE}(a, b)",
    # A real with anything but a real is a double precision in PostgreSQL.
    *(
        f"({left}, {right}) AS {S}.{FLOAT_DIVIDE}(CAST(a AS DOUBLE), CAST(b AS DOUBLE))"
        for other in ("SMALLINT", "INTEGER", "BIGINT", "HUGEINT", _NUMERIC)
        for left, right in (("a FLOAT", f"b {other}"), (f"a {other}", "b FLOAT"))
    ),
    "(a, b) AS a / b",
)


#: ::numeric of a value whose type DuckDB binds: integers exactly with scale 0, floats with
#: their 15 (6) significant digits, text as numeric input, numerics as they are.
_TO_NUMERIC = (
    "(x SMALLINT) AS CAST(x AS DECIMAL(5, 0))",
    "(x INTEGER) AS CAST(x AS DECIMAL(10, 0))",
    "(x BIGINT) AS CAST(x AS DECIMAL(19, 0))",
    "(x HUGEINT) AS CAST(x AS DECIMAL(38, 0))",
    f"(x {_NUMERIC}) AS x",
    f"(x FLOAT) AS {FLOAT_NUMERIC}(x, 6)",
    f"(x DOUBLE) AS {FLOAT_NUMERIC}(x, 15)",
    f"(x) AS {TEXT_NUMERIC}(CAST(x AS VARCHAR))",
)


MACRO_NAMES = frozenset({*_FLOAT_MACROS, DIVIDE_ANY, NUMERIC_OF})


def arithmetic_macro_statements() -> list[str]:
    """CREATE MACRO statements (after the engine has its functions: numeric_udfs)."""
    statements = [f"CREATE MACRO {S}.{name} {body}" for name, body in _FLOAT_MACROS.items()]
    statements.append(f"CREATE MACRO {S}.{DIVIDE_ANY} {', '.join(_DIVISION)}")
    statements.append(f"CREATE MACRO {S}.{NUMERIC_OF} {', '.join(_TO_NUMERIC)}")
    return statements


def arithmetic_call(name: str, *args: exp.Expression) -> exp.Expression:
    """A call of one of the macros here."""
    return macro_call(name, *args)


__all__ = [
    "DIVIDE",
    "DIVIDE_ANY",
    "FLOAT_ADD",
    "FLOAT_DIVIDE",
    "FLOAT_MULTIPLY",
    "FLOAT_POWER",
    "FLOAT_SQRT",
    "FLOAT_SUBTRACT",
    "MACRO_NAMES",
    "NUMERIC_OF",
    "POWER",
    "arithmetic_call",
    "arithmetic_macro_statements",
]
