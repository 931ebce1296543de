"""Pass 1b: SELECT DISTINCT.

``SELECT DISTINCT a, b FROM t`` asks which values the data holds: it is answered as
``SELECT a, b FROM t GROUP BY a, b``, a query of GROUP BY keys alone, whose groups are
released through partition selection (keys found in the data, with δ; see group_keys and
aggregates). A DISTINCT over aggregates (``SELECT DISTINCT COUNT(*) > 10 FROM t GROUP BY
d``) removes repeated rows of the released answer: post-processing (post_process).

Items that read no column (constants) are not grouped, and an item repeated is grouped
once. With δ = 0 such a query is refused by check_distinct_delta, which says that only δ
helps.

As in PostgreSQL, with DISTINCT each ORDER BY item must be one of the select list's: a
position, an output name, or an expression the select list holds (42P10 otherwise). Items
found as expressions are turned into their positions, so that post-processing orders the
rows it kept.
"""

from __future__ import annotations

from dataclasses import replace

from sqlglot import exp

from rewriter.errors import Rejected
from rewriter.passes.aggregates import is_aggregate, names_output
from rewriter.passes.check_shape import QueryShape
from rewriter.passes.group_keys import GroupKey, from_data, written_form


def distinct(shape: QueryShape) -> QueryShape:
    """``shape`` with a DISTINCT of keys alone made a GROUP BY of its select list, or with
    the ORDER BY of a DISTINCT over aggregates given as select-list positions."""
    if not shape.distinct:
        return shape
    if shape.order is not None:
        shape = replace(shape, order=_order(shape.order, shape))
    if shape.group or shape.having is not None or _aggregates(shape):
        return shape  # DISTINCT over the released rows (or PostgreSQL's 42803)
    keys: dict[str, exp.Expr] = {}
    for position, item in enumerate(shape.select, start=1):
        body = item.this if isinstance(item, exp.Alias) else item
        if body.find(exp.Column):  # constants need no group: post-processing writes them
            keys.setdefault(_written(body, shape), exp.Literal.number(position))
    if not keys:
        return shape  # constants alone: nothing to group (the aggregates pass says so)
    return replace(shape, group=tuple(keys.values()), distinct=False, keys_only=True)


def _order(order: exp.Order, shape: QueryShape) -> exp.Order:
    """``order`` with each item a select-list position or output name (42P10 otherwise)."""
    order = order.copy()
    for ordered in order.expressions:
        position = _position(ordered.this, shape)
        if position is None:
            raise Rejected(
                "for SELECT DISTINCT, ORDER BY expressions must appear in select list",
                sqlstate="42P10",
                hint="order by a select-list position (ORDER BY 2), an output name, or add "
                "the expression to the select list",
            )
        if position:
            ordered.set("this", exp.Literal.number(position))
    return order


def _aggregates(shape: QueryShape) -> bool:
    """Whether the select list, HAVING or ORDER BY holds an aggregate or a window function
    (which runs over released groups: rewriter.passes.post_windows)."""
    parts: list[exp.Expr] = [*shape.select]
    if shape.having is not None:
        parts.append(shape.having)
    if shape.order is not None:
        parts.append(shape.order)
    return any(
        any(is_aggregate(n) or isinstance(n, exp.Window) for n in part.walk()) for part in parts
    )


def _position(target: exp.Expr, shape: QueryShape) -> int | None:
    """0 if ``target`` already names a select item (a position or an output name), the
    item's position if it is one of the select list's expressions, None if neither."""
    if isinstance(target, exp.Literal) or (isinstance(target, exp.Neg) and target.is_number):
        return 0  # a position: the aggregates pass checks it
    if names_output(target, shape.select):
        return 0
    written = _written(target, shape)
    for position, item in enumerate(shape.select, start=1):
        body = item.this if isinstance(item, exp.Alias) else item
        if _written(body, shape) == written:
            return position
    return None


def _written(node: exp.Expr, shape: QueryShape) -> str:
    """``node``'s SQL with its columns resolved (as written, if a column is unknown)."""
    try:
        return written_form(node, shape.scope).sql()
    except Rejected:
        return node.unnest().sql()


def check_distinct_delta(shape: QueryShape, keys: tuple[GroupKey, ...], delta: float) -> None:
    """A SELECT DISTINCT made a GROUP BY of keys from the data, and the query may not spend
    δ: refuse, saying that only δ helps (a domain would not: keys of public domains alone
    are refused)."""
    if shape.keys_only and delta == 0 and from_data(keys):
        raise Rejected(
            "SELECT DISTINCT releases values found in the data, and this query may not spend "
            "δ (dpproxy.delta is 0): such values are released only through partition "
            "selection, which spends δ > 0",
            hint="SET dpproxy.delta = 1e-9 (an analyst whose budget has δ = 0 must ask an "
            "admin for a δ first)",
        )
