"""Pass 2b: check the joins and derive the per-person bounds of the joined rows.

Public lookup tables can be joined on any condition: whatever the join multiplies, each
person's partials are clamped after the join. Protected tables can be joined only along
the privacy unit (``visits.patient_id = patients.patient_id``), so that every joined row
still belongs to one person; a person then has at most the product of the tables'
``max_rows_per_unit`` joined rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqlglot import exp

from rewriter.errors import Rejected
from rewriter.passes.check_predicate import check_predicate
from rewriter.passes.check_shape import QueryShape
from rewriter.scope import Source


@dataclass(frozen=True)
class ResolvedJoin:
    source: Source
    kind: str
    on: exp.Expr  # resolved


@dataclass(frozen=True)
class JoinBounds:
    joins: tuple[ResolvedJoin, ...]
    max_rows_per_unit: int
    max_groups_per_unit: int


def check_joins(shape: QueryShape) -> JoinBounds:
    scope = shape.scope
    resolved = tuple(
        ResolvedJoin(j.source, j.kind, check_predicate(j.on, scope, "JOIN … ON"))
        for j in shape.joins
    )
    protected = scope.protected
    linked = {protected[0].alias}
    unit_pairs = [_unit_pair(c, shape) for j in resolved for c in _conjuncts(j.on)]
    changed = True
    while changed:
        changed = False
        for pair in unit_pairs:
            if pair is not None and (pair[0] in linked) != (pair[1] in linked):
                linked |= set(pair)
                changed = True
    unlinked = [s for s in protected if s.alias not in linked]
    if unlinked:
        first = protected[0]
        unit = first.table.privacy_unit
        other = unlinked[0]
        other_unit = other.table.privacy_unit
        raise Rejected(
            f'protected table "{other.table.name}" must be joined on its privacy unit',
            hint=(
                f"join ON {first.reference}.{unit.name if unit else '?'} = "
                f"{other.reference}.{other_unit.name if other_unit else '?'}"
            ),
        )
    rows = math.prod(s.table.policy.max_rows_per_unit for s in protected)
    groups = min(s.table.policy.max_groups_per_unit for s in protected)
    return JoinBounds(resolved, rows, groups)


def _conjuncts(condition: exp.Expr) -> list[exp.Expr]:
    if isinstance(condition, exp.And):
        return _conjuncts(condition.this) + _conjuncts(condition.expression)
    if isinstance(condition, exp.Paren):
        return _conjuncts(condition.this)
    return [condition]


def _unit_pair(condition: exp.Expr, shape: QueryShape) -> tuple[str, str] | None:
    """The two source aliases if ``condition`` equates their privacy units."""
    if not (
        isinstance(condition, exp.EQ)
        and isinstance(condition.this, exp.Column)
        and isinstance(condition.expression, exp.Column)
    ):
        return None
    ends = []
    for column in (condition.this, condition.expression):
        source = next(s for s in shape.scope.sources if s.alias == column.table)
        unit = source.table.privacy_unit
        if unit is None or unit.name != column.name:
            return None
        ends.append(source.alias)
    return (ends[0], ends[1]) if ends[0] != ends[1] else None
