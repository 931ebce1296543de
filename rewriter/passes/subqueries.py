"""Pass 0: expand CTEs and subqueries in FROM and JOIN.

- CTEs are substituted where they are read: in FROM and JOIN, at any depth (subqueries in
  WHERE included); a CTE may read the CTEs defined before it.
- A row-level subquery (``SELECT cols/expressions FROM t [JOIN …] [WHERE …]``) is inlined:
  the outer query reads its tables directly (the first under the subquery's alias, the
  others as ``<alias>__<name>``), its joins and WHERE are added, and its output columns are
  replaced by their expressions. An unqualified name is resolved once every FROM item of
  the query is known, as PostgreSQL does: the subquery's output if no other FROM item has
  a column of that name, ambiguous (42702) if one does; the columns of its tables that it
  does not select are no one's (``Source.hidden``). The outer query's joins are then
  checked as usual (check_joins), so protected tables still join only along the privacy
  unit and the rows per person stay bounded by the product of their ``max_rows_per_unit``.
- A subquery grouped by the privacy unit (``SELECT patient_id, COUNT(*) AS n FROM visits
  GROUP BY patient_id``) has one row per person: it becomes a virtual protected table with
  ``max_rows_per_unit = 1`` whose columns are per-person aggregates with derived bounds
  (clamped in the SQL), on which the outer query computes DP aggregates as usual. If it
  joins, its joins are checked like the outer query's, and the bounds use check_joins'
  rows per person (the product over the joined protected tables): whatever a join
  multiplies, each person's counts and sums are clamped to that many rows' worth.

Both kinds are rebuilt from the parts named above, so any other clause of the subquery
(HAVING, DISTINCT, ORDER BY, LIMIT, OFFSET, FETCH, WINDOW, QUALIFY, TABLESAMPLE, a column
list in its alias, …) is refused, never dropped: check_shape's allowlists, which refuse
what a later sqlglot adds as well.
"""

from __future__ import annotations

from typing import TypeVar, cast

from sqlglot import exp

from rewriter.catalog import Catalog, ColumnInfo, ColumnType, TableInfo
from rewriter.errors import Rejected
from rewriter.intervals import Interval, interval_of
from rewriter.output_names import output_name
from rewriter.passes.bound_per_unit import clean
from rewriter.passes.check_joins import check_joins
from rewriter.passes.check_predicate import check_predicate
from rewriter.passes.check_shape import (
    GROUP,
    ROWS,
    Clauses,
    QueryShape,
    check_alias,
    check_table,
    clause_hint,
    clause_name,
    refuse_extra,
    set_args,
    sources,
    unparenthesize,
    unsupported_clause,
)
from rewriter.passes.where_subqueries import WhereSubqueries
from rewriter.passes.zoned_keys import zoned_value
from rewriter.policy import ColumnPolicy, TablePolicy
from rewriter.scope import INLINED, WRITTEN, Join, Scope, Source
from rewriter.sql_joins import add_join
from rewriter.zones import as_instant, is_zoned

INNER_PREFIX = "s"  # the tables of a per-person subquery are s0, s1, …
#: ``exp.Table.meta`` of the first table an inlined row-level subquery leaves in its place:
#: the names the subquery provides, each with its expression (None: ambiguous, two of its
#: columns have that name), for the unqualified names of the query around it
#: (:func:`_resolve_unqualified`) and for a ``*`` over it one level up (:func:`_outputs`).
VIEW = "dpproxy_view"
Provided = dict[str, exp.Expr | None]
T = TypeVar("T")
_CLAUSES: Clauses = {**ROWS, **GROUP}  # a row-level subquery, or one grouped by the person
_FORMS = (
    "a subquery in FROM is SELECT <columns> FROM … [JOIN …] [WHERE …], or "
    "SELECT <privacy unit>, <aggregates> FROM … [JOIN …] [WHERE …] GROUP BY <privacy unit>"
)
_HINTS = {
    "having": "filter in the outer query: select the per-person aggregate "
    "(SELECT patient_id, COUNT(*) AS n … GROUP BY patient_id) s and write WHERE s.n > … "
    "around it; a row-level subquery filters its rows with WHERE",
    "distinct": "remove DISTINCT; to count persons, write COUNT(DISTINCT <privacy unit>) in "
    "the outer query",
    "order": "remove it: the order of a subquery's rows does not change an aggregate (ORDER "
    "BY belongs to the outer query)",
    "limit": "remove it: a LIMIT inside a subquery keeps only some of its rows (LIMIT belongs "
    "to the outer query, on the released rows)",
    "offset": "remove it: an OFFSET inside a subquery skips some of its rows",
    "fetch": "remove it: FETCH inside a subquery keeps only some of its rows",
    "windows": "window functions are not supported",
    "qualify": "window functions are not supported; filter rows with WHERE",
}
_CTE_ARGS = frozenset({"this", "alias", "materialized"})  # [NOT] MATERIALIZED: a plan hint
_WITH_ARGS = frozenset({"expressions", "recursive"})
_STAR_ARGS = frozenset({"this"})  # no EXCLUDE / EXCEPT / REPLACE / RENAME


def expand_subqueries(tree: exp.Expr, catalog: Catalog) -> tuple[exp.Expr, Catalog]:
    if not isinstance(tree, exp.Select):
        return tree, catalog
    tree = tree.copy()
    ctes = _take_ctes(tree)
    if ctes:
        _replace_ctes(tree, ctes)
    while True:
        pending = [n for n in _source_nodes(tree) if isinstance(n, exp.Subquery)]
        if not pending:
            break
        tree, catalog = _expand(tree, pending[0], catalog)
    _resolve_unqualified(tree, catalog)
    return tree, catalog


def _take_ctes(tree: exp.Select) -> dict[str, exp.Select]:
    found: dict[str, exp.Select] = {}
    for key in ("with", "with_"):
        clause = tree.args.get(key)
        if clause is None:
            continue
        if clause.args.get("recursive"):
            raise Rejected("WITH RECURSIVE is not supported")
        refuse_extra(clause, _WITH_ARGS, "in WITH", _FORMS)
        for cte in clause.expressions:
            refuse_extra(cte, _CTE_ARGS, f'in WITH query "{cte.alias}"', _FORMS)
            check_alias(cte)
            if not isinstance(cte.this, exp.Select):
                raise Rejected("a WITH query must be a SELECT")
            body = cte.this.copy()
            _replace_ctes(body, found)  # a CTE reads the CTEs before it
            found[cte.alias.lower()] = body
        tree.set(key, None)
    return found


def _replace_ctes(root: exp.Expr, ctes: dict[str, exp.Select]) -> None:
    """Replace each table read in FROM/JOIN that names a CTE (not shadowed) by the CTE."""
    for table in list(root.find_all(exp.Table)):
        name = table.name.lower()
        if (
            name not in ctes
            or table.args.get("db")
            or not isinstance(table.parent, (exp.From, exp.Join))
            or _cte_shadowed(table, name)
        ):
            continue
        check_table(table)  # the CTE replaces the table: nothing on it may be lost
        table.replace(
            exp.Subquery(
                this=ctes[name].copy(),
                alias=exp.TableAlias(this=exp.to_identifier(table.alias or table.name)),
            )
        )


def _cte_shadowed(node: exp.Expr, name: str) -> bool:
    """True if a query around ``node`` defines its own CTE called ``name``."""
    parent = node.parent
    while parent is not None:
        if isinstance(parent, exp.Select):
            for key in ("with", "with_"):
                clause = parent.args.get(key)
                if clause is not None and any(c.alias.lower() == name for c in clause.expressions):
                    return True
        parent = parent.parent
    return False


def _source_nodes(tree: exp.Select) -> list[exp.Expr]:
    source = tree.args.get("from") or tree.args.get("from_")
    nodes = [source.this] if isinstance(source, exp.From) else []
    nodes.extend(j.this for j in tree.args.get("joins") or [])
    return nodes


def _nested_selects(node: exp.Expr) -> list[exp.Select]:
    """The SELECTs around ``node`` below the root of its tree (subqueries it is in)."""
    found = []
    parent = node.parent
    while parent is not None:
        if isinstance(parent, exp.Select) and parent.parent is not None:
            found.append(parent)
        parent = parent.parent
    return found


def _reads(select: exp.Select, reference: str) -> bool:
    """True if ``select`` reads a table (or subquery) under the name ``reference``."""
    return any(n.alias_or_name.lower() == reference.lower() for n in _source_nodes(select))


def _refers_to(column: exp.Column, reference: str) -> bool:
    """True if ``column`` (anywhere in the tree) means a column of the source
    ``reference`` of the tree's root query: in a nested subquery only when qualified with
    it and no subquery in between reads a table of that name."""
    nested = _nested_selects(column)
    if nested:
        return (
            column.table.lower() == reference.lower()
            and not _in_from_subquery(column)
            and not any(_reads(s, reference) for s in nested)
        )
    return not column.table or column.table.lower() == reference.lower()


def _in_from_subquery(node: exp.Expr) -> bool:
    """True if ``node`` is inside a subquery in some FROM/JOIN (which cannot refer to the
    tables of the queries around it)."""
    parent = node.parent
    while parent is not None:
        if isinstance(parent, exp.Subquery) and isinstance(parent.parent, (exp.From, exp.Join)):
            return True
        parent = parent.parent
    return False


def _expand(tree: exp.Select, node: exp.Subquery, catalog: Catalog) -> tuple[exp.Select, Catalog]:
    alias = node.alias
    if not alias:
        raise Rejected("a subquery in FROM must have an alias", sqlstate="42601")
    if node.args.get("sample") is not None:
        raise Rejected(
            f'TABLESAMPLE on subquery "{alias}" is not supported: a sample answers for some '
            "of the rows, not for the subquery",
            hint=clause_hint("sample"),
        )
    refuse_extra(node, frozenset({"this", "alias"}), f'on subquery "{alias}"', _FORMS)
    check_alias(node)
    inner = unparenthesize(node.this, "in FROM", "write the subquery alone: (SELECT …) AS s")
    if not isinstance(inner, exp.Select):
        raise Rejected("a subquery in FROM must be a SELECT (no UNION)")
    inner, catalog = expand_subqueries(inner, catalog)
    if not isinstance(inner, exp.Select):
        raise Rejected("a subquery in FROM must be a SELECT")
    unsupported = unsupported_clause(inner, _CLAUSES)
    if unsupported is not None:
        raise Rejected(
            f"{clause_name(unsupported)} inside a subquery in FROM is not supported",
            hint=_HINTS.get(unsupported) or clause_hint(unsupported) or _FORMS,
        )
    scope, joins = sources(inner, catalog, INNER_PREFIX)
    grouped = inner.args.get("group") or any(i.find(exp.AggFunc) for i in inner.expressions)
    if grouped and any(s.table.derived is not None for s in scope.sources):
        raise Rejected(
            "a grouped subquery must read a table directly, not another subquery",
            hint="nested per-person subqueries are not supported",
        )
    if grouped:
        return _per_unit(tree, node, inner, scope=scope, joins=joins, catalog=catalog)
    inlined = _inline(tree, node, inner, scope, joins)
    _check_size(inlined)
    return inlined, catalog


#: The most syntax nodes a statement may have once its row-level subqueries are inlined.
#: Each copies its expressions where the query uses them, so nested ones that use a
#: column twice (``SELECT t.x || t.x AS x FROM (…) t``) double the statement per level:
#: fourteen levels made 312 KB of SQL in 15 s of planning, while other sessions waited.
MAX_INLINED_NODES = 20_000


def _check_size(tree: exp.Expr) -> None:
    """Refuse a statement grown past MAX_INLINED_NODES by inlining (checked after each
    subquery, so the work stays within about twice that)."""
    for size, _ in enumerate(tree.walk(), start=1):
        if size > MAX_INLINED_NODES:
            raise Rejected(
                "the statement is too large once its subqueries are inlined (a subquery's "
                "columns are copied where they are used)",
                sqlstate="54001",
                hint="use each column of a nested subquery once, or nest fewer subqueries",
            )


def _inline(
    tree: exp.Select,
    node: exp.Subquery,
    inner: exp.Select,
    scope: Scope,
    joins: tuple[Join, ...],
) -> exp.Select:
    alias = node.alias
    # The first table takes the subquery's alias, the others <alias>__<their name>.
    renamed = {
        s.alias: alias if i == 0 else f"{alias}__{s.reference}" for i, s in enumerate(scope.sources)
    }
    outputs, starred, viewed = _outputs(inner, scope)
    merged = _check_using(tree, node, scope, outputs=outputs, starred=starred, viewed=viewed)

    def requalify(expression: exp.Expr) -> exp.Expr:
        def visit(sub: exp.Expr) -> exp.Expr:
            if not isinstance(sub, exp.Column) or isinstance(sub.this, exp.Star):
                return sub
            if _nested_selects(sub) and not any(
                _refers_to(sub, s.reference) for s in scope.sources
            ):
                return sub  # a column of a subquery inside (resolved with it)
            source, info = scope.lookup(sub, "the subquery")
            return exp.column(info.name, table=renamed[source.alias], quoted=True)

        # Resolving against the subquery's own tables, as a copy wrapped so that nested
        # SELECTs are found below its root.
        holder = exp.Paren(this=expression.copy())
        return holder.transform(visit, copy=False)

    # The names the subquery provides: the columns of the tables it selects * of, those
    # of a subquery inlined in it that it selects * of, and its named items; a name given
    # twice is ambiguous (None), as in PostgreSQL.
    provided: Provided = {}

    def provide(name: str, value: exp.Expr | None) -> None:
        provided[name.lower()] = None if name.lower() in provided else value

    for source in starred:
        for info in source.table.columns.values():
            provide(info.name, exp.column(info.name, table=renamed[source.alias], quoted=True))
    for name, value in viewed.items():
        provide(name, None if value is None else requalify(value))
    for name, value in outputs.items():
        provide(name, requalify(value))

    # A LEFT JOINed subquery's columns are NULL where the join finds no row: its
    # expressions, inlined, are computed on the NULL columns of its tables instead.
    left_joined = isinstance(node.parent, exp.Join) and (node.parent.side or "").upper() == "LEFT"

    def substitute(sub: exp.Expr) -> exp.Expr:
        if not isinstance(sub, exp.Column) or isinstance(sub.this, exp.Star):
            return sub
        name = sub.name.lower()
        if (
            not sub.table
            and _nested_selects(sub)
            and not _in_from_subquery(sub)
            and name in provided
        ):
            # SQL would read it from the subquery's own tables if they have such a column,
            # else from this one: dpproxy does not guess.
            raise Rejected(
                f'column "{sub.name}" inside a subquery in WHERE may refer to {alias}.{sub.name}; '
                "qualify it",
                sqlstate="42702",
                hint=f"write {alias}.{sub.name}, or the subquery's table name or alias",
            )
        if not sub.table and not _nested_selects(sub) and name in merged:
            # JOIN (…) s USING (c): an unqualified c is the column on the left of the join
            # (for a LEFT JOIN, also where s has no row), not s.c.
            raise Rejected(
                f'column reference "{sub.name}" is ambiguous',
                sqlstate="42702",
                hint="qualify it with the name or alias of the table on the left of the "
                f"join (what USING means by it), or write {alias}.{sub.name}",
            )
        if not sub.table or not _refers_to(sub, alias):
            # An unqualified name here may be another FROM item's as well: resolved once
            # each one's names are known (_resolve_unqualified).
            return sub
        if name not in provided:
            raise Rejected(f"column {alias}.{sub.name} does not exist", sqlstate="42703")
        value = provided[name]
        if left_joined and value is not None and not _null_where_unmatched(value):
            raise Rejected(
                f"{alias}.{sub.name} is computed in a subquery joined with LEFT JOIN: where "
                f"the join finds no row, {alias}.{sub.name} would not be NULL as in PostgreSQL",
                hint=f"select the columns alone in the subquery and compute {sub.name} in the "
                "outer query, or use JOIN",
            )
        return _replacement(sub, value, tree)

    table_nodes = _source_nodes(inner)
    bases = [
        exp.Table(
            this=table.this.copy(),
            db=table.args.get("db"),
            alias=exp.TableAlias(this=exp.to_identifier(renamed[source.alias])),
        )
        for table, source in zip(table_nodes, scope.sources, strict=True)
    ]
    flattened = [
        exp.Join(
            this=base,
            on=requalify(join.on),
            **({"side": "LEFT"} if join.kind == "left" else {}),
        )
        for base, join in zip(bases[1:], joins, strict=True)
    ]
    for base in bases:
        base.meta[INLINED] = True
    bases[0].meta[VIEW] = provided
    condition = inner.args.get("where")
    outer_join = node.parent if isinstance(node.parent, exp.Join) else None
    node.replace(bases[0])
    tree.transform(substitute, copy=False)
    where = requalify(condition.this) if condition is not None else None
    return _attach(tree, outer_join, flattened, where)


#: Expressions that are NULL when an argument is NULL (in PostgreSQL and DuckDB alike).
_STRICT = (
    exp.Column,
    exp.Identifier,
    exp.Paren,
    exp.Cast,
    exp.DataType,
    exp.DataTypeParam,
    exp.Literal,
    exp.Neg,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.Mod,
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.DPipe,
    exp.Upper,
    exp.Lower,
    exp.Length,
    exp.Substring,
)


def _null_where_unmatched(value: exp.Expr) -> bool:
    """Whether ``value`` is NULL when its columns are: it reads a column, through strict
    operations only (a constant, COALESCE, CASE, IS NULL … are not NULL then)."""
    return value.find(exp.Column) is not None and all(
        isinstance(node, _STRICT) for node in value.walk()
    )


def _replacement(column: exp.Column, value: exp.Expr | None, tree: exp.Select) -> exp.Expr:
    """What an inlined subquery provides for ``column``: its expression (in the select
    list, under the name the column had)."""
    if value is None:
        raise Rejected(
            f'column reference "{column.name}" is ambiguous',
            sqlstate="42702",
            hint="the subquery has two columns of that name: give each its own name",
        )
    replacement = value.copy()
    replacement.meta[WRITTEN] = column.copy()
    if column.parent is tree and column.arg_key == "expressions":
        return exp.alias_(replacement, column.name, copy=False)
    return replacement


def _resolve_unqualified(tree: exp.Select, catalog: Catalog) -> None:
    """Resolve the unqualified columns of ``tree`` itself (not of a subquery in it) that an
    inlined row-level subquery provides, as PostgreSQL does: a name that one FROM item
    provides is that item's (the subquery's expression replaces it); a name that several
    provide is ambiguous (42702). Each FROM item is a table by now: a table provides its
    columns, an inlined subquery its outputs (``VIEW``, on its first table; its tables'
    other columns are no one's), and a column that ``JOIN … USING`` merges counts once, as
    the left side's. The ON of a join sees the FROM items up to its own; ORDER BY of an
    output name refers to the select list. Columns that no inlined subquery provides are
    left to rewriter.scope (which skips hidden tables)."""
    nodes = _source_nodes(tree)
    views = {i: cast(Provided, n.meta[VIEW]) for i, n in enumerate(nodes) if VIEW in n.meta}
    if not views:
        return
    scope, _ = sources(tree, catalog, "r")
    provides: list[set[str]] = []
    for index, source in enumerate(scope.sources):
        if index in views:
            provides.append(set(views[index]))
        else:
            provides.append(set() if source.hidden else set(source.table.columns))
    for index, join in enumerate(tree.args.get("joins") or [], start=1):
        provides[index] -= {item.name.lower() for item in join.args.get("using") or []}
    joins = tree.args.get("joins") or []
    order = tree.args.get("order")
    output_names = {output_name(item).lower() for item in tree.expressions}
    for column in list(tree.find_all(exp.Column)):
        if column.table or isinstance(column.this, exp.Star) or _nested_selects(column):
            continue
        name = column.name.lower()
        ordered = column.parent
        if (
            isinstance(ordered, exp.Ordered)
            and ordered.parent is order
            and order is not None
            and name in output_names
        ):
            continue
        clause: exp.Expr = column
        while clause.parent is not None and clause.parent is not tree:
            clause = clause.parent
        seen = len(provides)
        if isinstance(clause, exp.Join):  # JOIN … ON: the items joined so far
            seen = next(i for i, j in enumerate(joins, start=1) if j is clause) + 1
        holders = [index for index, names in enumerate(provides[:seen]) if name in names]
        if len(holders) > 1:
            named = ", ".join(scope.sources[i].reference for i in holders)
            raise Rejected(
                f'column reference "{column.name}" is ambiguous',
                sqlstate="42702",
                hint=f"qualify it with the name or alias of one of {named}",
            )
        if holders and holders[0] in views:
            column.replace(_replacement(column, views[holders[0]][name], tree))


def _check_using(
    tree: exp.Select,
    node: exp.Subquery,
    scope: Scope,
    *,
    outputs: dict[str, exp.Expr],
    starred: list[Source],
    viewed: Provided,
) -> frozenset[str]:
    """Refuse ``JOIN … USING (c)`` with the row-level subquery ``node`` on either side
    unless ``c`` means the same column once the subquery is inlined; return the names of
    the USING columns of the join with ``node`` on its right.

    Inlined, the subquery is its tables under its alias (``<alias>__<name>`` for the
    others), and check_shape resolves ``USING (c)`` against their columns: right for an
    output ``c`` that is a column of that name of just one of its tables, and for a ``c``
    none of its tables has (not the subquery's business). ``SELECT birth_year AS
    patient_id``, an expression, a column the subquery does not select, or a ``c`` that a
    ``*`` takes from a subquery inlined in it would join on another column: refused."""
    alias = node.alias
    position = next(i for i, n in enumerate(_source_nodes(tree)) if n is node)
    merged: set[str] = set()
    for index, join in enumerate(tree.args.get("joins") or [], start=1):
        if index < position:
            continue  # the subquery is on neither side
        for item in join.args.get("using") or []:
            name = item.name.lower()
            holders = [s for s in scope.sources if s.table.columns.get(name)]
            output = outputs.get(name)
            selected = [s for s in starred if s.table.columns.get(name)]
            if name in viewed:
                plain = False
            elif output is None and not selected:
                plain = not holders
            elif output is not None and not selected:
                plain = False
                if isinstance(output, exp.Column) and not isinstance(output.this, exp.Star):
                    source, info = scope.lookup(output, "the subquery")
                    plain = info.name.lower() == name and holders == [source]
            else:
                plain = output is None and selected == holders and len(holders) == 1
            if not plain:
                raise Rejected(
                    f'USING ({item.name}) in a join with subquery "{alias}" is not supported: '
                    f"the subquery must select {item.name} as it is, a column of that name of "
                    "just one of its tables",
                    hint=f"write JOIN … ON instead, e.g. ON x.{item.name} = {alias}.{item.name}",
                )
            if index == position:
                merged.add(name)
    return frozenset(merged)


def _outputs(inner: exp.Select, scope: Scope) -> tuple[dict[str, exp.Expr], list[Source], Provided]:
    """A row-level subquery's named outputs, the tables whose columns it selects all of
    (``*``, ``t.*``), and what it selects all of from subqueries inlined in it: their
    outputs (the columns of their tables are not theirs)."""
    outputs: dict[str, exp.Expr] = {}
    starred: list[Source] = []
    viewed: Provided = {}
    nodes = _source_nodes(inner)

    def star(sources: list[Source]) -> None:
        for source in sources:
            node = nodes[scope.sources.index(source)]
            if VIEW in node.meta:
                for name, value in cast(Provided, node.meta[VIEW]).items():
                    viewed[name] = None if name in viewed else value
            elif not source.hidden:
                starred.append(source)

    for item in inner.expressions:
        if item.find(exp.Window):  # refused where the query uses it, and where it does not
            raise Rejected("window functions are not supported", hint=_FORMS)
        star_item = item if isinstance(item, exp.Star) else item.this
        if isinstance(star_item, exp.Star):
            refuse_extra(star_item, _STAR_ARGS, "in a subquery in FROM", _FORMS)
        if isinstance(item, exp.Star):
            star(list(scope.sources))
        elif isinstance(item, exp.Column) and isinstance(item.this, exp.Star):
            star(_named(scope, item.table))
        elif isinstance(item, exp.Alias):
            _add_output(outputs, item.alias, item.this)
        elif isinstance(item, exp.Column):
            _add_output(outputs, item.name, item)
        else:
            raise Rejected("each item of a row-level subquery needs a name: add AS <name>")
    return outputs, starred, viewed


def _attach(
    tree: exp.Select,
    outer_join: exp.Join | None,
    flattened: list[exp.Join],
    where: exp.Expr | None,
) -> exp.Select:
    """Add an inlined subquery's joins and WHERE where they belong in the outer query:
    after its first table (which replaced the subquery in FROM or in ``outer_join``)."""
    if outer_join is None:
        tree.set("joins", [*flattened, *(tree.args.get("joins") or [])])
        return tree.where(where, copy=False) if where is not None else tree
    left = (outer_join.side or "").upper() == "LEFT"
    if flattened:
        if left or any(j.side for j in flattened) or outer_join.args.get("using"):
            raise Rejected(
                "a subquery with joins of its own can be joined only with JOIN … ON, and "
                "only if its own joins are inner joins",
                hint="move the subquery to FROM, or write its joins in the outer query",
            )
        # Inner joins: the outer ON applies once all the subquery's tables are joined.
        on = outer_join.args.get("on")
        outer_join.set("on", exp.true())
        last = flattened[-1]
        last.set("on", exp.and_(last.args["on"], on) if on is not None else last.args["on"])
        joins_now = list(tree.args.get("joins") or [])
        at = next(i for i, j in enumerate(joins_now) if j is outer_join) + 1
        tree.set("joins", [*joins_now[:at], *flattened, *joins_now[at:]])
    if where is None:
        return tree
    if left:
        on = outer_join.args.get("on")
        outer_join.set("on", exp.and_(on, where) if on is not None else where)
        return tree
    return tree.where(where, copy=False)


def _add_output(outputs: dict[str, T], name: str, value: T) -> None:
    """Each output name once: a repeated name would make a reference ambiguous."""
    if name.lower() in outputs:
        raise Rejected(
            f'the subquery names two columns "{name}"; give each its own name', sqlstate="42702"
        )
    outputs[name.lower()] = value


def _named(scope: Scope, reference: str) -> list[Source]:
    found = [s for s in scope.sources if s.reference.lower() == reference.lower()]
    if not found:
        raise Rejected(f'missing FROM-clause entry for table "{reference}"', sqlstate="42P01")
    return found[:1]


def _per_unit(
    tree: exp.Select,
    node: exp.Subquery,
    inner: exp.Select,
    *,
    scope: Scope,
    joins: tuple[Join, ...],
    catalog: Catalog,
) -> tuple[exp.Select, Catalog]:
    protected = scope.protected
    if not protected:
        raise Rejected("a grouped subquery must read a protected table")
    bounds = check_joins(
        QueryShape(scope, joins, (), None, (), None, order=None, limit=None, offset=None)
    )
    unit_ref, unit_type = _unit_key(inner, scope)
    rows = bounds.max_rows_per_unit
    select = exp.select()
    columns: dict[str, ColumnInfo] = {}
    policies: dict[str, ColumnPolicy] = {}
    unit_name = None
    for item in inner.expressions:
        name = item.alias if isinstance(item, exp.Alias) else None
        body = item.this if isinstance(item, exp.Alias) else item
        if not body.find(exp.AggFunc):
            if check_predicate(body, scope, "the subquery").sql() != unit_ref.sql():
                raise Rejected(
                    "a grouped subquery may select its privacy unit (its GROUP BY key) and "
                    "aggregates",
                    hint=f"select {unit_ref.name} as it appears in GROUP BY",
                )
            unit_name = name or unit_ref.name
            select = select.select(
                exp.alias_(unit_ref.copy(), unit_name, quoted=True, copy=False), copy=False
            )
            _add_output(columns, unit_name, ColumnInfo(unit_name, unit_type, ColumnPolicy()))
            continue
        name = name or output_name(body)
        value, interval = _per_unit_value(body, scope, rows)
        select = select.select(exp.alias_(value, name, quoted=True, copy=False), copy=False)
        kind = ColumnType.INTEGER if interval.integer else ColumnType.FLOAT
        policy = ColumnPolicy(lower=interval.lower, upper=interval.upper)
        _add_output(columns, name, ColumnInfo(name, kind, policy))
        policies[name] = policy
    if unit_name is None:
        raise Rejected(
            f"a grouped subquery must select its privacy unit ({unit_ref.name})",
            hint="the outer query needs it to bound each person's contribution",
        )
    select = select.from_(_table(scope.sources[0]), copy=False)
    for join in bounds.joins:
        select = add_join(
            select, _table(join.source), on=join.on.copy(), join_type=join.kind.upper()
        )
    where = inner.args.get("where")
    if where is not None:
        subqueries = WhereSubqueries(
            catalog,
            expand_subqueries,
            prefix=f"{INNER_PREFIX}q",
            enclosing=bounds.several,
            nullable=frozenset(j.source.alias for j in bounds.joins if j.kind == "left"),
        )
        checked = check_predicate(where.this, scope, subqueries=subqueries, condition=True)
        select = select.where(checked, copy=False)
    select = select.group_by(unit_ref.copy(), copy=False)
    key = f"__{node.alias.lower()}"
    while key in catalog.tables:
        key += "_"  # one virtual table per subquery, even where aliases repeat
    virtual = TableInfo(
        schema="",
        name=node.alias,  # for messages; the catalog finds it under ``key``
        columns=columns,
        # One row per person, which limits no one's groups: the tables' cap is passed on
        # only where one of them sets it, so that the enclosing query's tables set theirs.
        policy=TablePolicy(
            privacy_unit=unit_name,
            max_rows_per_unit=1,
            columns=policies,
            **({"max_groups_per_unit": bounds.max_groups_per_unit} if bounds.groups_set else {}),
        ),
        derived=select,
    )
    node.replace(
        exp.Table(
            this=exp.to_identifier(key), alias=exp.TableAlias(this=exp.to_identifier(node.alias))
        )
    )
    return tree, catalog.with_table(key, virtual)


def _unit_key(inner: exp.Select, scope: Scope) -> tuple[exp.Expr, ColumnType]:
    """The GROUP BY key of a per-person subquery, resolved: a privacy unit column of one of
    its protected tables (all of them are joined along the person), and its type."""
    protected = scope.protected
    units = {
        exp.column(s.table.privacy_unit.name, table=s.alias, quoted=True).sql(): s
        for s in protected
        if s.table.privacy_unit is not None
    }
    first = next(iter(units.values()), None)
    if first is None or first.table.privacy_unit is None:
        path = protected[0].table.unit_path
        holder = path[0].table.name if path else "?"
        raise Rejected(
            f'a grouped subquery over "{protected[0].table.name}" must join "{holder}", '
            "which holds its privacy unit, and GROUP BY that unit",
            hint=f"JOIN {holder} ON … GROUP BY {holder}.<privacy unit>",
        )
    unit = first.table.privacy_unit
    group = inner.args.get("group")
    keys = list(group.expressions) if isinstance(group, exp.Group) else []
    keys = [
        inner.expressions[int(k.this) - 1] if isinstance(k, exp.Literal) and k.is_int else k
        for k in keys
    ]
    keys = [k.this if isinstance(k, exp.Alias) else k for k in keys]
    resolved = [check_predicate(k, scope, "GROUP BY") for k in keys]
    if len(resolved) != 1 or resolved[0].sql() not in units:
        raise Rejected(
            f"a grouped subquery must GROUP BY the privacy unit ({unit.name}) alone",
            hint=f"SELECT {unit.name}, COUNT(*) AS n FROM {first.table.name} GROUP BY {unit.name}",
        )
    return resolved[0], units[resolved[0].sql()].table.column(resolved[0].name).type


def _table(source: Source) -> exp.Expr:
    return exp.Table(
        this=exp.to_identifier(source.table.name, quoted=True),
        db=exp.to_identifier(source.table.schema, quoted=True) if source.table.schema else None,
        alias=exp.TableAlias(this=exp.to_identifier(source.alias, quoted=True)),
    )


def _per_unit_value(body: exp.Expr, scope: Scope, rows: int) -> tuple[exp.Expr, Interval]:
    """A per-person aggregate, clamped in SQL to the bounds returned."""
    if isinstance(body, (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)) and any(
        k not in ("this", "big_int") for k in set_args(body)
    ):
        # Rebuilt from its argument alone: MAX(a, b) would lose b.
        raise Rejected(
            f"{body.key.upper()} with more than one argument is not supported in a "
            "per-person subquery",
            hint="give the aggregate one argument: COUNT(x), SUM(x), AVG(x), MIN(x), MAX(x)",
        )
    if isinstance(body, exp.Count):
        arg = body.this
        if isinstance(arg, exp.Star):
            counted: exp.Expr = exp.Count(this=exp.Star())
        elif isinstance(arg, exp.Distinct):
            values = [clean(_distinct_value(e, scope), scope) for e in arg.expressions]
            counted = exp.Count(this=exp.Distinct(expressions=values))
        else:
            counted = exp.Count(this=clean(check_predicate(arg, scope, "COUNT"), scope))
        return exp.func("LEAST", counted, exp.Literal.number(rows)), Interval(0, rows, True)
    kinds = {exp.Sum: "SUM", exp.Avg: "AVG", exp.Min: "MIN", exp.Max: "MAX"}
    word = next((w for k, w in kinds.items() if type(body) is k), None)
    if word is None:
        raise Rejected(
            f"{body.sql(dialect='postgres')} is not supported in a per-person subquery",
            hint="use COUNT, SUM, AVG, MIN or MAX",
        )
    argument = check_predicate(body.this, scope, word)
    bounds = interval_of(argument, lambda c: _bounds(c, scope, word), scope.info)
    value = clean(argument, scope)
    if word != "SUM":
        aggregated = body.__class__(this=value)
        if word in _FRACTIONAL:
            # The mean of whole numbers need not be one (AVG of 1 and 2 is 1.5): within the
            # same bounds, but a real, never cleaned to an integer by the outer query.
            return aggregated, Interval(bounds.lower, bounds.upper, False)
        return aggregated, bounds  # MIN and MAX: one of the values
    low = min(0.0, rows * bounds.lower)
    high = max(0.0, rows * bounds.upper)
    total = exp.func("LEAST", exp.func("GREATEST", exp.Sum(this=value), _num(low)), _num(high))
    # A SUM of no value is NULL, as in the query written; GREATEST would make it ``low``.
    empty = exp.Sum(this=value.copy()).is_(exp.null())
    return exp.case().when(empty, exp.null()).else_(total), Interval(low, high, bounds.integer)


def _distinct_value(node: exp.Expr, scope: Scope) -> exp.Expr:
    """A value of COUNT(DISTINCT …), resolved: a timestamp with time zone counts its
    distinct instants, as PostgreSQL does (two of them can share a local time)."""
    resolved = check_predicate(node, scope, "COUNT")
    inner = resolved.unnest()
    if is_zoned(inner) and isinstance(inner, exp.Column):
        as_instant(inner)
    elif zoned_value(resolved):
        raise Rejected(
            f"COUNT(DISTINCT {node.sql(dialect='postgres')}) counts computed timestamps with "
            "time zone, which dpproxy does not compare as instants",
            hint="count the distinct values of the column itself, or of its local time: "
            "COUNT(DISTINCT CAST(ts AS TIMESTAMP))",
        )
    return resolved


#: Per-person aggregates whose value can be fractional even when every value aggregated is
#: a whole number (COUNT, SUM, MIN and MAX of integers are integers).
_FRACTIONAL = frozenset({"AVG"})


def _num(value: float) -> exp.Expr:
    literal = exp.Literal.number(repr(abs(value)))
    return exp.Neg(this=literal) if value < 0 else literal


def _bounds(column: exp.Column, scope: Scope, word: str) -> Interval:
    info = scope.info(column)
    if info.policy.bounds is None or not info.type.numeric:
        raise Rejected(
            f'{word} over "{info.name}" needs numeric bounds for it',
            hint="ask an admin to declare lower and upper for the column",
        )
    lower, upper = info.policy.bounds
    integer = info.type is ColumnType.INTEGER and lower.is_integer() and upper.is_integer()
    return Interval(lower, upper, integer)
