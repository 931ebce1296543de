"""PostgreSQL 15's types of the expressions a parameter (``$1``) can stand beside: what
``proxy.parameter_types`` infers an undeclared parameter's type from. Pure functions of
type OIDs and syntax-tree classes; no I/O.

The rules are PostgreSQL's (parse_oper.c, parse_coerce.c, pg_proc), for the types and
functions a DP query can use, each checked against a real PostgreSQL 15's
ParameterDescription (tests/proxy/test_parameter_types.py):

- a literal number is int4, else int8, else numeric (``1.5``, ``1e3``: numeric); a quoted
  string and NULL are of unknown type, as a parameter is;
- an operator between a parameter and an operand of type T takes the parameter as T when
  an operator of (T, T) exists (``cost > $1``: float8; ``visit_date - $1``: date), except
  that a varchar operand is compared as text (varchar has no operators of its own);
- IN lists, CASE branches, COALESCE, GREATEST, LEAST and NULLIF take the common type of
  their typed members (int4 and numeric: numeric; a varchar column: varchar), else text;
- functions of a fixed signature fix their arguments (``width_bucket``'s count: int4).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sqlglot import exp

from proxy.catalog.qualified_types import unqualified_type
from proxy.parameter_arrays import ARRAY_OF, OID_ARRAY_SQL
from proxy.protocol import values as v
from rewriter.catalog import Catalog, ColumnInfo, ColumnType

#: Numeric types, narrowest first: an operation on two of them is of the wider one.
_NUMBER_RANK = {v.INT2: 0, v.INT4: 1, v.INT8: 2, v.NUMERIC: 3, v.FLOAT4: 4, v.FLOAT8: 5}
INTEGERS = frozenset({v.INT2, v.INT4, v.INT8})
STRINGS = frozenset({v.TEXT, v.VARCHAR, v.BPCHAR, v.NAME})
TIMES = frozenset({v.DATE, v.TIMESTAMP, v.TIMESTAMPTZ})
_INT4_MAX = 2**31 - 1
_INT8_MAX = 2**63 - 1

#: A cast's target type -> its OID (casts of a parameter declare its type by it).
CAST_OIDS: Mapping[exp.DType, int] = {
    exp.DataType.Type.SMALLINT: v.INT2,
    exp.DataType.Type.INT: v.INT4,
    exp.DataType.Type.BIGINT: v.INT8,
    exp.DataType.Type.FLOAT: v.FLOAT4,
    exp.DataType.Type.DOUBLE: v.FLOAT8,
    exp.DataType.Type.DECIMAL: v.NUMERIC,
    exp.DataType.Type.BOOLEAN: v.BOOL,
    exp.DataType.Type.TEXT: v.TEXT,
    exp.DataType.Type.VARCHAR: v.VARCHAR,
    exp.DataType.Type.CHAR: v.BPCHAR,
    exp.DataType.Type.BPCHAR: v.BPCHAR,
    exp.DataType.Type.DATE: v.DATE,
    exp.DataType.Type.TIMESTAMP: v.TIMESTAMP,
    exp.DataType.Type.TIMESTAMPTZ: v.TIMESTAMPTZ,
    exp.DataType.Type.UUID: v.UUID,
    exp.DataType.Type.INTERVAL: v.INTERVAL,
}


def cast_oid(to: exp.DataType) -> int | None:
    """The OID of a cast's target type: ``int``, ``date``…, or an array of one of those
    that dpproxy takes array values of (``$1::int[]``: int4[]); None for another.
    ``$1::pg_catalog.int4`` (asyncpg's copy_from_query) is ``$1::int4``."""
    to = unqualified_type(to)
    if to.is_type(exp.DataType.Type.ARRAY):
        element = to.expressions[0] if len(to.expressions) == 1 else None
        if not isinstance(element, exp.DataType) or element.is_type(exp.DataType.Type.ARRAY):
            return None
        if to.sql(dialect="postgres").lower() == OID_ARRAY_SQL:  # $1::oid[] (asyncpg's lookup)
            return ARRAY_OF[v.OID]
        of = CAST_OIDS.get(element.this)
        return None if of is None else ARRAY_OF.get(of)
    return CAST_OIDS.get(to.this)


#: The integer types by the decimal digits ``ColumnInfo.digits`` gives them (smallint 5,
#: integer 10, bigint 19; DuckDB's tinyint 3).
_INTEGER_BY_DIGITS = {3: v.INT2, 5: v.INT2, 10: v.INT4, 19: v.INT8}
_COLUMN_OIDS = {
    ColumnType.FLOAT: v.FLOAT8,
    ColumnType.DECIMAL: v.NUMERIC,
    ColumnType.TEXT: v.TEXT,
    ColumnType.DATE: v.DATE,
    ColumnType.BOOLEAN: v.BOOL,
}

ColumnOids = Mapping[str, Mapping[str, int | None]]
"""table (lower case) -> column (lower case) -> its type's OID (None: not one a
parameter is compared as)."""


def column_oid(info: ColumnInfo) -> int | None:
    """The type OID a parameter compared with this column takes: the engine's declared
    type as far as the catalog tells it (an integer column's width from its digits, else
    bigint; a
    timestamp with time zone from ``zoned``); text for every text column, as dpproxy
    describes text result columns (PostgreSQL says varchar only in an IN list of a
    varchar column); None for a type dpproxy does not read (``ColumnType.OTHER``)."""
    if info.type is ColumnType.INTEGER:
        digits = info.digits
        if digits is None:  # not told: bigint, as the catalog shows such a column
            return v.INT8
        return _INTEGER_BY_DIGITS.get(digits[0], v.NUMERIC)
    if info.type is ColumnType.TIMESTAMP:
        return v.TIMESTAMPTZ if info.zoned else v.TIMESTAMP
    return _COLUMN_OIDS.get(info.type)


def catalog_column_oids(catalog: Catalog) -> dict[str, dict[str, int | None]]:
    """Every column of the analyst's tables with its parameter type (``column_oid``)."""
    return {
        key: {name: column_oid(info) for name, info in table.columns.items()}
        for key, table in catalog.tables.items()
    }


def number_literal(text: str) -> int:
    """The type PostgreSQL gives a numeric literal: int4, int8, else numeric."""
    if text.isdigit():
        number = int(text)
        if number <= _INT4_MAX:
            return v.INT4
        return v.INT8 if number <= _INT8_MAX else v.NUMERIC
    return v.NUMERIC


def compared_as(other: int) -> int:
    """A parameter's type beside an operand of type ``other`` in a comparison."""
    return v.TEXT if other == v.VARCHAR else other


def common_type(types: Iterable[int]) -> int | None:
    """The type PostgreSQL resolves members of an IN list, CASE, COALESCE... to
    (select_common_type), None when they have none dpproxy can tell."""
    found = list(dict.fromkeys(types))
    if not found:
        return None
    if len(found) == 1:
        return found[0]
    if all(t in _NUMBER_RANK for t in found):
        return max(found, key=_NUMBER_RANK.__getitem__)
    if all(t in STRINGS for t in found):
        return v.TEXT
    if all(t in TIMES for t in found):
        return v.TIMESTAMPTZ if v.TIMESTAMPTZ in found else v.TIMESTAMP
    return None


def operand_type(operation: type[exp.Expr], other: int) -> int | None:
    """A parameter's type as the other operand of ``other`` in an arithmetic operation:
    ``other`` where PostgreSQL has the operator of (other, other), else None (``date +
    $1`` is ambiguous there; ``date - $1`` is date - date)."""
    if operation is exp.DPipe:
        return v.TEXT
    if other in _NUMBER_RANK:
        return other
    if other in TIMES or other == v.INTERVAL:
        return other if operation is exp.Sub or other == v.INTERVAL else None
    return None


def arithmetic_result(operation: type[exp.Expr], left: int, right: int) -> int | None:
    """The type of ``left <operation> right`` (None: not one dpproxy tells)."""
    if operation is exp.DPipe:
        return v.TEXT
    if left in _NUMBER_RANK and right in _NUMBER_RANK:
        return max(left, right, key=_NUMBER_RANK.__getitem__)
    if operation is exp.Sub and left == right == v.DATE:
        return v.INT4
    if operation is exp.Sub and left == right and left in TIMES:
        return v.INTERVAL
    if left == v.DATE and right in INTEGERS and operation in (exp.Add, exp.Sub):
        return v.DATE
    if left in INTEGERS and right == v.DATE and operation is exp.Add:
        return v.DATE
    if v.INTERVAL in (left, right) and operation in (exp.Add, exp.Sub):
        other = right if left == v.INTERVAL else left
        if other == v.DATE:
            return v.TIMESTAMP
        return other if other in TIMES or other == v.INTERVAL else None
    return None


def aggregate_result(function: exp.Expr, argument: int | None) -> int | None:
    """The type of an aggregate of an argument of type ``argument``."""
    if isinstance(function, exp.Count):
        return v.INT8
    if argument is None:
        return None
    if isinstance(function, (exp.Min, exp.Max, exp.AnyValue)):
        return argument
    if isinstance(function, exp.Sum):
        if argument in (v.INT2, v.INT4):
            return v.INT8
        return v.NUMERIC if argument == v.INT8 else argument
    if isinstance(function, (exp.Avg, exp.Stddev, exp.StddevSamp, exp.StddevPop)):
        return v.FLOAT8 if argument in (v.FLOAT4, v.FLOAT8) else v.NUMERIC
    if isinstance(function, (exp.Variance, exp.VariancePop)):
        return v.FLOAT8 if argument in (v.FLOAT4, v.FLOAT8) else v.NUMERIC
    return None


def math_result(function: exp.Expr, argument: int | None) -> int | None:
    """The type of abs, sign, ceil, floor, round, trunc, sqrt, ln, log, exp, power of an
    argument of type ``argument``: abs keeps it; the others are numeric of a numeric,
    else double precision (round(integer) is round(double precision) there)."""
    if argument is None or argument not in _NUMBER_RANK:
        return None
    if isinstance(function, exp.Abs):
        return argument
    if isinstance(function, (exp.Round, exp.Trunc)) and function.args.get("decimals"):
        return v.NUMERIC
    return v.NUMERIC if argument == v.NUMERIC else v.FLOAT8


def truncated(argument: int | None) -> int | None:
    """date_trunc's type: a date is truncated as a timestamp with time zone."""
    if argument == v.DATE:
        return v.TIMESTAMPTZ
    return argument if argument in (v.TIMESTAMP, v.TIMESTAMPTZ, v.INTERVAL) else None
