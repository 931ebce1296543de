"""Part of pass 6 (bound_per_unit): compute the per-unit partials before the joins that
only hang off the privacy unit.

In ``lineitem ⋈ orders ⋈ customer ⋈ nation GROUP BY n_name`` with customer as the unit,
customer and nation meet the other tables only through ``o_custkey = c_custkey``, the unit,
and no measurement reads them. The per-unit query then need not join each lineitem row to
them: the partials are summed per unit (and per key of the lower tables) first, over
lineitem ⋈ orders only, and the upper tables are joined to those sums, one row per unit:

    SELECT e.unit_id, n_name AS k0, SUM(e.m0) AS m0, …, RANDOM() AS group_draw, …
    FROM (SELECT o_custkey AS unit_id, SUM(…) AS m0, … FROM lineitem JOIN orders …
          GROUP BY o_custkey) AS e
    JOIN customer ON e.unit_id = c_custkey JOIN nation ON … GROUP BY e.unit_id, n_name

The partials are the same numbers as without it (eager aggregation: each lower row meets
the same upper rows, which depend on its unit alone, so a sum over the joined rows is the
sum of the lower rows' sums times the upper rows they meet), so sensitivities and the
random choice of groups per unit do not change; only the engine's work does. COUNTs are
re-summed (and cast back to BIGINT), SUMs re-summed, MAXes re-maxed; partials of integer
grid steps and exact decimals keep their exactness. Anything else, a subquery in a
condition, a LEFT JOIN, a key or condition reading both sides, and the query is written
as before.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from sqlglot import exp

from rewriter.passes.check_joins import JoinBounds, conjuncts
from rewriter.scope import Source
from rewriter.sql_joins import add_join

EAGER_ALIAS = "e"  # the per-unit sums of the lower tables


@dataclass(frozen=True)
class _Item:
    name: str
    expression: exp.Expr


def eager_partials(
    selects: list[exp.Expr],
    conditions: list[exp.Expr],
    *,
    key_names: Collection[str],
    first: Source,
    joins: JoinBounds,
    table: Callable[[Source], exp.Expr],
    unit_column: str,
) -> exp.Select | None:
    """The per-unit query with its partials summed below the upper joins, or None when no
    join qualifies (the caller then writes the plain per-unit query).

    ``selects`` are the per-unit query's aliased columns: the unit first (named
    ``unit_column``), the GROUP BY keys (``key_names``), then partials, the random draw and
    the row count; ``conditions`` its WHERE; ``first`` the FROM source; ``table`` gives the
    FROM item of a source."""
    unit = joins.unit
    items = [_Item(s.alias, s.this) for s in selects if isinstance(s, exp.Alias)]
    ons = [*(j.on for j in joins.joins), *(h.on for h in joins.unit_joins)]
    if (
        not any(j.kind == "inner" for j in joins.joins)  # no upper table: inner joins only
        or len(items) != len(selects)
        or _reads_query([*selects, *conditions, *ons])
    ):
        return None
    if items[0].name != unit_column or not _same(items[0].expression, unit):
        return None
    keys = [i for i in items[1:] if i.name in key_names]
    partials = [i for i in items[1:] if i.name not in key_names]
    wheres = [c for condition in conditions for c in conjuncts(condition)]
    known = {first.alias, *(j.source.alias for j in joins.joins)}
    known |= {h.alias for h in joins.unit_joins}
    read = [*selects, *wheres, *(j.on for j in joins.joins), *(h.on for h in joins.unit_joins)]
    if any(not _aliases(node) <= known for node in read):
        return None
    upper = _upper(joins, first, keys, partials, wheres)
    if not upper:
        return None

    def on_upper(node: exp.Expr) -> exp.Expr:
        return _on_upper(node, unit, unit_column)

    lower_select = exp.select(unit.copy().as_(unit_column, quoted=True))
    upper_select = exp.select(_col(unit_column).as_(unit_column, quoted=True))
    lower_group: list[exp.Expr] = [unit.copy()]
    upper_group: list[exp.Expr] = [_col(unit_column)]
    for key in keys:
        if _aliases(key.expression, skip=unit) & upper:
            upper_select = upper_select.select(on_upper(key.expression).as_(key.name, quoted=True))
            upper_group.append(on_upper(key.expression))
        else:
            lower_select = lower_select.select(key.expression.copy().as_(key.name, quoted=True))
            lower_group.append(key.expression.copy())
            upper_select = upper_select.select(_col(key.name).as_(key.name, quoted=True))
            upper_group.append(_col(key.name))
    for partial in partials:
        again = _again(partial)
        if again is None:
            return None
        if not isinstance(partial.expression, (exp.Rand, exp.Literal)):
            lower_select = lower_select.select(
                partial.expression.copy().as_(partial.name, quoted=True)
            )
        upper_select = upper_select.select(again.as_(partial.name, quoted=True))

    lower_select = lower_select.from_(table(first), copy=False)
    for join in joins.joins:
        if join.source.alias not in upper:
            on = join.on.copy()
            lower_select = add_join(
                lower_select, table(join.source), on=on, join_type=join.kind.upper()
            )
    for hidden in joins.unit_joins:
        on = hidden.on.copy()
        lower_select = add_join(lower_select, hidden.table(), on=on, join_type="INNER")
    lower_where = [c.copy() for c in wheres if not _aliases(c, skip=unit) & upper]
    if lower_where:
        lower_select = lower_select.where(exp.and_(*lower_where), copy=False)
    lower_select = lower_select.group_by(*lower_group, copy=False)

    eager = exp.alias_(lower_select.subquery(copy=False), EAGER_ALIAS, quoted=True, copy=False)
    upper_select = upper_select.from_(eager, copy=False)
    for join in joins.joins:
        if join.source.alias in upper:
            upper_select = add_join(
                upper_select, table(join.source), on=on_upper(join.on), join_type="INNER"
            )
    upper_where = [on_upper(c) for c in wheres if _aliases(c, skip=unit) & upper]
    if upper_where:
        upper_select = upper_select.where(exp.and_(*upper_where), copy=False)
    return upper_select.group_by(*upper_group, copy=False)


def _upper(
    joins: JoinBounds,
    first: Source,
    keys: list[_Item],
    partials: list[_Item],
    wheres: list[exp.Expr],
) -> set[str]:
    """The aliases of the inner-joined sources that meet the others only through the unit:
    no partial reads them, the ONs of their joins read the other tables only through the
    unit column (and theirs read none of them), and no key or condition reads both."""
    unit = joins.unit
    upper = {j.source.alias for j in joins.joins if j.kind == "inner"}
    upper -= {first.alias, unit.table}
    for node in [*(p.expression for p in partials), *(h.on for h in joins.unit_joins)]:
        upper -= _aliases(node)
    changed = True
    while changed and upper:
        changed = False
        for join in joins.joins:
            reads = _aliases(join.on, skip=unit)
            if join.source.alias in upper and not reads <= upper:
                upper.discard(join.source.alias)
                changed = True
            elif join.source.alias not in upper and reads & upper:
                upper -= reads
                changed = True
        for node in [*wheres, *(k.expression for k in keys)]:
            reads = _aliases(node, skip=unit)
            if reads & upper and not reads <= upper:
                upper -= reads
                changed = True
    return upper


def _again(partial: _Item) -> exp.Expr | None:
    """The upper query's column of ``partial``: the lower partial re-aggregated."""
    expression = partial.expression
    if isinstance(expression, (exp.Rand, exp.Literal)):  # the draw per group, a constant
        return expression.copy()
    if isinstance(expression, exp.Count):
        return exp.cast(exp.Sum(this=_col(partial.name)), exp.DataType.Type.BIGINT)
    if isinstance(expression, exp.Sum):
        return exp.Sum(this=_col(partial.name))
    if isinstance(expression, exp.Max):
        return exp.Max(this=_col(partial.name))
    return None


def _reads_query(nodes: list[exp.Expr]) -> bool:
    """A subquery's columns are its own tables': the sides are not told apart there."""
    return any(node.find(exp.Query) is not None for node in nodes)


def _aliases(node: exp.Expr, skip: exp.Column | None = None) -> set[str]:
    """The tables (by alias) whose columns ``node`` reads, ``skip`` (the unit) aside."""
    return {c.table for c in node.find_all(exp.Column) if skip is None or not _same(c, skip)}


def _same(node: exp.Expr, column: exp.Column) -> bool:
    return isinstance(node, exp.Column) and node.table == column.table and node.name == column.name


def _on_upper(node: exp.Expr, unit: exp.Column, unit_column: str) -> exp.Expr:
    """``node`` reading the unit from the lower sums instead of from its table."""

    def replace(sub: exp.Expr) -> exp.Expr:
        return _col(unit_column) if _same(sub, unit) else sub

    return node.transform(replace)  # transform copies


def _col(name: str) -> exp.Column:
    return exp.column(name, table=EAGER_ALIAS, quoted=True)
