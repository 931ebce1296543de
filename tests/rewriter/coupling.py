"""A test hook for the random choice of groups: the bounded query with each unit's groups
taken in the order of their keys (ascending, NULL last) instead of a random draw.

Which groups a unit keeps (``rewriter.passes.bound_per_unit``: at most max_groups, while
their rows fit its row budget) depends on a random order of its groups, drawn
independently of the data. Tests that compare exact totals with an independent Python
computation, or the totals of two neighbouring databases, fix that order so that both
sides make the same choice (for neighbours, the usual coupling: every other unit draws the
same order in both worlds). The randomness itself is tested on the real SQL
(tests/rewriter/test_grouping.py). No analyst setting reaches this: it edits SQL text.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from rewriter.passes.bound_per_unit import RANDOM_COLUMN, ROWS_SO_FAR_COLUMN, UNIT_ALIAS
from rewriter.passes.measurements import MeasureKind
from rewriter.plan import Measurement, Plan


def in_key_order(made: Plan, sql: str | None = None) -> str:
    """``made.sql`` (or ``sql``, the same query for another schema) with the groups of each
    unit ranked by their keys rather than at random."""
    tree = sqlglot.parse_one(made.sql if sql is None else sql, read=made.dialect)
    replaced = 0
    for window in tree.find_all(exp.Window):
        order = window.args.get("order")
        if order is None or [o.this.name for o in order.expressions] != [RANDOM_COLUMN]:
            continue
        window.set(
            "order",
            exp.Order(
                expressions=[
                    exp.Ordered(
                        this=exp.column(k.name, table=UNIT_ALIAS, quoted=True), nulls_first=False
                    )
                    for k in made.keys
                ]
            ),
        )
        replaced += 1
    # The rank, and the running count of rows unless a unit keeps one group.
    expected = 2 if ROWS_SO_FAR_COLUMN in tree.sql() else 1
    if made.keys and replaced != expected:
        raise ValueError(f"expected {expected} windows over {RANDOM_COLUMN}, found {replaced}")
    return tree.sql(dialect=made.dialect)


def sensitivity(made: Plan, measurement: Measurement) -> int:
    """The L1 sensitivity of a count or sum measurement over all groups: one unit's
    partials of all its kept groups add up to at most ``unit_bound`` (rows are budgeted
    across groups); a count of units changes by 1 in each of ``max_groups_per_unit``."""
    spec = measurement.spec
    if spec.kind is MeasureKind.UNITS:
        return made.max_groups_per_unit * spec.unit_bound
    return spec.unit_bound
