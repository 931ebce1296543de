"""Pass 1: check the statement's shape: one SELECT over protected and public tables.

Produces a :class:`QueryShape` holding the parts later passes rewrite: the tables and
joins, the select list, WHERE, GROUP BY, HAVING, ORDER BY, LIMIT and OFFSET.

Fail closed: a pass rebuilds the SQL from the parts it understands, so every other clause
sqlglot can attach (to a SELECT, a table, a join, a GROUP BY or LIMIT, an alias) is
refused, not dropped. The checks compare the arguments a node has set with an allowlist
(:func:`unsupported_clause`, :func:`check_table`, :func:`check_alias`), so an argument a
later sqlglot adds is refused too. The subquery passes use the same checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlglot import exp

from rewriter.catalog import Catalog, TableInfo
from rewriter.errors import Rejected
from rewriter.passes.outer_nulls import count_matched_persons
from rewriter.scope import INLINED, Join, Scope, Source


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
    distinct: bool = False  # SELECT DISTINCT (the distinct pass)
    keys_only: bool = False  # a SELECT DISTINCT made a GROUP BY of keys (the distinct pass)

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
    "sample": "USING SAMPLE",  # of a SELECT; TABLESAMPLE is on a table (check_table)
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
    "exclude": "SELECT * EXCLUDE",
    "except_": "* EXCEPT / EXCLUDE",
    "replace": "* REPLACE",
    "rename": "* RENAME",
    "for_": "FOR",
    "group": "GROUP BY",
    "having": "HAVING",
    "order": "ORDER BY",
    "limit": "LIMIT",
    "offset": "OFFSET",
    "fetch": "FETCH FIRST … ROWS",
    "joins": "JOIN",
    # Parts of a clause (see unsupported_clause).
    "group.all": "GROUP BY ALL",
    "group.grouping_sets": "GROUPING SETS",
    "group.cube": "CUBE",
    "group.rollup": "ROLLUP",
    "group.totals": "GROUP BY … WITH TOTALS",
    "limit.limit_options": "LIMIT … PERCENT / WITH TIES",
    "limit.offset": "LIMIT offset, count",
    "limit.expressions": "LIMIT … BY",
    "distinct.on": "DISTINCT ON",
    # Of a table in FROM / JOIN (see check_table).
    "only": "ONLY",
    "ordinality": "WITH ORDINALITY",
    "rows_from": "ROWS FROM",
    "hints": "table hints",
    "indexed": "INDEXED BY",
    "partition": "PARTITION",
    "system_time": "FOR SYSTEM_TIME",
    "version": "time travel (AT / BEFORE / FOR VERSION)",
    "when": "time travel (AT / BEFORE)",
    "changes": "CHANGES",
    "pattern": "a file pattern",
    # Of a join (see sources).
    "global_": "GLOBAL",
    "match_condition": "MATCH_CONDITION",
    "nearest": "NEAREST",
    "directed": "DIRECTED",
    "expressions": "a join's extra expressions",
}
_CLAUSE_HINTS = {
    "sample": "remove it: dpproxy answers over all the rows (its noise already protects "
    "each person)",
    "fetch": "write LIMIT n instead",
    "limit.limit_options": "write LIMIT n (a number of rows)",
    "limit.offset": "write LIMIT count OFFSET offset",
    "group.all": "list the keys: GROUP BY a, b",
    "group.grouping_sets": "run one query per grouping",
    "group.cube": "run one query per grouping",
    "group.rollup": "run one query per grouping",
}

# Clauses, for unsupported_clause: for each argument of a SELECT a pass reads, the class of
# its node and the arguments of that node the pass reads; None for a list (the select list,
# the joins) that the pass checks item by item.
Clauses = Mapping[str, tuple[type[exp.Expr], frozenset[str]] | None]
ROWS: Clauses = {
    "expressions": None,
    "from": (exp.From, frozenset({"this"})),
    "from_": (exp.From, frozenset({"this"})),
    "joins": None,
    "where": (exp.Where, frozenset({"this"})),
}
GROUP: Clauses = {"group": (exp.Group, frozenset({"expressions"}))}
_TOP_LEVEL: Clauses = {
    **ROWS,
    **GROUP,
    "having": (exp.Having, frozenset({"this"})),
    "order": None,  # copied whole into the post-processing query
    "distinct": (exp.Distinct, frozenset()),  # DISTINCT ON refused
    "limit": (exp.Limit, frozenset({"expression"})),
    "offset": (exp.Offset, frozenset({"expression"})),
}
_TABLE_ARGS = frozenset({"this", "db", "catalog", "alias"})
_JOIN_ARGS = frozenset({"this", "on", "using", "side", "kind", "method"})


def set_args(node: exp.Expr) -> list[str]:
    """The arguments set on ``node``: those with a value other than None, False, "" or []."""
    return [
        key
        for key, value in node.args.items()
        if not (
            value is None
            or value is False
            or value == ""
            or (isinstance(value, list) and not value)
        )
    ]


def unsupported_clause(node: exp.Expr, clauses: Clauses) -> str | None:
    """The first clause set on ``node`` that ``clauses`` does not allow, or that has a part
    it does not allow (``"group.all"``, ``"limit.limit_options"``), or whose node is of
    another class (its key: ``"fetch"``); None if there is none. See clause_name."""
    for key in set_args(node):
        if key not in clauses:
            return "fetch" if isinstance(node.args[key], exp.Fetch) else key
        allowed = clauses[key]
        if allowed is None:
            continue
        kind, parts = allowed
        value = node.args[key]
        if not isinstance(value, kind):
            return value.key if isinstance(value, exp.Expr) else key
        extra = next((k for k in set_args(value) if k not in parts), None)
        if extra is not None:
            return f"{key}.{extra}"
    return None


def refuse_extra(node: exp.Expr, allowed: frozenset[str], where: str, hint: str) -> None:
    """Refuse ``node`` if it has an argument set that is not in ``allowed``: "<clause>
    <where> is not supported"."""
    extra = next((k for k in set_args(node) if k not in allowed), None)
    if extra is not None:
        raise Rejected(f"{clause_name(extra)} {where} is not supported", hint=hint)


def clause_name(key: str) -> str:
    """How the SQL writes the clause ``key`` (an argument name, or ``clause.part``)."""
    name = _CLAUSE_NAMES.get(key)
    if name is not None:
        return name
    clause, _, part = key.partition(".")
    if part:
        return f"{clause_name(clause)} … {part.upper().strip('_')}"
    return key.upper().strip("_")


def clause_hint(key: str) -> str | None:
    """What to write instead of the clause ``key``, where there is a specific answer."""
    return _CLAUSE_HINTS.get(key)


def unparenthesize(query: exp.Expr, where: str, hint: str) -> exp.Expr:
    """The query inside extra parentheses (``((SELECT …))``); a clause on the parentheses
    (``((SELECT …) LIMIT 1)``) is refused (``where``: "in FROM", "in WHERE")."""
    while isinstance(query, exp.Subquery):
        unsupported = unsupported_clause(query, {"this": None})
        if unsupported is not None:
            raise Rejected(
                f"{clause_name(unsupported)} on a parenthesized subquery {where} is not supported",
                hint=clause_hint(unsupported) or hint,
            )
        query = query.this
    return query


def check_table(node: exp.Table) -> None:
    """Refuse any clause on a table in FROM / JOIN but its name, schema and alias (the passes
    rebuild each table from those alone)."""
    name = node.name
    for key in set_args(node):
        if key in _TABLE_ARGS:
            continue
        if key == "sample":
            raise Rejected(
                f'TABLESAMPLE on table "{name}" is not supported: a sample answers for some '
                "of the rows, not for the table",
                hint=clause_hint("sample"),
            )
        raise Rejected(
            f'{clause_name(key)} on table "{name}" is not supported',
            hint="name the table alone: FROM <table> [AS <alias>]",
        )
    check_alias(node)


def check_alias(node: exp.Expr) -> None:
    """Refuse a column list in ``node``'s alias (``AS s(a, b)`` renames columns by position,
    which the passes do not carry)."""
    alias = node.args.get("alias")
    if alias is None:
        return
    if not isinstance(alias, exp.TableAlias) or set_args(alias) != ["this"]:
        raise Rejected(
            f"the column list in {alias.sql(dialect='postgres')} is not supported",
            hint="name the columns in the select list instead: (SELECT a AS x, b AS y FROM …) s",
        )


#: What parses as an expression, not a statement.
_EXPRESSIONS = (exp.Literal, exp.Paren, exp.Binary, exp.Unary)


def check_shape(tree: exp.Expr, catalog: Catalog) -> QueryShape:
    if isinstance(tree, _EXPRESSIONS):  # psql's \gexec of SELECT 1 sends "1"
        written = tree.sql(dialect="postgres")[:40]
        raise Rejected(
            f'syntax error at or near "{written}": not a statement',
            sqlstate="42601",
            hint="check the query's syntax",
        )
    if not isinstance(tree, exp.Select):
        raise Rejected(_statement_message(tree))
    unsupported = unsupported_clause(tree, _TOP_LEVEL)
    if unsupported is not None:
        raise Rejected(
            f"{clause_name(unsupported)} is not supported yet", hint=clause_hint(unsupported)
        )
    scope, joins = sources(tree, catalog)
    count_matched_persons(tree, scope, joins)
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
        distinct=isinstance(tree.args.get("distinct"), exp.Distinct),
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
    # A command sqlglot does not know can read as a column (CHECKPOINT) or an aliased one
    # (LISTEN foo): named by its first word, as the analyst wrote it.
    first = tree.this if isinstance(tree, exp.Alias) else tree
    if isinstance(first, exp.Column) and not first.table:
        kind = first.name.upper()
    return f"{kind} statements are not supported"


def sources(
    tree: exp.Select, catalog: Catalog, prefix: str = "t"
) -> tuple[Scope, tuple[Join, ...]]:
    """The tables ``tree`` reads (FROM, then JOINs), aliased ``<prefix>0``, ``<prefix>1``, …"""
    source = tree.args.get("from") or tree.args.get("from_")
    if not isinstance(source, exp.From):
        raise Rejected("a query must read FROM a protected table")
    sources = [_source(source.this, catalog, f"{prefix}0")]
    # The sources whose column an unqualified name means, on the left of the next join.
    left: dict[str, list[Source]] = {}
    _visible(left, sources[0], frozenset())
    joins = []
    for index, join in enumerate(tree.args.get("joins") or [], start=1):
        joined = _source(join.this, catalog, f"{prefix}{index}")
        kind = _join_kind(join)
        on, merged = _join_condition(join, left, joined)
        joins.append(Join(joined, kind, on))
        sources.append(joined)
        _visible(left, joined, merged)
    references = [s.reference.lower() for s in sources]
    if len(set(references)) != len(references):
        raise Rejected("a table name is used twice; give each an alias", sqlstate="42712")
    visible = {name: tuple(found) for name, found in left.items()}
    return Scope(tuple(sources), visible=visible), tuple(joins)


def _source(node: exp.Expr, catalog: Catalog, generated: str) -> Source:
    if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
        raise Rejected("FROM must name a table; subqueries and table functions are not supported")
    if node.args.get("catalog") is not None:
        raise Rejected("database-qualified table names are not supported", sqlstate="42P01")
    check_table(node)
    db = node.args.get("db")
    table = catalog.table(node.name, db.name if isinstance(db, exp.Identifier) else None)
    alias = node.args.get("alias")
    aliased = isinstance(alias, exp.TableAlias) and bool(alias.name)
    reference = alias.name if isinstance(alias, exp.TableAlias) and alias.name else node.name
    return Source(table, reference, generated, hidden=bool(node.meta.get(INLINED)), aliased=aliased)


def _join_kind(join: exp.Join) -> str:
    refuse_extra(
        join,
        _JOIN_ARGS,
        "in a JOIN",
        hint="write JOIN <table> ON <condition>, or LEFT JOIN <table> ON <condition>",
    )
    side = (join.side or "").upper()
    kind = (join.kind or "").upper()
    method = str(join.args.get("method") or "").upper()
    if kind in ("CROSS", "NATURAL") or method:
        raise Rejected(f"{kind or method or 'this'} JOIN is not supported; use JOIN … ON")
    if not side and kind in ("", "INNER"):
        return "inner"
    if side == "LEFT" and kind not in ("", "OUTER"):
        # A semi or anti join filters the left rows: read as a LEFT JOIN it would not.
        raise Rejected(
            f"LEFT {kind} JOIN is not supported",
            hint="write x IN (SELECT …) or [NOT] EXISTS (SELECT …) in WHERE",
        )
    if side == "LEFT":
        # A public lookup table, or a protected table along the privacy unit (checked by
        # check_joins: its ON must link it to a protected table before it).
        return "left"
    written = " ".join(w for w in (side, kind) if w)
    raise Rejected(
        f"{written} JOIN is not supported; use JOIN or LEFT JOIN",
        hint="write a RIGHT JOIN b as b LEFT JOIN a"
        if side == "RIGHT"
        else "write JOIN or LEFT JOIN: dpproxy does not keep the rows of both sides that "
        "meet no row of the other",
    )


def _join_condition(
    join: exp.Join, left: dict[str, list[Source]], joined: Source
) -> tuple[exp.Expr, frozenset[str]]:
    """The join's condition, and the names of the columns USING merges. ``USING (c)``
    compares ``c`` on the right with the one column called ``c`` on the left (whatever
    table it is in, as in PostgreSQL: a column an earlier USING merged counts once, as the
    left one's, which is its value after an inner or a left join)."""
    on = join.args.get("on")
    using = join.args.get("using")
    if isinstance(on, exp.Expr):
        return on, frozenset()
    if not using:
        raise Rejected("a JOIN needs ON <condition> or USING (columns)")
    parts: list[exp.Expr] = []
    merged: set[str] = set()
    hint = "write JOIN … ON with qualified columns, e.g. ON a.x = b.x"
    for item in using:
        name = item.name
        if name.lower() in merged:
            raise Rejected(
                f'column name "{name}" appears more than once in USING clause', sqlstate="42701"
            )
        found = left.get(name.lower(), [])
        if not found:
            raise Rejected(
                f'column "{name}" specified in USING clause does not exist in left table',
                sqlstate="42703",
                hint=hint,
            )
        if len(found) > 1:
            raise Rejected(
                f'common column name "{name}" appears more than once in left table',
                sqlstate="42702",
                hint=hint,
            )
        if joined.table.columns.get(name.lower()) is None:
            raise Rejected(
                f'column "{name}" specified in USING clause does not exist in right table',
                sqlstate="42703",
                hint=hint,
            )
        merged.add(name.lower())
        parts.append(
            exp.EQ(
                this=exp.column(name, table=found[0].reference),
                expression=exp.column(name, table=joined.reference),
            )
        )
    return exp.and_(*parts), frozenset(merged)


def _visible(left: dict[str, list[Source]], source: Source, merged: frozenset[str]) -> None:
    """Add ``source``'s columns to those on the left of the next join, but those a USING
    merged into the left one's."""
    for name in source.table.columns:
        if name not in merged:
            left.setdefault(name, []).append(source)
