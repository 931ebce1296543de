"""Pass 1: check the statement's shape: one SELECT over protected and public tables.

Produces a :class:`QueryShape` holding the parts later passes rewrite: the tables and
joins, the select list, WHERE, GROUP BY, HAVING, ORDER BY, LIMIT and OFFSET.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from rewriter.catalog import Catalog, TableInfo
from rewriter.errors import Rejected
from rewriter.scope import Join, Scope, Source


@dataclass(frozen=True)
class QueryShape:
    scope: Scope
    joins: tuple[Join, ...]
    select: tuple[exp.Expr, ...]
    where: exp.Expr | None
    group: tuple[exp.Expr, ...]
    having: exp.Expr | None
    order: exp.Order | None
    limit: exp.Expr | None
    offset: exp.Expr | None

    @property
    def table(self) -> TableInfo:
        """The protected table whose privacy unit identifies the persons."""
        return self.scope.driver.table


_CLAUSE_NAMES = {
    "with": "WITH (common table expressions)",
    "with_": "WITH (common table expressions)",
    "distinct": "SELECT DISTINCT",
    "windows": "WINDOW",
    "qualify": "QUALIFY",
    "into": "SELECT INTO",
    "locks": "FOR UPDATE/SHARE",
    "laterals": "LATERAL",
    "pivots": "PIVOT",
    "sample": "TABLESAMPLE",
    "prewhere": "PREWHERE",
    "settings": "SETTINGS",
    "format": "FORMAT",
    "connect": "CONNECT BY",
    "match": "MATCH_RECOGNIZE",
    "cluster": "CLUSTER BY",
    "distribute": "DISTRIBUTE BY",
    "sort": "SORT BY",
    "kind": "SELECT AS STRUCT/VALUE",
    "operation_modifiers": "query modifiers",
    "options": "query options",
    "hint": "optimizer hints",
}
_ALLOWED_ARGS = frozenset(
    {
        "expressions",
        "from",
        "from_",
        "joins",
        "where",
        "group",
        "having",
        "order",
        "limit",
        "offset",
    }
)


def check_shape(tree: exp.Expr, catalog: Catalog) -> QueryShape:
    if not isinstance(tree, exp.Select):
        raise Rejected(_statement_message(tree))
    for key, value in tree.args.items():
        if key in _ALLOWED_ARGS or value is None or value == [] or value is False:
            continue
        clause = _CLAUSE_NAMES.get(key, key.upper())
        raise Rejected(f"{clause} is not supported yet")
    scope, joins = sources(tree, catalog)
    table = scope.driver.table
    for item in tree.expressions:
        if isinstance(item, exp.Star) or (
            isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
        ):
            raise Rejected(
                "SELECT * would return individual rows; dpproxy answers aggregates only",
                hint="ask for an aggregate, e.g. SELECT COUNT(*) FROM " + table.name,
            )
    where = tree.args.get("where")
    group = tree.args.get("group")
    having = tree.args.get("having")
    order = tree.args.get("order")
    limit = tree.args.get("limit")
    offset = tree.args.get("offset")
    if isinstance(group, exp.Group) and any(
        group.args.get(k) for k in ("grouping_sets", "cube", "rollup")
    ):
        raise Rejected("GROUPING SETS, CUBE and ROLLUP are not supported yet")
    return QueryShape(
        scope=scope,
        joins=joins,
        select=tuple(tree.expressions),
        where=where.this if isinstance(where, exp.Where) else None,
        group=tuple(group.expressions) if isinstance(group, exp.Group) else (),
        having=having.this if isinstance(having, exp.Having) else None,
        order=order if isinstance(order, exp.Order) else None,
        limit=limit.expression if isinstance(limit, exp.Limit) else None,
        offset=offset.expression if isinstance(offset, exp.Offset) else None,
    )


def _statement_message(tree: exp.Expr) -> str:
    if isinstance(tree, (exp.Union, exp.Intersect, exp.Except)):
        return "UNION, INTERSECT and EXCEPT are not supported"
    writes = (
        exp.Insert,
        exp.Update,
        exp.Delete,
        exp.Merge,
        exp.Create,
        exp.Drop,
        exp.Alter,
        exp.Copy,
        exp.TruncateTable,
    )
    if isinstance(tree, writes):
        return "dpproxy is read-only: it answers SELECT queries with aggregates only"
    kind = tree.key.upper()
    if isinstance(tree, exp.Command):
        kind = str(tree.this).upper()
    return f"{kind} statements are not supported"


def sources(
    tree: exp.Select, catalog: Catalog, prefix: str = "t"
) -> tuple[Scope, tuple[Join, ...]]:
    """The tables ``tree`` reads (FROM, then JOINs), aliased ``<prefix>0``, ``<prefix>1``, …"""
    source = tree.args.get("from") or tree.args.get("from_")
    if not isinstance(source, exp.From):
        raise Rejected("a query must read FROM a protected table")
    sources = [_source(source.this, catalog, f"{prefix}0")]
    joins = []
    for index, join in enumerate(tree.args.get("joins") or [], start=1):
        joined = _source(join.this, catalog, f"{prefix}{index}")
        joins.append(Join(joined, _join_kind(join, joined), _join_condition(join, sources, joined)))
        sources.append(joined)
    references = [s.reference.lower() for s in sources]
    if len(set(references)) != len(references):
        raise Rejected("a table name is used twice; give each an alias", sqlstate="42712")
    return Scope(tuple(sources)), tuple(joins)


def _source(node: exp.Expr, catalog: Catalog, generated: str) -> Source:
    if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
        raise Rejected("FROM must name a table; subqueries and table functions are not supported")
    if node.args.get("catalog") is not None:
        raise Rejected("database-qualified table names are not supported", sqlstate="42P01")
    db = node.args.get("db")
    table = catalog.table(node.name, db.name if isinstance(db, exp.Identifier) else None)
    alias = node.args.get("alias")
    reference = alias.name if isinstance(alias, exp.TableAlias) and alias.name else node.name
    return Source(table, reference, generated)


def _join_kind(join: exp.Join, joined: Source) -> str:
    side = (join.side or "").upper()
    kind = (join.kind or "").upper()
    if kind in ("CROSS", "NATURAL") or join.args.get("method"):
        raise Rejected(f"{kind or 'this'} JOIN is not supported; use JOIN … ON")
    if not side and kind in ("", "INNER"):
        return "inner"
    if side == "LEFT":
        if not joined.table.policy.public:
            raise Rejected(
                "LEFT JOIN is supported only with a public lookup table on the right",
                hint="use an inner JOIN between protected tables",
            )
        return "left"
    raise Rejected(f"{side} JOIN is not supported; use JOIN or LEFT JOIN <public table>")


def _join_condition(join: exp.Join, sources: list[Source], joined: Source) -> exp.Expr:
    on = join.args.get("on")
    using = join.args.get("using")
    if isinstance(on, exp.Expr):
        return on
    if using:
        left = sources[-1]
        parts = [
            exp.EQ(
                this=exp.column(c.name, table=left.reference),
                expression=exp.column(c.name, table=joined.reference),
            )
            for c in using
        ]
        return exp.and_(*parts)
    raise Rejected("a JOIN needs ON <condition> or USING (columns)")
