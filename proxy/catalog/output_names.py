"""The names PostgreSQL gives a catalog query's output columns.

DuckDB names an unnamed column after its text (``SELECT 1`` gives "1", PostgreSQL
"?column?"), and the rewriting changes that text (``current_user`` becomes a literal).
So the names are taken from the query as the client wrote it, before it is
rewritten, and set as quoted aliases of the translation's columns.
"""

from __future__ import annotations

from sqlglot import exp

from proxy.catalog.casts import type_name


def output_names(tree: exp.Expression) -> tuple[str, ...] | None:
    """PostgreSQL's names of the output columns (DuckDB would call ``SELECT 1`` "1");
    None when they are not known (``*``)."""
    select = _first_select(tree)
    if select is None:
        return None
    names: list[str] = []
    for projection in select.expressions:
        if isinstance(projection, exp.Star) or (
            isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star)
        ):
            return None
        if isinstance(projection, exp.Alias):
            alias = projection.args["alias"]
            quoted = isinstance(alias, exp.Identifier) and alias.quoted
            names.append(projection.alias if quoted else projection.alias.lower())
        else:
            names.append(_output_name(projection))
    return tuple(names)


def set_output_names(tree: exp.Expression, names: tuple[str, ...]) -> None:
    """Name the output columns of ``tree`` (rewritten) ``names``."""
    select = _first_select(tree)
    if select is None:
        return
    select.set(
        "expressions",
        [
            exp.alias_(p.this if isinstance(p, exp.Alias) else p, exp.to_identifier(n, quoted=True))
            for p, n in zip(select.expressions, names, strict=True)
        ],
    )


def _first_select(tree: exp.Expression) -> exp.Select | None:
    select = tree
    while isinstance(select, exp.SetOperation):
        select = select.this
    return select if isinstance(select, exp.Select) else None


def _output_name(node: exp.Expression) -> str:
    return _named(node)[0]


def _named(node: exp.Expression) -> tuple[str, int]:
    """PostgreSQL's name of a column and how strongly it holds (FigureColnameInternal): 2
    for a column's or a function's name (and ARRAY's), 1 for a cast's type or CASE, which
    an outer cast replaces, 0 for none (?column?)."""
    if isinstance(node, exp.Cast):
        if isinstance(node.this, exp.IntDiv):
            return "div", 2  # sqlglot reads div(a, b) as CAST(a // b AS DECIMAL)
        inner, strength = _named(node.this)
        if strength > 1:
            return inner, strength
        to = node.args["to"]
        return (type_name(to), 1) if isinstance(to, exp.DataType) else (inner, strength)
    if isinstance(node, exp.Case):
        default = node.args.get("default")
        named = _named(default) if isinstance(default, exp.Expression) else ("case", 0)
        return named if named[1] > 1 else ("case", 1)
    if isinstance(node, exp.Array):
        return "array", 2
    if isinstance(node, exp.Interval):
        return "interval", 1
    name = _plain_name(node)
    return name, 0 if name == "?column?" else 2


def _plain_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Column):
        return node.name
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Anonymous):
        return _output_name(node.expression)
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    if isinstance(node, exp.TimestampTrunc):
        return "date_trunc"
    if isinstance(node, exp.CurrentVersion):
        return "version"  # sqlglot reads version() as CURRENT_VERSION
    if isinstance(node, exp.AtTimeZone):
        return "timezone"  # x AT TIME ZONE z is timezone(z, x)
    if isinstance(node, exp.StrToTime | exp.UnixToTime):
        return "to_timestamp"
    if isinstance(node, exp.Exists):
        return "exists"
    if isinstance(node, exp.Subquery):
        inner = node.this
        if isinstance(inner, exp.Select) and len(inner.expressions) == 1:
            first = inner.expressions[0]
            return first.alias if isinstance(first, exp.Alias) else _output_name(first)
        return "?column?"
    if isinstance(node, exp.Literal | exp.Boolean | exp.Null | exp.Binary | exp.Not | exp.Paren):
        return "?column?"
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return "?column?"
