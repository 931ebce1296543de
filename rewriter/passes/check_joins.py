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

A protected table may also be LEFT JOINed along the person: its own ON must link it so to a
protected table before it (:func:`_left_link`). The rows before it that meet none of its
rows are kept, with NULLs in its columns, and belong to the person of the tables before it:
the query's unit is the first protected table's, reached by inner joins only (never through
a table LEFT JOINed, whose unit column is NULL there). A LEFT JOIN of a protected table
inside a subquery in WHERE is refused: the subquery's values must be its own person's.

Rows per person: the product of the joined protected tables' ``max_rows_per_unit``, except
that a table joined as the foreign-key parent of another does not multiply its child's rows
(the referenced column is a key). A LEFT JOIN multiplies as an inner join (a row meeting
none of the joined table's rows is kept once); a foreign-key parent LEFT JOINed multiplies
nothing, but a child LEFT JOINed to its parent keeps the parent's rows without a child, so
the parent multiplies too.

How long a query runs is not protected by the noise (docs/privacy.md), so joins must not
multiply one person's rows without limit: ``WHERE p.patient_id = 42 AND p.income > x``
with nine public tables joined ``ON TRUE`` took 3 s when patient 42 met the condition and
0.2 s when not, and five self-joins of visits on the unit 49 s for a patient with 173
visits and 0.3 s for one with 2. So a query joins at most ``MAX_PUBLIC_TABLES`` public
tables and at most ``MAX_MULTIPLYING_TABLES`` protected tables that may hold several rows
per person and are not a foreign-key parent (each multiplies a person's rows by the rows
it holds for them).

A public table multiplies nothing: it must be joined through an equality between one of
its unique columns (``TableInfo.unique_columns``: a declared key, found when dpproxy
starts, proxy.public_keys) and a column of a protected table, or of a public table itself
joined so (``d.department = v.department``). Each row of the rest of the join then
matches at most one of its rows. A join on a column that repeats values (``d1.floor =
p.sex`` three times) made one row into thousands, and a condition on one person measurably
slower to run when it held. The key is compared as it is: a function of it (``lower(d.name)
= …``) need not be unique, and neither is an integer or decimal key of more than 15 digits
converted to a floating-point number (distinct keys can be equal as doubles), so such a key
must meet an integer or decimal column that one DECIMAL holds with it. A LEFT JOIN's ON
restricts only the table it joins: its equalities key that table alone, and a table LEFT
JOINed is keyed by its own ON only. An inner join's equality keys a table wherever it is
written (``FROM departments d JOIN visits v ON v.department = d.department``): both
engines plan inner joins together, each condition where both its sides are at hand.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from rewriter.catalog import ColumnType
from rewriter.errors import Rejected
from rewriter.passes.check_predicate import check_predicate
from rewriter.passes.check_shape import QueryShape
from rewriter.passes.value_types.decimal_digits import one_decimal
from rewriter.scope import Scope, Source

#: The most public lookup tables one query (each subquery apart) may join.
MAX_PUBLIC_TABLES = 3
#: The most protected tables with several rows per person whose rows a join multiplies.
MAX_MULTIPLYING_TABLES = 2
#: Significant digits within which distinct integers or decimals stay distinct as doubles
#: (DBL_DIG: every decimal of 15 digits survives the round trip through a double).
_DOUBLE_DIGITS = 15


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
    #: The protected tables (as written) whose several rows per person multiply the join's:
    #: a WHERE subquery run for each row counts its own with them (where_subqueries).
    several: tuple[str, ...] = ()
    #: Whether a joined table's policy sets max_groups_per_unit (see _max_groups): a
    #: per-person subquery passes the cap on only then (subqueries).
    groups_set: bool = False


def check_joins(shape: QueryShape) -> JoinBounds:
    scope = shape.scope
    resolved = tuple(
        ResolvedJoin(j.source, j.kind, check_predicate(j.on, scope, "JOIN … ON", condition=True))
        for j in shape.joins
    )
    protected = scope.protected
    by_alias = {s.alias: s for s in scope.sources}
    links: list[tuple[str, str]] = []
    parents: dict[str, Source] = {}  # child alias -> the source joined as its FK parent
    keyed: set[str] = set()  # sources LEFT JOINed as the FK parent of a table before them
    for join in resolved:
        if join.kind != "inner":
            # A LEFT JOIN's ON removes no row of the tables before it: a unit or foreign-key
            # equality there between them links nothing (``visits JOIN patients ON TRUE LEFT
            # JOIN departments ON v.patient_id = p.patient_id`` pairs every visit with every
            # patient). It links the table it joins, a protected one, to one before it.
            if not join.source.table.policy.public:
                link, lookup = _left_link(join, scope, by_alias)
                links.append(link)
                if lookup:
                    keyed.add(join.source.alias)
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
    excluded = {parent.alias for parent in parents.values()} | keyed
    multiplying = [s for s in protected if s.alias not in excluded]
    several = _check_growth(scope, resolved, multiplying, by_alias)
    rows = math.prod(s.table.policy.max_rows_per_unit for s in multiplying)
    groups = _max_groups(protected)
    hidden, unit = _unit_of(scope.driver, parents)
    groups_set = bool(_group_caps(protected))
    return JoinBounds(resolved, hidden, unit, rows, groups, several, groups_set)


def _left_link(
    join: ResolvedJoin, scope: Scope, by_alias: dict[str, Source]
) -> tuple[tuple[str, str], bool]:
    """The link that the ON of ``LEFT JOIN <protected table>`` makes between that table and
    a protected table before it, and whether the joined table is that table's foreign-key
    parent (a key: it adds no row to those before it).

    The rows before the join that meet none of its rows are kept with NULL in its columns:
    they still belong to their person, whom the query's unit (the first protected table's,
    never the joined table's) names; the rows it matches belong to that person too, as the
    ON equates both tables' persons. A person's rows grow as an inner join's would: each
    row before the join meets at most the joined table's ``max_rows_per_unit`` of that
    person's rows, and is kept once when it meets none, which a table holding at least one
    row per person already counts. A foreign-key parent LEFT JOINed is a key lookup (one
    row or none); a foreign-key child LEFT JOINed to its parent does not make the parent a
    key lookup: the parent's rows without a child are kept as well, so both multiply.

    Only an equality of the join's own ON between the joined table and a table before it
    links them: one between two earlier tables filters nothing (module docstring)."""
    joined = join.source
    if _in_where_subquery(scope):
        # ``x IN (SELECT p.patient_id FROM visits v LEFT JOIN patients p …)`` would hold a
        # NULL for one person's visit without a patients row, which turns every row's
        # NOT IN to NULL: a subquery's value must be its own person's.
        raise Rejected(
            "LEFT JOIN is supported only with a public lookup table inside a subquery in "
            f'WHERE (this one LEFT JOINs protected table "{joined.table.name}"): its NULLs '
            "would belong to other persons' rows",
            hint="use an inner JOIN in the subquery, or move the LEFT JOIN to the outer query",
        )
    before = {s.alias for s in scope.sources[: scope.sources.index(joined)]}
    for condition in conjuncts(join.on):
        for pair in (_unit_pair(condition, by_alias), _same_parent(condition, by_alias)):
            if pair is not None and joined.alias in pair:
                other = pair[0] if pair[1] == joined.alias else pair[1]
                if other in before:
                    return (joined.alias, other), False
        fk = _foreign_key(condition, by_alias)
        if fk is not None:
            child, parent = fk
            if parent == joined.alias and child in before:
                return fk, True
            if child == joined.alias and parent in before:
                return fk, False
    earlier = [s for s in scope.protected if s.alias in before]
    name = joined.table.name
    example = _link_hint(earlier[0], joined) if earlier else None
    raise Rejected(
        "LEFT JOIN is supported only with a public lookup table, or with a protected table "
        "whose ON equates its privacy unit (or its declared foreign-key path) with a "
        f'protected table before it; "{name}" is joined otherwise',
        hint=f"e.g. LEFT JOIN {name} {joined.reference} ON {example}"
        if example is not None and joined.reference != name
        else f"e.g. LEFT JOIN {name} ON {example}"
        if example is not None
        else f'read "{name}" first (FROM {name} … LEFT JOIN <public table> ON …)',
    )


def _in_where_subquery(scope: Scope) -> bool:
    """Whether ``scope`` is a subquery's in WHERE (rewriter.passes.where_subqueries)."""
    from rewriter.passes.where_subqueries import NestedScope  # noqa: PLC0415 (imports this)

    return isinstance(scope, NestedScope)


def _check_growth(
    scope: Scope,
    joins: Sequence[ResolvedJoin],
    multiplying: Sequence[Source],
    by_alias: dict[str, Source],
) -> tuple[str, ...]:
    """Reject joins that could multiply one person's rows (so the query's run time) by more
    than a few tables' worth (module docstring). ``multiplying``: the protected sources
    whose rows per person multiply (all but foreign-key parents). Returns those of them
    that hold several rows per person."""
    public = [s for s in scope.sources if s.table.policy.public]
    _check_count(public)
    _check_keyed(scope, public, joins, by_alias, {s.alias for s in scope.protected})
    several = tuple(s.reference for s in multiplying if s.table.policy.max_rows_per_unit > 1)
    check_multiplying(several)
    return several


def check_multiplying(several: Sequence[str], *, subquery: bool = False) -> None:
    """Refuse more than ``MAX_MULTIPLYING_TABLES`` protected tables (``several``, as
    written) whose several rows per person multiply one another: joined in one query, or
    in a query and a WHERE subquery run for each of its rows (``subquery``)."""
    if len(several) <= MAX_MULTIPLYING_TABLES:
        return
    names = ", ".join(f'"{name}"' for name in several)
    if subquery:
        raise Rejected(
            f"a query and a subquery in its WHERE may read at most {MAX_MULTIPLYING_TABLES} "
            f"protected tables with several rows per person together (these read {names}): "
            "the subquery runs for each row of the query, so their rows multiply",
            hint="aggregate one of them per person in a FROM subquery first, or join a table "
            "along its foreign key",
        )
    raise Rejected(
        f"a query may join at most {MAX_MULTIPLYING_TABLES} protected tables with several "
        f"rows per person (this one joins {names})",
        hint="each such table multiplies a person's rows; aggregate one of them per "
        "person in a subquery first, or join a table along its foreign key",
    )


def check_lookup_joins(scope: Scope, joins: Sequence[ResolvedJoin]) -> None:
    """The joins of a subquery over public tables only (``x IN (SELECT d.name FROM
    departments d JOIN …)``, rewriter.passes.where_subqueries): its first table is read
    whole, each other one must be keyed to it as in a query (module docstring), and at
    most ``MAX_PUBLIC_TABLES`` are read. A correlated subquery runs for the rows that reach
    it, so a cross product of lookups there took 0.2 s when one person's row met a
    condition and 0.004 s when not."""
    sources = scope.sources
    _check_count(sources)
    by_alias = {s.alias: s for s in sources}
    _check_keyed(scope, sources[1:], joins, by_alias, {sources[0].alias})


def _check_count(public: Sequence[Source]) -> None:
    if len(public) > MAX_PUBLIC_TABLES:
        raise Rejected(
            f"a query may join at most {MAX_PUBLIC_TABLES} public lookup tables "
            f"(this one joins {len(public)})",
            hint="join fewer lookup tables, or ask your dpproxy admin for a table that "
            "combines them",
        )


@dataclass(frozen=True)
class _KeyLink:
    """An equality of an ON between a unique column of the public source ``alias`` and a
    value read from the sources ``reads`` (of this query): given their rows, it matches at
    most one row of ``alias``."""

    alias: str
    reads: frozenset[str]


def _check_keyed(
    scope: Scope,
    public: Sequence[Source],
    joins: Sequence[ResolvedJoin],
    by_alias: dict[str, Source],
    roots: set[str],
) -> None:
    """Each public source must be keyed by an equality on one of its unique columns to the
    sources ``roots`` (the protected ones), directly or through public sources keyed so
    (module docstring)."""
    links, problems = _key_links(scope, joins, by_alias)
    keyed = set(roots)
    changed = True
    while changed:
        changed = False
        for link in links:
            if link.alias not in keyed and link.reads <= keyed:
                keyed.add(link.alias)
                changed = True
    for source in public:
        if source.alias not in keyed:
            raise _unkeyed(source, problems.get(source.alias))


def _key_links(
    scope: Scope, joins: Sequence[ResolvedJoin], by_alias: dict[str, Source]
) -> tuple[list[_KeyLink], dict[str, str]]:
    """The equalities of the ONs that key a public source, and for the public sources
    equated otherwise, why the first such equality does not key them."""
    links: list[_KeyLink] = []
    problems: dict[str, str] = {}
    outer = {join.source.alias for join in joins if join.kind != "inner"}
    for join in joins:
        for conjunct in conjuncts(join.on):
            condition = unwrap(conjunct)
            if not isinstance(condition, exp.EQ):
                continue  # (IS NOT DISTINCT FROM matches every NULL with every NULL)
            pair = (condition.this, condition.expression)
            for side, other in (pair, pair[::-1]):
                key = unwrap(side)
                if not isinstance(key, exp.Column) or key.table not in by_alias:
                    continue
                table = by_alias[key.table].table
                if not table.policy.public:
                    continue
                if (join.kind != "inner" or key.table in outer) and key.table != join.source.alias:
                    # A LEFT JOIN's ON keeps every row of the tables before it; and a table
                    # LEFT JOINed is keyed in its own ON, which makes its rows (a later ON
                    # would filter the pairs that ON made).
                    continue
                reads = _aliases(other)
                if not reads or key.table in reads:
                    continue  # a constant, or the table itself: no link to another table
                problem = _not_a_key(key, other, scope, by_alias)
                if problem is not None:
                    problems.setdefault(key.table, problem)
                    continue
                links.append(_KeyLink(key.table, frozenset(reads & by_alias.keys())))
    return links, problems


def _not_a_key(
    key: exp.Column, other: exp.Expr, scope: Scope, by_alias: dict[str, Source]
) -> str | None:
    """Why ``key = other`` may match one value of ``other`` with several rows of the key's
    table; None if it cannot."""
    table = by_alias[key.table].table
    info = table.column(key.name)
    if info.name.lower() not in table.unique_columns:
        return f'"{info.name}" may hold a value in several rows'
    if info.type not in (ColumnType.INTEGER, ColumnType.DECIMAL):
        return None
    if info.digits is not None and sum(info.digits) <= _DOUBLE_DIGITS:
        return None  # distinct even as doubles
    column = unwrap(other)
    if isinstance(column, exp.Column) and column.table in by_alias:
        kind = by_alias[column.table].table.column(column.name).type
        exact = {info.type, kind} == {ColumnType.INTEGER} or (
            kind in (ColumnType.INTEGER, ColumnType.DECIMAL) and one_decimal([key, column], scope)
        )
        if exact:
            return None
    return (
        f'"{info.name}" is compared with a value that is not an integer or decimal column '
        "of a type one DECIMAL holds with it: the database may compare both as "
        "floating-point numbers, in which distinct keys of more than 15 digits can be equal"
    )


def _unkeyed(source: Source, problem: str | None) -> Rejected:
    """The refusal of a public source that no equality on a unique column keys."""
    table, reference = source.table, source.reference
    name = table.name
    written = name if reference == name else f"{name} {reference}"
    keys = sorted(table.columns[k].name for k in table.unique_columns)
    if not keys:
        return Rejected(
            f'public table "{name}" has no column known to be unique, so it cannot be joined: '
            "a join on a column that repeats values can match each row with many of its rows",
            hint=f"filter with WHERE <column> IN (SELECT <column> FROM {name} …) instead, or "
            "ask your dpproxy admin to declare a key and restart dpproxy (on PostgreSQL "
            f"ALTER TABLE {name} ADD PRIMARY KEY (<column>); on DuckDB a PRIMARY KEY or "
            "UNIQUE constraint, or a column whose values are all different)",
        )
    listed = ", ".join(keys)
    why = f"; here {problem}" if problem is not None else ""
    return Rejected(
        f'public table "{name}" must be joined with an equality between one of its unique '
        f"columns ({listed}) and a column of another table{why}",
        hint=f"e.g. JOIN {written} ON {reference}.{keys[0]} = <table>.<column>, where <table> "
        "is a protected table (in a subquery over lookup tables only, its first table) or a "
        "public table joined that way; each row then matches at "
        f"most one row of {name}, where a join on another column (or on a function of one) "
        "can match many",
    )


def _aliases(expression: exp.Expr) -> set[str]:
    """The tables (aliases) whose columns ``expression`` reads."""
    return {c.table for c in expression.find_all(exp.Column)}


def _max_groups(protected: Sequence[Source]) -> int:
    """The most groups one person may count in: the smallest cap among the joined tables
    whose policy sets one. A table that leaves it unset (1 by default) does not lower the
    cap of the others: patients (one row each) joined with their visits may still count
    in as many groups as visits allow."""
    explicit = _group_caps(protected)
    return min(explicit) if explicit else min(s.table.policy.max_groups_per_unit for s in protected)


def _group_caps(protected: Sequence[Source]) -> list[int]:
    """The max_groups_per_unit of the tables whose policy sets it."""
    return [
        s.table.policy.max_groups_per_unit
        for s in protected
        if "max_groups_per_unit" in s.table.policy.model_fields_set
    ]


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
