"""Part of pass 7 (post_process): arithmetic and comparisons of a ``real`` with another
type, computed in double precision as PostgreSQL computes them.

PostgreSQL has ``+ - * /`` and the comparisons of two ``real`` values (float4pl…: in
single precision, a ``real``), and of a ``real`` and a ``double precision`` (float48pl…);
beside an integer or a numeric, a ``real`` is read as a double precision value
(``COUNT(*)::real / 3``, ``2.5::real + 1``, ``x::real > 16777217`` are computed in double
precision; the result is a ``double precision``). DuckDB computes ``FLOAT`` op
``INTEGER`` (or ``DECIMAL``) in single precision, a ``FLOAT``: 5124::real / 3 was
1708.0 (float4) where PostgreSQL gives 1708 (float8); 0.1::real = 0.1 was true where
PostgreSQL's is false. Here each such operand is cast to ``DOUBLE`` (the cast PostgreSQL
makes), exact: a real is a double too.

A value is known to be a ``real`` from the SQL (:func:`is_real`): a cast to ``real``
(``float4``), its negation or ``abs``, arithmetic of two reals, ``nullif`` of a real, and
``coalesce``, ``greatest``, ``least`` and ``CASE`` over reals, integers and numerics (a
``real`` in PostgreSQL, a ``FLOAT`` in DuckDB). A column of a DP subquery (a query around
it) is not known to be one: PostgreSQL's double precision is then computed where the
subquery casts it to a double.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.passes.post_functions import kind
from rewriter.passes.post_kinds import ColumnKinds, Kind

#: Arithmetic: computed in double precision unless both operands are reals.
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div)
#: Comparisons: a real compared with a real reads the same in double precision.
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ)
#: What a value of these kinds stays beside a real (coalesce, greatest, CASE): a real.
_WITH_REALS = (Kind.INTEGER, Kind.NUMERIC, Kind.NULL)


def widened_reals(node: exp.Expr, columns: ColumnKinds) -> exp.Expr:
    """``node`` (changed in place; use the result) with each ``real`` operand of
    arithmetic with another type, and of a comparison, cast to ``DOUBLE``."""

    def replace(sub: exp.Expr) -> exp.Expr:
        if isinstance(sub, _ARITHMETIC):
            left, right = is_real(sub.this, columns), is_real(sub.expression, columns)
            if left != right:
                _widen(sub.this if left else sub.expression)
        elif isinstance(sub, _COMPARISONS):
            for operand in (sub.this, sub.expression):
                if is_real(operand, columns):
                    _widen(operand)
        elif isinstance(sub, exp.Between):
            operands = [sub.this, sub.args.get("low"), sub.args.get("high")]
            for operand in operands:
                if isinstance(operand, exp.Expr) and is_real(operand, columns):
                    _widen(operand)
        return sub

    return node.transform(replace, copy=False)


def is_real(node: exp.Expr, columns: ColumnKinds) -> bool:
    """Whether PostgreSQL's type of ``node`` is ``real`` (as far as the SQL shows)."""
    if isinstance(node, exp.Paren | exp.Neg | exp.Abs):
        return is_real(node.this, columns)
    if isinstance(node, exp.Cast | exp.TryCast):
        return node.to.is_type(exp.DataType.Type.FLOAT)
    if isinstance(node, _ARITHMETIC):
        return is_real(node.this, columns) and is_real(node.expression, columns)
    if isinstance(node, exp.Nullif):
        return is_real(node.this, columns)
    if isinstance(node, exp.Coalesce | exp.Greatest | exp.Least):
        return _reals([node.this, *node.expressions], columns)
    if isinstance(node, exp.Case):
        values = [branch.args["true"] for branch in node.args.get("ifs", [])]
        default = node.args.get("default")
        return _reals([*values, *([default] if default is not None else [])], columns)
    return False


def _reals(values: list[exp.Expr], columns: ColumnKinds) -> bool:
    """Values PostgreSQL gives one type: a real if one is and the others are reals,
    integers, numerics or NULL."""
    reals = [is_real(v, columns) for v in values]
    return any(reals) and all(
        real or kind(v, columns) in _WITH_REALS for v, real in zip(values, reals, strict=True)
    )


def _widen(node: exp.Expr) -> None:
    """``node`` replaced in its tree by ``CAST(node AS DOUBLE)`` (the node itself inside:
    the transform goes on into it)."""
    cast = exp.Cast(to=exp.DataType.build("DOUBLE"))
    node.replace(cast)
    cast.set("this", node)
