"""Part of pass 7 (post_process): ``round``, ``floor``, ``ceil`` and ``sign`` of released
values, in PostgreSQL 15's types and with its rounding.

PostgreSQL has each for ``double precision`` and for ``numeric``, and reads an integer as
a double (``round(COUNT(*))`` is a double). ``round`` of a double is C's ``rint``, halves
to even (``round(2.5::float8)`` is 2), and of a numeric halves away from zero (``round(2.5)``
is 3); DuckDB's ``ROUND`` rounds both away from zero, and keeps an integer's type.
``sign`` of a double is a double, of a numeric a numeric (DuckDB's is a TINYINT).

``round(x, n)`` is PostgreSQL's ``round(numeric, integer)``, a numeric of n decimals
(``round(20.7, 2)`` is 20.70): of an integer or a numeric as it is, of a double read from
its decimal digits as a cast to numeric reads them (``post_numeric``). PostgreSQL has no
``round(double precision, integer)``: the double is where dpproxy releases a double and
PostgreSQL computes a numeric (an average of integers, a division of counts), rounded as
PostgreSQL rounds that numeric. The decimals written are at most 12 (``post_numeric.SCALE``),
so that every value below 10^26 fits.

A value whose type is not known (``Kind.UNKNOWN``) is left to DuckDB, as before.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.passes.post_kinds import Kind
from rewriter.passes.post_numeric import SCALE, numeric_casts

ROUNDING = (exp.Round, exp.Floor, exp.Ceil, exp.Sign)
Rounding = exp.Round | exp.Floor | exp.Ceil | exp.Sign


def rounding_kind(node: Rounding, argument: Kind) -> Kind:
    """The type PostgreSQL gives ``node`` over a value of kind ``argument``."""
    if argument is Kind.UNKNOWN:
        return Kind.UNKNOWN
    if node.args.get("decimals") is not None:
        return Kind.NUMERIC if places(node) is not None else Kind.UNKNOWN
    return Kind.NUMERIC if argument is Kind.NUMERIC else Kind.DOUBLE


def places(node: exp.Expr) -> int | None:
    """The n of ``round(x, n)`` when it is a constant whole number, else None."""
    decimals = node.args.get("decimals") if isinstance(node, exp.Round) else None
    if decimals is None:
        return None
    negated = isinstance(decimals, exp.Neg)
    literal = decimals.this if negated else decimals
    if not isinstance(literal, exp.Literal) or literal.is_string or not literal.is_int:
        return None
    value = int(literal.this)
    return -value if negated else value


def computed(node: Rounding, argument: Kind) -> bool:
    """Whether :func:`rounded` computes ``node`` over a value of kind ``argument``: not
    of an unknown type, nor ``round(x, n)`` with an n that is not a constant (left to
    DuckDB)."""
    if argument is Kind.UNKNOWN:
        return False
    return node.args.get("decimals") is None or places(node) is not None


def rounded(
    node: Rounding, value: exp.Expr, argument: Kind, *, halves_even: bool = True
) -> exp.Expr:
    """``node`` over ``value`` (its argument, written) as PostgreSQL computes it over a
    value of kind ``argument`` (:func:`computed`). ``halves_even``: ``round`` of a double
    is ``rint``; False where PostgreSQL's value is a numeric that dpproxy computes as a
    double (a division), rounded halves away from zero."""
    if not computed(node, argument):
        raise ValueError(f"{node.key} of a value of kind {argument.value} is DuckDB's")
    n = places(node)
    if n is not None:
        # AVG over released rows is a numeric in PostgreSQL and a DOUBLE in DuckDB (as is
        # arithmetic on it): read from its decimal digits, as a double is.
        averaged = argument is Kind.DOUBLE or node.this.find(exp.Avg) is not None
        return _round_places(value, Kind.DOUBLE if averaged else argument, n)
    if argument is Kind.NULL:
        return _typed(exp.Null(), "DOUBLE")
    if argument is Kind.NUMERIC:
        # + 0::DECIMAL(1, 0): a HUGEINT (SUM of bigints) becomes a DECIMAL, whose FLOOR,
        # CEIL and ROUND DuckDB keeps a DECIMAL (of a HUGEINT, a DOUBLE).
        numeric = exp.Add(
            this=_paren(value), expression=_typed(exp.Literal.number(0), "DECIMAL(1, 0)")
        )
        if isinstance(node, exp.Sign):
            return _typed(exp.func("SIGN", value), "DECIMAL(1, 0)")
        return exp.func(_NAMES[type(node)], numeric)
    double = _typed(value, "DOUBLE")
    if isinstance(node, exp.Sign):
        return _typed(exp.func("SIGN", double), "DOUBLE")
    if argument is Kind.INTEGER:
        return double  # a whole number already: PostgreSQL's round(float8) of it
    if isinstance(node, exp.Round) and halves_even:
        return exp.func("ROUND_EVEN", double, exp.Literal.number(0))  # rint()
    return exp.func(_NAMES[type(node)], double)


_NAMES: dict[type[exp.Expr], str] = {exp.Round: "ROUND", exp.Floor: "FLOOR", exp.Ceil: "CEIL"}


def _round_places(value: exp.Expr, argument: Kind, n: int) -> exp.Expr:
    """round(numeric, n): halves away from zero, with n decimals (PostgreSQL writes them
    all: ``round(2.5, 3)`` is 2.500) where they fit below 10^26 (a bigint's: below 2^63)."""
    n = min(max(n, -_DIGITS), _DIGITS)  # beyond, a value below 10^38 is what it is, or 0
    written = exp.Neg(this=exp.Literal.number(-n)) if n < 0 else exp.Literal.number(n)
    if argument is Kind.NULL:
        return _typed(exp.Null(), f"DECIMAL(38, {min(max(n, 0), SCALE)})")
    if argument is Kind.INTEGER:
        scale = min(max(n, 0), _BIGINT_DIGITS)
        return _typed(
            exp.func("ROUND", _typed(value, "DECIMAL(38, 0)"), written), f"DECIMAL(38, {scale})"
        )
    if argument is Kind.DOUBLE:  # read from its decimal digits, at SCALE decimals
        numeric = numeric_casts(exp.Cast(this=value, to=exp.DataType.build("DECIMAL")), ())
        return _typed(exp.func("ROUND", numeric, written), f"DECIMAL(38, {min(max(n, 0), SCALE)})")
    numeric = exp.Add(this=_paren(value), expression=_typed(exp.Literal.number(0), "DECIMAL(1, 0)"))
    made = exp.func("ROUND", numeric, written)
    # DuckDB keeps a scale below n (round(2.5, 3) is 2.5): cast to n decimals, unless n is
    # above SCALE, which a numeric of many integer digits might not fit.
    return made if n > SCALE else _typed(made, f"DECIMAL(38, {max(n, 0)})")


#: The largest number of digits of a DECIMAL, and of a bigint.
_DIGITS = 38
_BIGINT_DIGITS = 19


def _typed(value: exp.Expr, to: str) -> exp.Expr:
    return exp.Cast(this=value, to=exp.DataType.build(to, dialect="duckdb"))


def _paren(value: exp.Expr) -> exp.Expr:
    return (
        value if isinstance(value, exp.Column | exp.Literal | exp.Paren) else exp.Paren(this=value)
    )
