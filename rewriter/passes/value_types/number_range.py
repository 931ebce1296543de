"""Constants computed from numbers, met with a column's values: within the range both
engines compute them in.

PostgreSQL computes ``1e308 * 10`` as an exact NUMERIC, which the constant check
(``rewriter.passes.constants``) evaluates without fault, and converts it to ``double
precision`` only where it meets a ``double precision`` column, when it plans the query
(22003, whatever the data); DuckDB computes it as a DOUBLE, infinity. So a computed number
met with a column is refused, as a literal beyond that range is
(``literals.number_in_range``), when it or a step of it is beyond DOUBLE's range, or not 0
and below its smallest normal value (``1e-200 * 1e-200``: 0 on DuckDB).

PostgreSQL also converts the numbers of an ``IN`` list (two or more constants) and of a
choice (``COALESCE``, ``GREATEST``, ``LEAST``, ``CASE … THEN``) to the type of a ``real``
column among them, which a number beyond real's range does not fit (``r IN (1, 1e39)``,
22003 when it plans). The catalog does not tell ``real`` from ``double precision`` columns,
so there, beside any such column, numbers must be within real's range.
"""

from __future__ import annotations

import decimal
import sys

from sqlglot import exp

from rewriter.catalog import ColumnType
from rewriter.errors import Rejected
from rewriter.passes.value_types.kinds import TypeMemo, chosen
from rewriter.scope import Scope

_DOUBLE = (decimal.Decimal(sys.float_info.min), decimal.Decimal(sys.float_info.max))
#: real's smallest normal value and its largest (PostgreSQL's float4, DuckDB's FLOAT).
_REAL = (decimal.Decimal("1.1754943508222875e-38"), decimal.Decimal("3.4028234663852886e38"))
#: Enough digits to tell a value from the ranges' ends; exponents far beyond both, and
#: beyond them an infinite value (out of range).
_CONTEXT = decimal.Context(
    prec=60,
    Emin=-999999,
    Emax=999999,
    traps=[decimal.Overflow, decimal.Underflow, decimal.InvalidOperation],
)
_BEYOND = decimal.Decimal("Infinity")
_CHOICES = (exp.Coalesce, exp.Greatest, exp.Least, exp.Case, exp.If)
_NUMBER_CASTS = frozenset(
    {
        exp.DataType.Type.DECIMAL,
        exp.DataType.Type.DOUBLE,
        exp.DataType.Type.FLOAT,
        exp.DataType.Type.INT,
        exp.DataType.Type.BIGINT,
        exp.DataType.Type.SMALLINT,
    }
)


def numbers_in_range(
    node: exp.Expr,
    operands: list[exp.Expr],
    scope: Scope,
    memo: TypeMemo,
    where: str,
    *,
    cleaned: bool,
) -> None:
    """Raise Rejected if a constant among ``operands`` (compared, or chosen among, by
    ``node``), beside a column, is computed beyond DOUBLE's range, or is beyond real's
    range where PostgreSQL would convert it to a ``real`` column's type (not where the
    columns are ``cleaned``, values inside an aggregate: DOUBLE)."""
    columns = [o for o in operands if memo.has_column(o, scope)]
    if not columns:
        return  # constants only: computed as they are, alike on both engines
    constants = [o for o in operands if not memo.has_column(o, scope)]
    for constant in constants:
        if not isinstance(constant.unnest(), exp.Literal):  # literals: number_in_range
            _value(constant, constant, where)
    if cleaned or not _common_type(node, operands, memo, scope):
        return
    if not any(_real(c, scope) for c in columns):
        return
    for constant in constants:
        value = _value(constant, constant, where)
        if value is not None and value != 0 and not _REAL[0] <= abs(value) <= _REAL[1]:
            raise Rejected(
                f"{node.sql(dialect='postgres')} in {where}: "
                f"{constant.sql(dialect='postgres')} is beyond the range of real (about "
                "1.2e-38 to 3.4e38 in size), and PostgreSQL converts it to a real column's "
                "type here, which fails whatever the data",
                hint="compare the column with each number (r = 1 OR r = 1e39), or use "
                "numbers within real's range",
            )


def _common_type(node: exp.Expr, operands: list[exp.Expr], memo: TypeMemo, scope: Scope) -> bool:
    """Whether PostgreSQL converts the constants to one type with a column: a choice's, and
    those of ``x IN (…)`` of a column's value x when two or more (one alone is compared as
    ``x = c``, the values with columns each as ``x = y``)."""
    if isinstance(node, exp.In):
        value, *listed = operands
        alone = [o for o in listed if not memo.has_column(o, scope)]
        return memo.has_column(value, scope) and len(alone) >= 2
    return isinstance(node, _CHOICES)


def _real(node: exp.Expr, scope: Scope) -> bool:
    """Whether ``node`` can be a real column's value (a FLOAT column, possibly ``real``:
    itself, or among the values of a choice)."""
    node = node.unnest()
    if isinstance(node, exp.Column):
        return scope.info(node).type is ColumnType.FLOAT
    if isinstance(node, _CHOICES):
        return any(_real(v, scope) for v in chosen(node))
    return False


def _value(node: exp.Expr, whole: exp.Expr, where: str) -> decimal.Decimal | None:
    """The exact value of the constant ``node`` (a part of ``whole``), None where dpproxy
    does not compute it (a division by 0 the engines compute as NULL, a function);
    Rejected if it, or a step of it, is beyond DOUBLE's range or not 0 and below its
    smallest normal value."""
    try:
        value = _computed(node, whole, where)
    except (decimal.Overflow, decimal.Underflow):
        value = _BEYOND  # its exponent beyond ±999999
    except decimal.InvalidOperation:
        value = None
    if value is not None and value != 0 and not _DOUBLE[0] <= abs(value) <= _DOUBLE[1]:
        raise Rejected(
            f"{whole.sql(dialect='postgres')} in {where} is a number beyond the range of "
            "double precision, or so small it is not 0 there"
            + (
                f" ({node.sql(dialect='postgres')})"
                if node is not whole and node.unnest() is not whole.unnest()
                else ""
            )
            + ": PostgreSQL computes it exactly and fails to convert it to the column's "
            "type, whatever the data, and DuckDB computes another number",
            hint="write the number itself, between 1e-307 and 1e308 in size (or 0)",
        )
    return value


def _computed(node: exp.Expr, whole: exp.Expr, where: str) -> decimal.Decimal | None:
    if isinstance(node, exp.Paren):
        return _value(node.this, whole, where)
    if isinstance(node, exp.Literal):
        value = _CONTEXT.create_decimal(node.this)  # InvalidOperation: not a number
        return value if value.is_finite() else None  # CAST('NaN' AS DOUBLE): as it is
    if isinstance(node, exp.Neg):
        inner = _value(node.this, whole, where)
        return None if inner is None else -inner
    if isinstance(node, exp.Cast) and node.to.this in _NUMBER_CASTS:
        return _value(node.this, whole, where)
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul, exp.Div)):
        left = _value(node.this, whole, where)
        right = _value(node.expression, whole, where)
        if left is None or right is None:
            return None
        if isinstance(node, exp.Add):
            return _CONTEXT.add(left, right)
        if isinstance(node, exp.Sub):
            return _CONTEXT.subtract(left, right)
        if isinstance(node, exp.Mul):
            return _CONTEXT.multiply(left, right)
        return None if right == 0 else _CONTEXT.divide(left, right)
    for child in node.iter_expressions():  # a function of numbers: its parts, each
        _value(child, whole, where)
    return None
