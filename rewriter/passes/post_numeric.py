"""Part of pass 7 (post_process): casts of released values to ``numeric``, as PostgreSQL
computes them.

Post-processing runs in DuckDB, whose ``NUMERIC`` without a precision is
``DECIMAL(18, 3)``: ``AVG(x)::numeric`` kept 3 decimals, ``round(x::numeric, 6)`` then
rounded to 3 (silently wrong), and ``(COUNT(*) * 1e20)::numeric`` failed. PostgreSQL's
``numeric`` holds any number of digits, and a double becomes its decimal digits.
Here a cast to ``numeric`` reads the value's decimal text (``CAST(CAST(x AS VARCHAR) AS
DECIMAL(…))``: DuckDB writes a double's shortest round-trip digits, an integer's exact
ones), so that rounding afterwards rounds the decimal digits, halves away from zero, as
PostgreSQL does (``round(1.005::numeric, 2)`` is 1.01, not the 1.00 of the binary value):

- ``numeric(p, s)`` / ``numeric(p)``: ``DECIMAL(p, s)`` (precision 1 to 38, DuckDB's
  largest; 0 ≤ s ≤ p), read at 12 decimals at least first; a value that does not fit fails,
  as on PostgreSQL;
- ``numeric`` of a released integer column or an integer literal: ``DECIMAL(38, 0)``;
- ``numeric`` of anything else: ``DECIMAL(38, 12)``, 12 decimals and values below 10^26
  (PostgreSQL keeps 15 significant digits of a double and shows no trailing zeros; a
  digit beyond the 12th decimal is rounded there first, and a product of such casts holds
  at most 38 digits).

Other types with a length or precision (``varchar(3)``, ``timestamp(0)``) are refused
before the charge: DuckDB ignores a varchar's length, where PostgreSQL cuts the text.
"""

from __future__ import annotations

from collections.abc import Collection

from sqlglot import exp

from rewriter.errors import Rejected

#: DuckDB's largest DECIMAL precision.
MAX_PRECISION = 38
#: Decimals of ``numeric`` without a precision over a value that is not an integer.
SCALE = 12
#: ``exp.Cast.meta``: a cast :func:`numeric_casts` wrote.
_WRITTEN = "dpproxy_numeric"


def check_type_parameter(node: exp.DataTypeParam, where: str) -> None:
    """A precision in a post-processing cast: only ``numeric(p[, s])`` within DuckDB's
    DECIMAL. Rejected otherwise, before the charge."""
    written = node.parent
    if not isinstance(written, exp.DataType):
        raise Rejected(f"{node.sql(dialect='postgres')} is not allowed in {where}")
    shown = written.sql(dialect="postgres")
    if not written.is_type(exp.DataType.Type.DECIMAL):
        raise Rejected(
            f"a cast to {shown} (a type with a length or precision) is not supported in {where}",
            hint="cast to text (x::text) and cut it with substring(x::text, 1, n), or cast to "
            "the type without its length",
        )
    precision, scale = _parameters(written)
    if not 1 <= precision <= MAX_PRECISION or not 0 <= scale <= precision:
        raise Rejected(
            f"a cast to {shown} is not supported in {where}: dpproxy computes numeric(p, s) "
            f"with a precision p from 1 to {MAX_PRECISION} and a scale s from 0 to p",
            sqlstate="22023",
            hint=f"write numeric({MAX_PRECISION}, {min(max(scale, 0), MAX_PRECISION)}) or "
            "round(x::numeric, s)",
        )


def numeric_casts(node: exp.Expr, integers: Collection[str]) -> exp.Expr:
    """``node`` (changed in place) with each cast to numeric read from the value's decimal
    text; ``integers``: the released columns that hold integers."""

    def replace(sub: exp.Expr) -> exp.Expr:
        if not isinstance(sub, exp.Cast) or not sub.to.is_type(exp.DataType.Type.DECIMAL):
            return sub
        if sub.meta.get(_WRITTEN):
            return sub  # one this function wrote (transform visits what it returns)
        operand = sub.this.transform(replace, copy=False)  # casts inside this one too
        if sub.to.expressions:
            precision, scale = _parameters(sub.to)
        elif _integer(operand, integers):
            precision, scale = MAX_PRECISION, 0
        else:
            precision, scale = MAX_PRECISION, SCALE
        text = exp.cast(operand, exp.DataType.Type.VARCHAR, copy=False)
        # Read at SCALE decimals at least, then rounded to the scale asked for: DuckDB
        # reads '3e-05' into DECIMAL(38, 12) but not into DECIMAL(4, 4).
        read = exp.cast(text, _decimal(MAX_PRECISION, max(scale, SCALE)), copy=False)
        read.meta[_WRITTEN] = True
        if (precision, scale) == (MAX_PRECISION, max(scale, SCALE)):
            return read
        # exp.Cast, not exp.cast: that keeps a value already of type DECIMAL as it is.
        made = exp.Cast(this=read, to=_decimal(precision, scale))
        made.meta[_WRITTEN] = True
        return made

    return node.transform(replace, copy=False)


def _parameters(written: exp.DataType) -> tuple[int, int]:
    values = []
    for parameter in written.expressions:
        literal = parameter.this if isinstance(parameter, exp.DataTypeParam) else parameter
        if not isinstance(literal, exp.Literal) or literal.is_string:
            raise Rejected(
                f"the precision of {written.sql(dialect='postgres')} must be whole numbers",
                sqlstate="22023",
            )
        try:
            values.append(int(literal.this))
        except ValueError:
            raise Rejected(
                f"the precision of {written.sql(dialect='postgres')} must be whole numbers",
                sqlstate="22023",
            ) from None
    if len(values) == 1:
        return values[0], 0
    if len(values) == 2:
        return values[0], values[1]
    raise Rejected(
        f"{written.sql(dialect='postgres')} takes a precision and a scale at most",
        sqlstate="22023",
    )


def _integer(node: exp.Expr, integers: Collection[str]) -> bool:
    while isinstance(node, exp.Paren | exp.Neg):
        node = node.this
    if isinstance(node, exp.Column):  # the source's, qualified or not (released_source)
        return node.name.lower() in integers
    return isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit()


def _decimal(precision: int, scale: int) -> exp.DataType:
    return exp.DataType(
        this=exp.DataType.Type.DECIMAL,
        expressions=[
            exp.DataTypeParam(this=exp.Literal.number(precision)),
            exp.DataTypeParam(this=exp.Literal.number(scale)),
        ],
    )
