"""Pass 2b: check the joins and find how each joined row reaches its person.

Public lookup tables are joined on an equality between one of their columns and a column
of another table (``d.name = v.department``, possibly with more conditions): whatever the
join multiplies, each person's partials are clamped after the join. Protected tables can
be joined only so that every joined row still belongs to one person: on their privacy units
(``visits.patient_id = patients.patient_id``), or along a declared foreign-key path
(``lineitem.l_orderkey = orders.o_orderkey`` when lineitem's privacy_unit is
``l_orderkey -> orders.o_orderkey``), or on the first hop of two such paths that start
alike (``rx.visit_id = rx2.visit_id``: one parent row, one person). A table reaching its
person through a path that the query does not join explicitly is joined to the path's
tables by the rewriter.

Rows per person: the product of the joined protected tables' ``max_rows_per_unit``, except
that a table joined as the foreign-key parent of another does not multiply its child's rows
(the referenced column is a key).

How long a query runs is not protected by the noise (docs/privacy.md), so joins must not
multiply one person's rows without limit: ``WHERE p.patient_id = 42 AND p.income > x``
with nine public tables joined ``ON TRUE`` took 3 s when patient 42 met the condition and
0.2 s when not, and five self-joins of visits on the unit 49 s for a patient with 173
visits and 0.3 s for one with 2. So a query joins at most ``MAX_PUBLIC_TABLES`` public
tables, each linked to another table by an equality (no cross product), and at most
``MAX_MULTIPLYING_TABLES`` protected tables that may hold several rows per person and are
not a foreign-key parent (each multiplies a person's rows by the rows it holds for them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from rewriter.errors import Rejected
from rewriter.passes.check_predicate import check_predicate
from rewriter.passes.check_shape import QueryShape
from rewriter.scope import Source

#: The most public lookup tables one query (each subquery apart) may join.
MAX_PUBLIC_TABLES = 3
#: The most protected tables with several rows per person whose rows a join multiplies.
MAX_MULTIPLYING_TABLES = 2


@dataclass(frozen=True)
class ResolvedJoin:
    source: Source
    kind: str
    on: exp.Expr  # resolved


@dataclass(frozen=True)
class HiddenJoin:
    """A join the rewriter adds to reach the privacy unit along a foreign-key path."""

    table_name: str
    schema: str
    alias: str
    on: exp.Expr

    def table(self) -> exp.Table:
        """The table to join, under its alias."""
        return exp.Table(
            this=exp.to_identifier(self.table_name, quoted=True),
            db=exp.to_identifier(self.schema, quoted=True),
            alias=exp.TableAlias(this=exp.to_identifier(self.alias, quoted=True)),
        )


@dataclass(frozen=True)
class JoinBounds:
    joins: tuple[ResolvedJoin, ...]
    unit_joins: tuple[HiddenJoin, ...]
    unit: exp.Column  # the privacy unit of the driving table, as the bounded SQL names it
    max_rows_per_unit: int
    max_groups_per_unit: int


def check_joins(shape: QueryShape) -> JoinBounds:
    scope = shape.scope
    resolved = tuple(
        ResolvedJoin(j.source, j.kind, check_predicate(j.on, scope, "JOIN … ON"))
        for j in shape.joins
    )
    protected = scope.protected
    by_alias = {s.alias: s for s in scope.sources}
    links: list[tuple[str, str]] = []
    parents: dict[str, Source] = {}  # child alias -> the source joined as its FK parent
    for join in resolved:
        if join.kind != "inner":
            # A LEFT JOIN's ON removes no row of the tables before it: a unit or foreign-key
            # equality there links nothing (``visits JOIN patients ON TRUE LEFT JOIN
            # departments ON v.patient_id = p.patient_id`` pairs every visit with every
            # patient). Only public tables are LEFT JOINed, so inner ONs are enough.
            continue
        for condition in conjuncts(join.on):
            pair = _unit_pair(condition, by_alias)
            if pair is not None:
                links.append(pair)
                continue
            fk = _foreign_key(condition, by_alias)
            if fk is not None:
                child, parent = fk
                links.append((child, parent))
                parents.setdefault(child, by_alias[parent])
                continue
            siblings = _same_parent(condition, by_alias)
            if siblings is not None:
                links.append(siblings)
    linked = {protected[0].alias}
    changed = True
    while changed:
        changed = False
        for a, b in links:
            if (a in linked) != (b in linked):
                linked |= {a, b}
                changed = True
    unlinked = [s for s in protected if s.alias not in linked]
    if unlinked:
        raise Rejected(
            f'protected table "{unlinked[0].table.name}" must be joined on its privacy unit '
            "or along its declared foreign-key path",
            hint=f"e.g. JOIN … ON {_link_hint(protected[0], unlinked[0])}",
        )
    excluded = {parent.alias for parent in parents.values()}
    multiplying = [s for s in protected if s.alias not in excluded]
    _check_growth(scope.sources, resolved, multiplying, by_alias)
    rows = math.prod(s.table.policy.max_rows_per_unit for s in multiplying)
    groups = _max_groups(protected)
    hidden, unit = _unit_of(scope.driver, parents)
    return JoinBounds(resolved, hidden, unit, rows, groups)


def _check_growth(
    sources: Sequence[Source],
    joins: Sequence[ResolvedJoin],
    multiplying: Sequence[Source],
    by_alias: dict[str, Source],
) -> None:
    """Reject joins that could multiply one person's rows (so the query's run time) by more
    than a few tables' worth (module docstring). ``multiplying``: the protected sources
    whose rows per person multiply (all but foreign-key parents)."""
    public = [s for s in sources if s.table.policy.public]
    if len(public) > MAX_PUBLIC_TABLES:
        raise Rejected(
            f"a query may join at most {MAX_PUBLIC_TABLES} public lookup tables "
            f"(this one joins {len(public)})",
            hint="join fewer lookup tables, or ask your dpproxy admin for a table that "
            "combines them",
        )
    linked = _linked_sources(joins, by_alias)
    for source in public:
        if source.alias not in linked:
            name, reference = source.table.name, source.reference
            written = name if reference == name else f"{name} {reference}"
            raise Rejected(
                f'public table "{name}" must be joined with an equality between one of its '
                "columns and a column of another table",
                hint=f"e.g. JOIN {written} ON {reference}.<key> = <table>.<column>; "
                "a join without one pairs every row with every row of the lookup table",
            )
    several = [s for s in multiplying if s.table.policy.max_rows_per_unit > 1]
    if len(several) > MAX_MULTIPLYING_TABLES:
        names = ", ".join(f'"{s.reference}"' for s in several)
        raise Rejected(
            f"a query may join at most {MAX_MULTIPLYING_TABLES} protected tables with several "
            f"rows per person (this one joins {names})",
            hint="each such table multiplies a person's rows; aggregate one of them per "
            "person in a subquery first, or join a table along its foreign key",
        )


def _linked_sources(joins: Sequence[ResolvedJoin], by_alias: dict[str, Source]) -> set[str]:
    """The aliases of the sources an ON equates a column of to a column of another source:
    the joined table's own ON (inner or left), and an inner join's ON for the tables before
    it (a LEFT JOIN's ON keeps every row of the tables before it)."""
    linked: set[str] = set()
    for join in joins:
        for conjunct in conjuncts(join.on):
            condition = unwrap(conjunct)
            if not isinstance(condition, exp.EQ):
                continue
            sides = [_aliases(condition.this), _aliases(condition.expression)]
            if not all(sides) or sides[0] & sides[1]:
                continue  # a constant side, or the same table on both sides
            for side in sides:
                if len(side) == 1:
                    (alias,) = side
                    if alias in by_alias and (join.kind == "inner" or alias == join.source.alias):
                        linked.add(alias)
    return linked


def _aliases(expression: exp.Expr) -> set[str]:
    """The tables (aliases) whose columns ``expression`` reads."""
    return {c.table for c in expression.find_all(exp.Column)}


def _max_groups(protected: Sequence[Source]) -> int:
    """The most groups one person may count in: the smallest cap among the joined tables
    whose policy sets one. A table that leaves it unset (1 by default) does not lower the
    cap of the others: patients (one row each) joined with their visits may still count
    in as many groups as visits allow."""
    explicit = [
        s.table.policy.max_groups_per_unit
        for s in protected
        if "max_groups_per_unit" in s.table.policy.model_fields_set
    ]
    return min(explicit) if explicit else min(s.table.policy.max_groups_per_unit for s in protected)


def _unit_of(
    source: Source, parents: dict[str, Source]
) -> tuple[tuple[HiddenJoin, ...], exp.Column]:
    """The joins needed to reach ``source``'s person, and the column that identifies it."""
    hidden: list[HiddenJoin] = []
    table, alias = source.table, source.alias
    while table.unit_path:
        explicit = parents.get(alias)  # the query joins this hop itself
        if explicit is not None:
            more, reached = _unit_of(explicit, parents)
            return (*hidden, *more), reached
        hop = table.unit_path[0]
        target_alias = f"{source.alias}_u{len(hidden) + 1}"
        on = exp.EQ(
            this=exp.column(hop.column, table=alias, quoted=True),
            expression=exp.column(hop.referenced, table=target_alias, quoted=True),
        )
        hidden.append(HiddenJoin(hop.table.name, hop.table.schema, target_alias, on))
        table, alias = hop.table, target_alias
    column = table.privacy_unit
    if column is None:
        raise Rejected(f'table "{table.name}" has no privacy unit')
    return tuple(hidden), exp.column(column.name, table=alias, quoted=True)


def conjuncts(condition: exp.Expr) -> list[exp.Expr]:
    if isinstance(condition, exp.And):
        return conjuncts(condition.this) + conjuncts(condition.expression)
    if isinstance(condition, exp.Paren):
        return conjuncts(condition.this)
    return [condition]


def _columns(condition: exp.Expr) -> tuple[exp.Column, exp.Column] | None:
    """The two columns of ``a = b`` (parentheses aside, as inlined subqueries leave them)."""
    if isinstance(condition, exp.EQ):
        left, right = unwrap(condition.this), unwrap(condition.expression)
        if isinstance(left, exp.Column) and isinstance(right, exp.Column):
            return left, right
    return None


def unwrap(expression: exp.Expr) -> exp.Expr:
    while isinstance(expression, exp.Paren):
        expression = expression.this
    return expression


def _unit_pair(condition: exp.Expr, by_alias: dict[str, Source]) -> tuple[str, str] | None:
    """The two source aliases if ``condition`` equates their (direct) privacy units."""
    columns = _columns(condition)
    if columns is None:
        return None
    if any(c.table not in by_alias for c in columns):
        return None  # a column of an enclosing query (a correlated subquery)
    ends = []
    for column in columns:
        unit = by_alias[column.table].table.privacy_unit
        if unit is None or unit.name != column.name:
            return None
        ends.append(column.table)
    return (ends[0], ends[1]) if ends[0] != ends[1] else None


def _foreign_key(condition: exp.Expr, by_alias: dict[str, Source]) -> tuple[str, str] | None:
    """(child alias, parent alias) if ``condition`` follows a declared foreign-key hop."""
    columns = _columns(condition)
    if columns is None or any(c.table not in by_alias for c in columns):
        return None
    for child, parent in (columns, columns[::-1]):
        path = by_alias[child.table].table.unit_path
        target = by_alias[parent.table].table
        if (
            path
            # The very table the path declares: never a subquery or CTE named like it.
            and target.derived is None
            and (target.schema, target.name) == (path[0].table.schema, path[0].table.name)
            and path[0].column == child.name
            and path[0].referenced == parent.name
            and child.table != parent.table
        ):
            return child.table, parent.table
    return None


def _same_parent(condition: exp.Expr, by_alias: dict[str, Source]) -> tuple[str, str] | None:
    """The two source aliases if ``condition`` equates the first foreign-key hop of two
    tables whose paths start alike (``rx.visit_id = rx2.visit_id``, both reaching their
    person through ``visits.visit_id``): both rows reference one parent row (its column is
    unique, proxy.unit_keys), hence one person."""
    columns = _columns(condition)
    if columns is None or any(c.table not in by_alias for c in columns):
        return None
    left, right = (by_alias[c.table].table for c in columns)
    if columns[0].table == columns[1].table or left.derived or right.derived:
        return None
    if not (left.unit_path and right.unit_path):
        return None
    first, second = left.unit_path[0], right.unit_path[0]
    if (
        first.column == columns[0].name
        and second.column == columns[1].name
        and (first.table.schema, first.table.name, first.referenced)
        == (second.table.schema, second.table.name, second.referenced)
    ):
        return columns[0].table, columns[1].table
    return None


def _link_hint(first: Source, other: Source) -> str:
    path = other.table.unit_path
    if path:
        return f"{other.reference}.{path[0].column} = <{path[0].table.name}>.{path[0].referenced}"
    unit, other_unit = first.table.privacy_unit, other.table.privacy_unit
    return (
        f"{first.reference}.{unit.name if unit else '?'} = "
        f"{other.reference}.{other_unit.name if other_unit else '?'}"
    )
