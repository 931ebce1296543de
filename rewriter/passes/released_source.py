"""Pass 0: a query over the released rows of a DP query in its FROM.

BI tools wrap the SQL an analyst writes in a query of their own: Metabase
``SELECT "source"."department" AS "department", "source"."n" AS "n" FROM (SELECT department,
COUNT(*) AS n FROM visits GROUP BY department) "source" LIMIT 1048575``, Tableau's custom SQL
``SELECT … SUM("Custom SQL Query"."n") … FROM (…) "Custom SQL Query" GROUP BY …``, and
analysts write ``WITH t AS (SELECT …GROUP BY …) SELECT … FROM t WHERE n > 100``.

When a query reads FROM exactly one subquery (or WITH query), and that subquery is a DP
query — it aggregates (or is SELECT DISTINCT), and no key of it is a privacy unit (grouped by
the person it is a per-person table, ``subqueries``, or refused there, saying why) — the
subquery is planned as the query,
and the query around it is post-processing of its released rows, at no cost: it runs in
the post-processing engine over the subquery's answer (``post_process``), as
``WITH "dpproxy_source" AS (<the subquery's post-processing>) <the query around it>``. It
may filter, group, aggregate (COUNT, SUM, AVG, MIN, MAX over released rows), order and
window those rows, with the functions of post-processing; it reads the subquery's columns
and nothing else (no join, no other subquery). Its errors are found before the charge
(``proxy.pre_charge``: the post-processing runs on rows of zeros and ones first).
"""

from __future__ import annotations

from dataclasses import dataclass

import sqlglot
from sqlglot import exp

from rewriter.catalog import Catalog
from rewriter.errors import Rejected
from rewriter.output_names import output_name
from rewriter.passes.aggregates import check_post_node
from rewriter.passes.check_shape import check_alias, check_table, clause_hint, refuse_extra
from rewriter.passes.like_escapes import like_escapes
from rewriter.passes.post_functions import kind
from rewriter.passes.post_kinds import ColumnKinds, Kind
from rewriter.passes.post_process import post_written
from rewriter.passes.post_windows import post_window, window_part

SOURCE = "dpproxy_source"
#: What the query around a released subquery may hold.
_OUTER_ARGS = frozenset(
    {"expressions", "from", "from_", "where", "group", "having", "order", "limit", "offset",
     "distinct", "with", "with_"}
)  # fmt: skip
_SUBQUERY_ARGS = frozenset({"this", "alias"})
#: Aggregates over the released rows.
_AGGREGATES = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)
_FORM = (
    "a query around a DP subquery reads its columns only: SELECT … FROM (SELECT … GROUP BY "
    "…) s [WHERE …] [GROUP BY …] [HAVING …] [ORDER BY …] [LIMIT …]"
)


@dataclass(frozen=True)
class Wrapped:
    """A DP query (``inner``) and the query around it (``outer``), which reads it under
    ``alias``."""

    inner: exp.Select
    outer: exp.Select
    alias: str


def released_source(statement: exp.Expr, catalog: Catalog) -> Wrapped | None:
    """The DP subquery of ``statement`` and the query around it, or None when
    ``statement`` is not a query around one (the other passes plan it)."""
    if not isinstance(statement, exp.Select):
        return None
    source = statement.args.get("from") or statement.args.get("from_")
    if not isinstance(source, exp.From):
        return None
    found = _subquery(statement, source.this)
    if found is None:
        return None
    inner, alias = found
    if not _releases(inner, catalog):
        return None
    _check_source(source.this)
    if statement.args.get("joins"):
        raise Rejected(
            f'a query around a DP subquery ("{alias}") reads it alone: joins are not supported',
            hint="join inside the subquery (a public lookup table on its key, another "
            "protected table along the privacy unit) and aggregate there",
        )
    return Wrapped(inner, statement, alias)


def _subquery(statement: exp.Select, node: exp.Expr) -> tuple[exp.Select, str] | None:
    """The SELECT ``node`` stands for (a subquery, or a WITH query of ``statement``, with
    the WITH queries before it), and the name the query reads it by."""
    if isinstance(node, exp.Subquery) and isinstance(node.this, exp.Select):
        return node.this.copy(), node.alias_or_name
    if not isinstance(node, exp.Table) or node.args.get("db"):
        return None
    clause = statement.args.get("with") or statement.args.get("with_")
    if not isinstance(clause, exp.With):
        return None
    for position, cte in enumerate(clause.expressions):
        if cte.alias.lower() == node.name.lower() and isinstance(cte.this, exp.Select):
            inner = cte.this.copy()
            earlier = [c.copy() for c in clause.expressions[:position]]
            if earlier:
                inner.set("with", exp.With(expressions=earlier))
            return inner, node.alias_or_name
    return None


def _check_source(node: exp.Expr) -> None:
    """Nothing on the subquery (or WITH query's name) but its alias: TABLESAMPLE would be
    dropped."""
    check_alias(node)
    if isinstance(node, exp.Table):
        check_table(node)
        return
    if node.args.get("sample") is not None:
        raise Rejected(
            f'TABLESAMPLE on subquery "{node.alias_or_name}" is not supported',
            hint=clause_hint("sample"),
        )
    refuse_extra(node, _SUBQUERY_ARGS, "on a subquery in FROM", _FORM)


def _releases(inner: exp.Select, catalog: Catalog) -> bool:
    """Whether ``inner`` is a DP query: it aggregates or is SELECT DISTINCT, and no key of
    it is a privacy unit (or the column a table reaches it through): a subquery grouped by
    the person is a per-person table (``subqueries``), one grouped by the person and more
    is refused there, saying why."""
    group = inner.args.get("group")
    keys = list(group.expressions) if isinstance(group, exp.Group) else []
    distinct = inner.args.get("distinct")
    aggregates = any(e.find(exp.AggFunc) for e in inner.expressions)
    if not (keys or aggregates or distinct):
        return released_source(inner, catalog) is not None  # a wrapper of a wrapper
    if (isinstance(group, exp.Group) and group.args.get("all")) or (
        isinstance(distinct, exp.Distinct) and distinct.args.get("on") is not None
    ):
        return False  # GROUP BY ALL, DISTINCT ON: refused there, by name
    if isinstance(distinct, exp.Distinct):
        keys.extend(inner.expressions)
    units = _units(inner, catalog)
    return not any(_key_names(k, inner) & units for k in keys)


def _key_names(key: exp.Expr, inner: exp.Select) -> set[str]:
    """The lower-case names of the columns a GROUP BY key (or DISTINCT item) may stand for:
    itself, the select item at its position, the column an output name of its names."""
    items = inner.expressions
    while isinstance(key, exp.Paren | exp.Alias):
        key = key.this
    if isinstance(key, exp.Literal) and not key.is_string and key.this.isdigit():
        position = int(key.this)
        return _key_names(items[position - 1], inner) if 1 <= position <= len(items) else set()
    if not isinstance(key, exp.Column):
        return set()
    names = {key.name.lower()}
    if not key.table:
        names.update(
            item.this.name.lower()
            for item in items
            if isinstance(item, exp.Alias)
            and item.alias.lower() == key.name.lower()
            and isinstance(item.this, exp.Column)
        )
    return names


def _units(inner: exp.Select, catalog: Catalog) -> set[str]:
    """The privacy unit columns of the tables ``inner`` reads, and the columns of their
    foreign-key paths to it (by name)."""
    names = set()
    for table in inner.find_all(exp.Table):
        try:
            info = catalog.table(table.name)
        except Rejected:
            continue
        if info.privacy_unit is not None:
            names.add(info.privacy_unit.name.lower())
        names.update(hop.column.lower() for hop in info.unit_path)
    return names


def wrapped_post_sql(wrapped: Wrapped, inner_post_sql: str, released: ColumnKinds) -> str:
    """The post-processing SQL of the query around the DP subquery, over the subquery's
    own post-processing (``inner_post_sql``, over a released relation whose columns have
    the kinds ``released``); Rejected for what it may not hold."""
    parsed = sqlglot.parse_one(inner_post_sql, read="duckdb")
    if not isinstance(parsed, exp.Select):
        raise ValueError("a post-processing query is a SELECT")
    listed = [name.lower() for name in _columns(parsed)]
    columns = set(listed)
    repeated = {name for name in listed if listed.count(name) > 1}
    outer = wrapped.outer.copy()
    refuse_extra(outer, _OUTER_ARGS, "in a query around a DP subquery", _FORM)
    outer.set("with", None)
    outer.set("with_", None)
    outer.set("from", None)
    outer.set("from_", None)
    named = {a.alias.lower() for a in outer.expressions if isinstance(a, exp.Alias)}
    for item in list(outer.expressions):  # PostgreSQL's names: max, not DuckDB's max(n)
        if not isinstance(item, exp.Alias) and not item.is_star:
            item.replace(exp.alias_(item.copy(), output_name(item), quoted=True))
    if repeated and any(i.is_star for i in outer.expressions):
        raise Rejected(
            f"the subquery has several columns named {', '.join(sorted(repeated))}: a * "
            "around it is not supported",
            hint="give each of the subquery's columns a name of its own (AS …)",
        )
    for node in list(outer.walk()):
        _check(node, wrapped.alias, columns, named)
        if isinstance(node, exp.Column) and node.name.lower() in repeated:
            raise Rejected(
                f'column reference "{node.name}" is ambiguous',
                sqlstate="42702",
                hint="give each of the subquery's columns a name of its own (AS …)",
            )
    # Each level of wrappers names its source apart (a wrapper of a wrapper).
    name = f"{SOURCE}{inner_post_sql.count(SOURCE)}"
    outer = outer.from_(
        exp.Table(
            this=exp.to_identifier(name, quoted=True),
            alias=exp.TableAlias(this=exp.to_identifier(wrapped.alias or name, quoted=True)),
        ),
        copy=False,
    )
    # The types of the subquery's columns, where its SQL shows them (a count, a cast to
    # numeric); post_functions checks the others on the values.
    known = _column_kinds(parsed, released)
    where = "a query around a DP subquery"
    integers = {name for name, found in known.items() if found is Kind.INTEGER}
    written = post_written(
        outer, integers, lambda c: known.get(c.name.lower(), Kind.UNKNOWN), where
    )
    return f'WITH "{name}" AS ({inner_post_sql}) {like_escapes(written).sql(dialect="duckdb")}'


def _column_kinds(select: exp.Select, released: ColumnKinds) -> dict[str, Kind]:
    """The types of a post-processing query's columns (post_functions' kind), over the
    released relation's columns (``released``) or, for a query around a DP subquery,
    over its source's (its one WITH query); a * gives its source's columns."""
    clause = select.args.get("with") or select.args.get("with_")
    body = clause.expressions[0].this if isinstance(clause, exp.With) else None
    inner = _column_kinds(body, released) if isinstance(body, exp.Select) else {}

    def source(column: exp.Column) -> Kind:
        return inner.get(column.name.lower(), Kind.UNKNOWN)

    found: dict[str, Kind] = {}
    for item in select.expressions:
        if item.is_star:
            for name, known in inner.items():
                found.setdefault(name, known)
        elif isinstance(item, exp.Alias):
            found.setdefault(item.alias.lower(), kind(item.this, source if body else released))
    return found


def _columns(select: exp.Select) -> list[str]:
    """The names of a post-processing query's columns, ``*`` over a wrapped source expanded
    (the source is its one WITH query)."""
    names: list[str] = []
    for item in select.expressions:
        if item.is_star:  # * or s.*
            clause = select.args.get("with") or select.args.get("with_")
            body = clause.expressions[0].this if isinstance(clause, exp.With) else None
            if not isinstance(body, exp.Select):
                raise ValueError("a * in post-processing reads a wrapped source")
            names.extend(_columns(body))
        else:
            names.append(item.alias_or_name)
    return names


def _in_group_or_order(node: exp.Expr) -> bool:
    parent = node.parent
    while parent is not None and not isinstance(parent, exp.Select):
        if isinstance(parent, exp.Group | exp.Order):
            return True
        parent = parent.parent
    return False


def _check(node: exp.Expr, alias: str, columns: set[str], named: set[str]) -> None:
    where = "a query around a DP subquery"
    if isinstance(node, exp.Column):
        if node.table and node.table.lower() != alias.lower():
            raise Rejected(
                f'missing FROM-clause entry for table "{node.table}"',
                sqlstate="42P01",
                hint=f'the query around the subquery reads "{alias}" only',
            )
        if isinstance(node.this, exp.Star):
            return  # s.*: every column of the subquery, as *
        name = node.name.lower()
        # The query's own output names only in GROUP BY and ORDER BY, as in PostgreSQL.
        output = name in named and not node.table and _in_group_or_order(node)
        if name not in columns and not output:
            raise Rejected(
                f'column "{node.sql(dialect="postgres")}" does not exist',
                sqlstate="42703",
                hint=f"the subquery's columns: {', '.join(sorted(columns))}",
            )
        return
    if isinstance(node, exp.Window):
        post_window(node, lambda e: e)
        return
    if isinstance(node, exp.Star) or window_part(node):
        return
    if isinstance(node, exp.Select | exp.Subquery) and node.parent is not None:
        raise Rejected(f"subqueries in {where} are not supported", hint=_FORM)
    if isinstance(node, exp.AggFunc) and not isinstance(node, _AGGREGATES):
        raise Rejected(
            f"the aggregate {node.sql(dialect='postgres')} is not supported in {where}",
            hint="COUNT, SUM, AVG, MIN and MAX of the released rows",
        )
    if isinstance(node, _AGGREGATES + (exp.Alias, exp.Ordered, exp.Order, exp.Group)):
        return
    if isinstance(node, exp.Select | exp.Where | exp.Having | exp.Limit | exp.Offset):
        return
    if isinstance(node, exp.Distinct | exp.Identifier | exp.TableAlias):
        return
    check_post_node(node, where)
