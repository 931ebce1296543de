"""Pass 2: check the WHERE clause is a row-level predicate and resolve its columns.

Only an allowlist of deterministic, side-effect-free expressions passes; every column
reference is replaced by a quoted reference to the table's own column (alias ``t``), so
the generated SQL never carries an identifier the analyst spelled.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.catalog import TableInfo
from rewriter.errors import Rejected

TABLE_ALIAS = "t"

_STRUCTURE = (
    exp.And,
    exp.Or,
    exp.Not,
    exp.Paren,
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.Is,
    exp.In,
    exp.Between,
    exp.Like,
    exp.ILike,
    exp.NullSafeEQ,
    exp.NullSafeNEQ,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
    exp.Mod,
    exp.Neg,
    exp.DPipe,
    exp.Literal,
    exp.Boolean,
    exp.Null,
    exp.Column,
    exp.Identifier,
    exp.Cast,
    exp.DataType,
    exp.Var,
    exp.Interval,
    exp.Tuple,
)
_FUNCTIONS = (
    exp.Lower,
    exp.Upper,
    exp.Abs,
    exp.Coalesce,
    exp.Length,
    exp.Trim,
    exp.Extract,
    exp.Round,
    exp.Floor,
    exp.Ceil,
    exp.Substring,
    exp.Sign,
)
_CAST_TYPES = frozenset(
    {
        exp.DataType.Type.INT,
        exp.DataType.Type.BIGINT,
        exp.DataType.Type.SMALLINT,
        exp.DataType.Type.DOUBLE,
        exp.DataType.Type.FLOAT,
        exp.DataType.Type.DECIMAL,
        exp.DataType.Type.TEXT,
        exp.DataType.Type.VARCHAR,
        exp.DataType.Type.DATE,
        exp.DataType.Type.TIMESTAMP,
        exp.DataType.Type.BOOLEAN,
    }
)


def check_predicate(predicate: exp.Expr, table: TableInfo, reference: str) -> exp.Expr:
    """Return a copy of ``predicate`` with resolved columns, or raise Rejected."""
    for node in predicate.walk():
        _check_node(node)
    resolved = predicate.copy()
    for column in list(resolved.find_all(exp.Column)):
        column.replace(_resolve(column, table, reference))
    return resolved


def _check_node(node: exp.Expr) -> None:
    if isinstance(node, exp.In) and (node.args.get("query") or node.args.get("unnest")):
        raise Rejected("subqueries in WHERE are not supported yet")
    if isinstance(node, exp.Cast) and node.to.this not in _CAST_TYPES:
        raise Rejected(f"casting to {node.to.sql(dialect='postgres')} is not supported in WHERE")
    if isinstance(node, exp.Column) and not isinstance(node.this, exp.Identifier):
        raise Rejected("WHERE may refer to columns by name only")
    if isinstance(node, _STRUCTURE + _FUNCTIONS):
        return
    if isinstance(node, exp.AggFunc):
        raise Rejected("aggregates are not allowed in WHERE", sqlstate="42803")
    if isinstance(node, (exp.Subquery, exp.Select, exp.Exists)):
        raise Rejected("subqueries in WHERE are not supported yet")
    if isinstance(node, exp.Func):
        name = node.sql_name() if not isinstance(node, exp.Anonymous) else str(node.this)
        raise Rejected(
            f"function {name.lower()}() is not allowed in WHERE",
            hint=(
                "allowed functions: lower, upper, abs, coalesce, length, trim, extract, "
                "round, floor, ceil, substring, sign"
            ),
        )
    raise Rejected(f"{node.key.upper()} is not allowed in WHERE")


def _resolve(column: exp.Column, table: TableInfo, reference: str) -> exp.Column:
    if column.args.get("db") is not None or column.args.get("catalog") is not None:
        raise Rejected("schema-qualified column references are not supported in WHERE")
    qualifier = column.table
    if qualifier and qualifier.lower() != reference.lower():
        raise Rejected(f'missing FROM-clause entry for table "{qualifier}"', sqlstate="42P01")
    info = table.column(column.name)
    return exp.column(info.name, table=TABLE_ALIAS, quoted=True)
