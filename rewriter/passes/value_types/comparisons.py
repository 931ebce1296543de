"""Values compared, or chosen among, as both engines convert them whatever the data.

DuckDB would cast a text column to a number to compare it with ``5``, and fail on the
first non-numeric value; so only values of one kind are compared or chosen among (a
quoted literal is read as a literal of the other value's kind, ``literals``), and a date
meets a timestamp only written as a literal (DuckDB converts the date), or a timestamp
literal becomes the date that compares alike (``dated``). Numbers are
spelled so that DuckDB compares them as DOUBLE (``numbers_meet``: ``i > (0.5)`` would
convert each ``i`` to a DECIMAL it may not fit), and a DECIMAL column meets another
column only when one DECIMAL holds both (``decimal_digits``). A timestamp with time zone
is compared as an instant, with literals read as PostgreSQL reads them in the session's
TimeZone (``zoned``).
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.errors import Rejected
from rewriter.passes.value_types.dated import dated
from rewriter.passes.value_types.decimal_digits import one_decimal
from rewriter.passes.value_types.kinds import (
    DATE,
    LITERAL_TEXT,
    NULL,
    NUMBER,
    TEXT,
    TIME,
    ZONED,
    TypeMemo,
)
from rewriter.passes.value_types.literal_input import NumberType, common_type, number_type
from rewriter.passes.value_types.literals import date_literal, number_in_range, typed_literal
from rewriter.passes.value_types.number_range import numbers_in_range
from rewriter.passes.value_types.number_types import refuse_mismatch, respell
from rewriter.passes.value_types.other_values import refuse_other_pairs
from rewriter.passes.value_types.zoned import compare_zoned, refuse_order
from rewriter.scope import Scope


def compare(
    node: exp.Expr,
    operands: list[exp.Expr],
    each: list[str],
    scope: Scope,
    where: str,
    *,
    memo: TypeMemo,
    raw: bool,
) -> None:
    """Raise Rejected if ``operands`` of the comparison ``node`` (of kinds ``each``) could
    be converted row by row and fail on some values. Quoted literals compared with a
    number, date, timestamp or boolean are replaced by literals of that type, and numbers
    respelled (``numbers_meet``), in place."""
    operands = list(operands)
    kinds = set(each) - {NULL}
    if ZONED in kinds:
        compare_zoned(node, operands, each, where)
        return
    refuse_other_pairs(node, operands, each, scope, where, compared=True)  # iv = json_col
    if LITERAL_TEXT in kinds and len(kinds - {LITERAL_TEXT}) == 1:
        (other,) = kinds - {LITERAL_TEXT}
        if other == TEXT:
            return
        for index, kind in enumerate(each):
            if kind == LITERAL_TEXT:
                numbers = read_as(node, operands, each, index, scope) if other == NUMBER else ()
                typed = typed_literal(operands[index], other, node, where, numbers or (None,))
                if raw and isinstance(typed, exp.Literal):
                    number_in_range(typed, where)
                operands[index] = operands[index].replace(typed)
        kinds = {other}
    if kinds == {NUMBER}:
        _one_decimal_column(node, operands, scope, where, memo)
        numbers_meet(node, operands, scope, where, memo, exact=raw, cleaned=False)
    if len(kinds) <= 1:
        return
    if kinds == {DATE, TIME}:
        if all(k != DATE or date_literal(o) for o, k in zip(operands, each, strict=True)):
            return  # a date written as a literal (within the years 1 to 9999), and timestamps
        if dated(node, operands, each):
            return  # timestamp literals as the dates that compare alike
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where} compares values of different types "
            "(date, timestamp): the database converts each date to a timestamp, which fails "
            "on dates beyond the year 294276, and the error would reveal them",
            hint="compare a date with a date (visit_date >= DATE '2024-03-01', or DATE "
            "'2024-03-01' - 30: a date ± days is a date, ± an INTERVAL a timestamp), or a "
            "timestamp with a date written as DATE '2024-03-01'",
        )
    raise Rejected(
        f"{node.sql(dialect='postgres')} in {where} compares values of different types "
        f"({', '.join(sorted(kinds))}); the database would convert them row by row and could "
        "fail on some values",
        hint="compare a text column with a quoted text value, e.g. department = 'Cardiology'",
    )


def read_as(
    node: exp.Expr, operands: list[exp.Expr], each: list[str], index: int, scope: Scope
) -> list[NumberType | None]:
    """The number types PostgreSQL reads the quoted literal ``operands[index]`` as (None
    where dpproxy cannot tell): that of the other side of a comparison, the common type of
    an IN list's other values; BETWEEN compares its value with each bound, and
    ``CASE x WHEN w`` ``x`` with each ``w``, one by one."""
    numbers = [i for i, kind in enumerate(each) if kind == NUMBER]
    if isinstance(node, (exp.Between, exp.Case)):
        if index != 0:
            return [number_type(operands[0], scope)] if 0 in numbers else []
        if isinstance(node, exp.Case):
            return []  # CASE 'x' WHEN …: PostgreSQL reads the 'x' as text
        return [number_type(operands[i], scope) for i in numbers]
    return [common_type([number_type(operands[i], scope) for i in numbers])]


def common(
    node: exp.Expr,
    values: list[exp.Expr],
    each: list[str],
    scope: Scope,
    where: str,
    *,
    memo: TypeMemo,
    raw: bool = True,
) -> str:
    """The kind of a choice among ``values``, whose kinds (``each``) the caller found
    (finding them again here would take time exponential in the nesting of CASEs)."""
    kinds = set(each) - {NULL}
    if ZONED not in kinds:  # COALESCE(iv, json_col): converted row by row too
        refuse_other_pairs(node, values, each, scope, where, compared=False)
    if len(kinds - {LITERAL_TEXT}) > 1 or (LITERAL_TEXT in kinds and kinds - {LITERAL_TEXT, TEXT}):
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where} mixes values of different types",
            hint="give every branch the same type",
        )
    kind = next(iter(kinds), NULL)
    if kind == ZONED and isinstance(node, (exp.Greatest, exp.Least)):
        refuse_order(node, where)
    if kind == NUMBER:
        if raw:  # inside aggregates columns are cleaned (as DOUBLE or BIGINT) first
            _one_decimal_column(node, values, scope, where, memo)
        # Never kept as written here: a chosen literal would make the whole expression a
        # DECIMAL (COALESCE(i, 0.5) is DECIMAL(11,1)), which a HUGEINT it meets overflows.
        numbers_meet(node, values, scope, where, memo, exact=False, cleaned=not raw)
    return TEXT if kind == LITERAL_TEXT else kind


def _one_decimal_column(
    node: exp.Expr, operands: list[exp.Expr], scope: Scope, where: str, memo: TypeMemo
) -> None:
    """Refuse comparing or choosing between a DECIMAL column and another column, unless
    one DECIMAL holds every value of each (``decimal_digits.one_decimal``): DuckDB would
    cast both to a decimal type that extreme values of either overflow, and PostgreSQL a
    NUMERIC beyond DOUBLE's range to DOUBLE (errors on those rows only)."""
    with_columns = [o for o in operands if memo.has_column(o, scope)]
    if len(with_columns) < 2:
        return
    decimal = any(memo.has_decimal(o, scope) for o in with_columns)
    if decimal and not one_decimal(operands, scope):
        raise Rejected(
            f"{node.sql(dialect='postgres')} in {where} compares a decimal column with "
            "another column; their common type could overflow on extreme values, and the "
            "error would reveal them",
            hint="compare each column with a number, or compute inside SUM/AVG",
        )


def numbers_meet(
    node: exp.Expr,
    operands: list[exp.Expr],
    scope: Scope,
    where: str,
    memo: TypeMemo,
    *,
    exact: bool,
    cleaned: bool,
) -> None:
    """Numbers compared or chosen among (``operands``) as both engines convert them
    whatever the data.

    Number literals met with a DECIMAL column, and fractions met with any number, are
    spelled with an exponent (``5e-1``), also within a constant (``(0.5)``, ``-(-0.5)``,
    ``0.5 * 2``, ``abs(-0.5)``, ``CASE … THEN 0.5 …``): DuckDB then reads them as DOUBLE
    and compares the column as DOUBLE, which never fails. Otherwise it would cast the
    column, or the number, to a DECIMAL wide enough for both, and a HUGEINT or
    DECIMAL(38, …) value, or the number, can overflow it on the first row compared
    (``h > 0.5``, ``i > 0.1111111111111111111111111111111111111 * 1``, ``d > 10`` for a
    DECIMAL(38,37) ``d``): an error that depends on the data. PostgreSQL reads such a
    literal as NUMERIC, exactly as before. Changed in place: a subquery's stand-in keeps
    its identity. A constant that stays of such a type (``CAST(5 AS DECIMAL)``; a
    quotient, ``length('ab')`` or a cast to DOUBLE met with a DECIMAL column, which
    PostgreSQL converts to DOUBLE) is refused (``number_types.refuse_mismatch``).

    ``exact``: raw columns and numbers that one DECIMAL holds exactly
    (``decimal_digits.one_decimal``: TPC-H's ``l_discount BETWEEN 0.05 AND 0.07`` on a
    DECIMAL(15,2)) keep their spelling: DuckDB compares them exactly and can push the
    comparison into the scan. ``cleaned``: the columns are values inside an aggregate,
    cleaned (DOUBLE for FLOAT and DECIMAL)."""
    # Computed constants beyond DOUBLE's (or, in PostgreSQL's IN lists and choices, a real
    # column's) range fail on PostgreSQL whatever the data, after the charge.
    numbers_in_range(node, operands, scope, memo, where, cleaned=cleaned)
    if exact and one_decimal(operands, scope):
        return
    decimal_column = any(memo.has_decimal(o, scope) for o in operands)
    for operand in operands:
        respell(operand, scope, memo, integers=decimal_column)
    refuse_mismatch(
        lambda: f"{node.sql(dialect='postgres')} in {where}",
        [(o, scope) for o in operands],
        memo,
        cleaned=cleaned,
    )
