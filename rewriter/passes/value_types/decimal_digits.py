"""Numbers that one DECIMAL holds exactly.

DuckDB compares or chooses between two DECIMALs (or a DECIMAL and an integer) in a common
DECIMAL type wide enough for both, and fails on the values that do not fit it. When the
declared types of the columns and the digits of the literals all fit one DECIMAL of at
most 38 digits, no value can fail to convert: such numbers keep their spelling, and
DuckDB compares them exactly (and can push the comparison into the scan).
"""

from __future__ import annotations

import decimal

from sqlglot import exp

from rewriter.scope import Scope

#: The widest DECIMAL: DuckDB's common type of two decimals has max(integer digits) +
#: max(decimal places) digits, and fails on the values that do not fit beyond this.
DECIMAL_DIGITS = 38


def one_decimal(operands: list[exp.Expr], scope: Scope) -> bool:
    """Whether ``operands`` (NULL, number literals and raw columns; sums and differences
    of literals) all fit one DECIMAL exactly: then DuckDB's common type of any two of them
    holds both, and no value fails to convert. Measured on DuckDB 1.5 for every integer
    type and 40 decimal types, against 300 literals and each other, extreme values stored.
    A column's digits come from its declared type (``ColumnInfo.digits``); None (unknown,
    HUGEINT, a float, a derived column) answers False."""
    return fit_one_decimal([(o, scope) for o in operands if not isinstance(o, exp.Null)])


def fit_one_decimal(operands: list[tuple[exp.Expr, Scope]]) -> bool:
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
