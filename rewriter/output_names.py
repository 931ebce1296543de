"""The names PostgreSQL gives a DP query's output columns (parse_target.c's FigureColname),
so that a client reads them as from PostgreSQL (pandas' ``df["total"]``).

An unquoted name is folded to lower case (``COUNT(*) AS Total`` is "total", ``SEX`` is
"sex"); a quoted one is kept. A function call is named as it was written (``substr``,
``var_samp``, ``pow``, ``ceiling``, ``date_trunc``; ``rewriter.parse`` records the name
before sqlglot's reading makes them ``substring``, ``variance``…), the SQL syntax forms
as PostgreSQL names them (``trim(x)`` is "btrim", ``position(a IN b)`` "position"); a cast
takes its value's name, or else its type's (``x::numeric`` "numeric"); a CASE its ELSE's
name, or else "case"; anything else is "?column?".
"""

from __future__ import annotations

from sqlglot import exp

#: The key of a function node's meta where rewriter.parse records its name as written.
CALL_NAME = "dpproxy_call_name"

#: PostgreSQL's own names of the types a DP query may cast to (format_type's internal
#: names, which name a cast's column: ``x::bigint`` is "int8").
_TYPE_NAMES = {
    exp.DataType.Type.BIGINT: "int8",
    exp.DataType.Type.INT: "int4",
    exp.DataType.Type.SMALLINT: "int2",
    exp.DataType.Type.DOUBLE: "float8",
    exp.DataType.Type.FLOAT: "float4",
    exp.DataType.Type.DECIMAL: "numeric",
    exp.DataType.Type.TEXT: "text",
    exp.DataType.Type.VARCHAR: "varchar",
    exp.DataType.Type.CHAR: "bpchar",
    exp.DataType.Type.DATE: "date",
    exp.DataType.Type.TIMESTAMP: "timestamp",
    exp.DataType.Type.TIMESTAMPTZ: "timestamptz",
    exp.DataType.Type.BOOLEAN: "bool",
    exp.DataType.Type.INTERVAL: "interval",
}
#: What PostgreSQL calls a function that sqlglot reads as one of its own when its name
#: was not recorded (SQL syntax rather than a call: ``EXTRACT(… FROM …)``).
_SYNTAX_NAMES: dict[type[exp.Expr], str] = {
    exp.Extract: "extract",
    exp.StrPosition: "position",
    exp.TimestampTrunc: "date_trunc",
    exp.CurrentDate: "current_date",
    exp.CurrentTimestamp: "current_timestamp",
    exp.VariancePop: "var_pop",
    # Calls whose name the parser records no position of (rewriter.parse).
    exp.GroupConcat: "string_agg",
    exp.JSONArrayAgg: "json_agg",
}
_TRIMS = {"LEADING": "ltrim", "TRAILING": "rtrim"}
_UNNAMED = "?column?"


def output_name(item: exp.Expr) -> str:
    """The column name PostgreSQL gives a select item."""
    if isinstance(item, exp.Alias):
        alias = item.args.get("alias")
        return identifier(alias) if isinstance(alias, exp.Identifier) else item.alias
    return _figured(item)[0]


def identifier(name: exp.Identifier) -> str:
    """A name as PostgreSQL reads it: folded to lower case unless quoted."""
    text = str(name.this)
    return text if name.quoted else text.lower()


def function_name(node: exp.Func) -> str:
    """A function's name as written (recorded by rewriter.parse), else PostgreSQL's name of
    its syntax, else sqlglot's, lower case."""
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    written = _written(node)
    if isinstance(node, exp.Trim) and written in (None, "trim"):
        position = node.args.get("position")
        return _TRIMS.get(str(position).upper(), "btrim") if position else "btrim"
    if written is not None:
        return written
    return _SYNTAX_NAMES.get(type(node)) or node.sql_name().lower()


def _figured(node: exp.Expr) -> tuple[str, int]:
    """The name and how strongly it holds (FigureColnameInternal): 2 for a column's or a
    function's name, 1 for a cast's type or CASE, which an outer cast replaces, 0 for none."""
    if isinstance(node, exp.Paren):
        return _figured(node.this)
    if isinstance(node, exp.Column):
        name = node.this
        return (identifier(name), 2) if isinstance(name, exp.Identifier) else (_UNNAMED, 0)
    if isinstance(node, (exp.Filter, exp.WithinGroup, exp.Window)):
        return _figured(node.this)
    written = _written(node)
    if written is not None:  # a call: mod(a, b) read as a % b, div(a, b) as a cast
        return written, 2
    if isinstance(node, exp.Cast):
        inner = _figured(node.this)
        if inner[1] > 1:
            return inner
        to = node.to
        name = _TYPE_NAMES.get(to.this) or to.sql(dialect="postgres").lower().split("(")[0]
        return name, 1
    if isinstance(node, exp.Case):
        default = node.args.get("default")
        named = _figured(default) if isinstance(default, exp.Expr) else (_UNNAMED, 0)
        return named if named[1] > 1 else ("case", 1)
    if isinstance(node, exp.Subquery):
        inner = node.this
        if isinstance(inner, exp.Select) and len(inner.expressions) == 1:
            return output_name(inner.expressions[0]), 2
        return _UNNAMED, 0
    if operator_form(node):  # COUNT(*) ^ 2, |/ x, a AND b: no name (a call was recorded)
        return _UNNAMED, 0
    if isinstance(node, exp.Func):
        return function_name(node), 2
    return _UNNAMED, 0


def operator_form(node: exp.Expr) -> bool:
    """Whether ``node`` is of a kind sqlglot reads from an operator as well as from a call
    (``x ^ 2`` and ``power(x, 2)``, ``|/ x`` and ``sqrt(x)``, ``a AND b``): it is named
    only if the call's name was recorded (``rewriter.parse``, which records it for these
    even where it is the function's own name)."""
    return isinstance(node, (exp.Binary, exp.Sqrt, exp.Cbrt))


def _written(node: exp.Expr) -> str | None:
    meta = node._meta
    written = meta.get(CALL_NAME) if meta else None
    return written if isinstance(written, str) else None
