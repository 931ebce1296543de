"""Casts of numbers that cannot fail, beyond ``casts._SAFE_CAST_TARGETS``.

Inside an aggregate (SUM, AVG, …) a value is computed from cleaned columns: finite,
clamped to their declared bounds, every step within ±2^52 (``rewriter.intervals``). There:

- a cast to ``numeric`` cannot fail (PostgreSQL's numeric holds every such value; DuckDB's
  ``DECIMAL`` is ``DECIMAL(18, 3)``, so ``check_predicate`` writes it ``DECIMAL(38, 12)``,
  which holds them too, to 12 decimals);
- a cast to ``numeric(p, s)`` fails on a value of more than p − s integer digits once
  rounded to s decimals: ``rewriter.intervals`` refuses it unless the value's bounds fit
  (``AVG(length_of_stay::numeric(18, 2))`` of a column within [0, 30]), and p is at most
  38 (DuckDB's largest), s from 0 to p;
- a cast of an integer value to ``bigint``, ``integer`` or ``smallint`` is computed as
  bigint (``bound_per_unit.clean``), which holds it.

On raw values (WHERE, GROUP BY, …) nothing is clamped: a cast to ``bigint`` of an integer
column of a type of at most 19 digits (``smallint``, ``integer``, ``bigint``, DuckDB's
unsigned ones but ``ubigint``) holds every value it can have.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.catalog import ColumnType
from rewriter.passes.value_types.kinds import NULL, NUMBER, TypeMemo
from rewriter.passes.value_types.number_types import INTEGER_T, NULL_T, number_type
from rewriter.scope import Scope

_INTEGER_TARGETS = frozenset(
    {
        exp.DataType.Type.BIGINT,
        exp.DataType.Type.INT,
        exp.DataType.Type.SMALLINT,
        exp.DataType.Type.TINYINT,
    }
)
#: The most digits of an integer column's type that a bigint holds every value of.
_BIGINT_DIGITS = 19


def number_cast_fits(node: exp.Cast, source: str, scope: Scope, *, raw: bool) -> bool:
    """Whether every value of kind ``source`` that ``node`` casts fits its type (see the
    module)."""
    if source not in (NUMBER, NULL):
        return False
    target = node.to.this
    if raw:
        value = node.this.unnest()
        if target != exp.DataType.Type.BIGINT or node.to.expressions:
            return False
        if not isinstance(value, exp.Column):
            return False
        info = scope.info(value)
        digits = info.digits
        return (
            info.type is ColumnType.INTEGER and digits is not None and digits[0] <= _BIGINT_DIGITS
        )
    if target == exp.DataType.Type.DECIMAL:
        return True  # numeric(p, s): the bounds are checked by rewriter.intervals
    if target in _INTEGER_TARGETS and not node.to.expressions:
        whole = number_type(node.this, scope, TypeMemo(), cleaned=True)
        return whole in (INTEGER_T, NULL_T)
    return False
