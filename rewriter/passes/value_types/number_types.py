"""The number type a value has on both engines, and constants respelled as DOUBLE.

A constant compared with, or chosen beside, a column's values is converted by DuckDB to a
common type with them; when that type is a DECIMAL, a value (or the constant) may not fit
it, on some rows only. Fractions spelled with an exponent (``5e-1``) are DOUBLE on DuckDB
(NUMERIC, exactly as before, on PostgreSQL), which every number converts to; a constant
that stays of a type a column would be converted to, or converted to, is refused.
"""

from __future__ import annotations

import contextlib
import decimal
from collections.abc import Callable

from sqlglot import exp

from rewriter.catalog import ColumnType
from rewriter.errors import Rejected
from rewriter.passes.value_types.decimal_digits import fit_one_decimal
from rewriter.passes.value_types.kinds import TypeMemo, chosen
from rewriter.scope import Scope

# The number types of values (``number_type``), narrowest first: an integer, a DECIMAL, a
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


def number_type(node: exp.Expr, scope: Scope, memo: TypeMemo, *, cleaned: bool) -> int:
    """The type a number value has on both engines (see NULL_T …); DATE_T for dates,
    timestamps and intervals, UNKNOWN_T for anything else."""
    entry = memo.numbers.get((id(node), cleaned))
    if entry is not None and entry[0] is node:
        return entry[1]
    found = _find_number_type(node, scope, memo, cleaned=cleaned)
    memo.numbers[(id(node), cleaned)] = (node, found)
    return found


def _find_number_type(node: exp.Expr, scope: Scope, memo: TypeMemo, *, cleaned: bool) -> int:
    def of(child: exp.Expr) -> int:
        return number_type(child, scope, memo, cleaned=cleaned)

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
    if isinstance(node, (exp.Length, exp.StrPosition, exp.Extract, exp.WidthBucket)):
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
        return _wider([of(v) for v in chosen(node)])
    return UNKNOWN_T


def _wider(types: list[int]) -> int:
    return UNKNOWN_T if DATE_T in types else max(types, default=NULL_T)


def respell(node: exp.Expr, scope: Scope, memo: TypeMemo, *, integers: bool) -> None:
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
            if all(number_type(s, scope, memo, cleaned=False) != DATE_T for s in sides):
                stack.extend(sides)
        elif isinstance(part, _CHOICES):
            stack.extend(chosen(part))


def refuse_mismatch(
    written: Callable[[], str],
    operands: list[tuple[exp.Expr, Scope]],
    memo: TypeMemo,
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
        (o, memo.has_column(o, scope), number_type(o, scope, memo, cleaned=cleaned))
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


def numbers_compare_safely(operands: list[tuple[exp.Expr, Scope]]) -> bool:
    """Whether numbers from different scopes (a value and the column of ``IN (SELECT …)``)
    compare without failing on some values: when a DECIMAL column is among them, only if
    all are number literals or columns that one DECIMAL holds
    (``decimal_digits.one_decimal``). Otherwise their fractions are spelled as DOUBLE
    (``comparisons.numbers_meet``; changed in place) and a constant of a type a column
    would be converted to is refused (Rejected)."""
    memo = TypeMemo()
    if any(memo.has_decimal(o, scope) for o, scope in operands):
        return fit_one_decimal(operands)
    for operand, scope in operands:
        respell(operand, scope, memo, integers=False)
    refuse_mismatch(
        lambda: " IN (SELECT ".join(o.sql(dialect="postgres") for o, _ in operands) + " …)",
        operands,
        memo,
        cleaned=False,
    )
    return True
