"""Pass 1: check the statement's shape and resolve its table and aggregates.

Produces a :class:`QuerySpec`: one protected table, a list of aggregates over its columns
and an optional row-level WHERE (checked by ``passes.check_predicate``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from sqlglot import exp

from rewriter.catalog import Catalog, ColumnInfo, TableInfo
from rewriter.errors import Rejected


class Aggregate(Enum):
    """What one output column asks for."""

    COUNT_ROWS = "COUNT(*)"
    COUNT_VALUES = "COUNT(col)"
    SUM = "SUM(col)"
    AVG = "AVG(col)"


@dataclass(frozen=True)
class OutputRequest:
    name: str
    aggregate: Aggregate
    column: ColumnInfo | None


@dataclass(frozen=True)
class QuerySpec:
    table: TableInfo
    reference: str  # the name or alias the query uses for the table
    outputs: tuple[OutputRequest, ...]
    where: exp.Expr | None


_CLAUSE_NAMES = {
    "with": "WITH (common table expressions)",
    "with_": "WITH (common table expressions)",
    "joins": "JOIN",
    "group": "GROUP BY",
    "having": "HAVING",
    "order": "ORDER BY",
    "limit": "LIMIT",
    "offset": "OFFSET",
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
_ALLOWED_ARGS = frozenset({"expressions", "from", "from_", "where"})


def check_shape(tree: exp.Expr, catalog: Catalog) -> QuerySpec:
    if not isinstance(tree, exp.Select):
        raise Rejected(_statement_message(tree))
    for key, value in tree.args.items():
        if key in _ALLOWED_ARGS or value is None or value == [] or value is False:
            continue
        clause = _CLAUSE_NAMES.get(key, key.upper())
        raise Rejected(f"{clause} is not supported yet")
    table, reference = _resolve_table(tree, catalog)
    outputs = tuple(_output(item, table, reference) for item in tree.expressions)
    where = tree.args.get("where")
    return QuerySpec(
        table=table,
        reference=reference,
        outputs=outputs,
        where=where.this if isinstance(where, exp.Where) else None,
    )


def _statement_message(tree: exp.Expr) -> str:
    if isinstance(tree, (exp.Union, exp.Intersect, exp.Except)):
        return "UNION, INTERSECT and EXCEPT are not supported"
    if isinstance(
        tree,
        (
            exp.Insert,
            exp.Update,
            exp.Delete,
            exp.Merge,
            exp.Create,
            exp.Drop,
            exp.Alter,
            exp.Copy,
            exp.TruncateTable,
        ),
    ):
        return "dpproxy is read-only: it answers SELECT queries with aggregates only"
    kind = tree.key.upper() if isinstance(tree, exp.Expr) else type(tree).__name__
    if isinstance(tree, exp.Command):
        kind = str(tree.this).upper()
    return f"{kind} statements are not supported"


def _resolve_table(tree: exp.Select, catalog: Catalog) -> tuple[TableInfo, str]:
    source = tree.args.get("from") or tree.args.get("from_")
    if not isinstance(source, exp.From):
        raise Rejected("a query must read FROM one protected table")
    node = source.this
    if not isinstance(node, exp.Table) or not isinstance(node.this, exp.Identifier):
        raise Rejected("FROM must name a table; subqueries and table functions are not supported")
    if node.args.get("catalog") is not None:
        raise Rejected("database-qualified table names are not supported", sqlstate="42P01")
    db = node.args.get("db")
    table = catalog.table(node.name, db.name if isinstance(db, exp.Identifier) else None)
    if table.policy.public:
        raise Rejected(
            f'"{table.name}" is a public lookup table; aggregate a protected table instead',
            hint="joins with public tables are not supported yet",
        )
    alias = node.args.get("alias")
    reference = alias.name if isinstance(alias, exp.TableAlias) and alias.name else node.name
    return table, reference


def _output(item: exp.Expr, table: TableInfo, reference: str) -> OutputRequest:
    name: str | None = None
    if isinstance(item, exp.Alias):
        name = item.alias
        item = item.this
    if isinstance(item, exp.Star):
        raise Rejected(
            "SELECT * would return individual rows; dpproxy answers aggregates only",
            hint="ask for an aggregate, e.g. SELECT COUNT(*) FROM " + table.name,
        )
    if isinstance(item, exp.Count):
        arg = item.this
        if isinstance(arg, exp.Star):
            return OutputRequest(name or "count", Aggregate.COUNT_ROWS, None)
        if isinstance(arg, exp.Distinct):
            raise Rejected("COUNT(DISTINCT ...) is not supported yet")
        return OutputRequest(
            name or "count", Aggregate.COUNT_VALUES, _column(arg, table, reference, "COUNT")
        )
    if isinstance(item, (exp.Sum, exp.Avg)):
        which = Aggregate.SUM if isinstance(item, exp.Sum) else Aggregate.AVG
        label = "SUM" if which is Aggregate.SUM else "AVG"
        column = _column(item.this, table, reference, label)
        if not column.type.numeric:
            raise Rejected(
                f'{label}({column.name}): column "{column.name}" is {column.type.value}, '
                "not numeric",
                sqlstate="42883",
                hint=f"{label} needs a numeric column",
            )
        if column.policy.bounds is None:
            raise Rejected(
                f'{label}({column.name}) needs bounds for "{column.name}", and the policy of '
                f'table "{table.name}" declares none',
                hint=(
                    f"ask an admin to declare [tables.{table.name}.columns.{column.name}] "
                    "lower and upper in the configuration"
                ),
            )
        return OutputRequest(name or label.lower(), which, column)
    if isinstance(item, exp.AggFunc):
        raise Rejected(f"the aggregate {item.sql(dialect='postgres')} is not supported yet")
    raise Rejected(
        f"SELECT item {item.sql(dialect='postgres')} is not an aggregate; dpproxy releases "
        "aggregates only"
    )


def _column(arg: exp.Expr, table: TableInfo, reference: str, label: str) -> ColumnInfo:
    if not isinstance(arg, exp.Column) or not isinstance(arg.this, exp.Identifier):
        raise Rejected(
            f"{label} takes a column name; expressions inside aggregates are not supported yet"
        )
    qualifier = arg.table
    if qualifier and qualifier.lower() != reference.lower():
        raise Rejected(f'missing FROM-clause entry for table "{qualifier}"', sqlstate="42P01")
    return table.column(arg.name)
