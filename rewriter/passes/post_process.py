"""Pass 7: the post-processing query, run by the proxy on released (noisy) values only.

The analyst's select list (window functions included: post_windows), DISTINCT, HAVING,
ORDER BY, LIMIT and OFFSET, with aggregates and keys replaced by the released relation's
columns, over ``released(k0…, a0…)``. It runs in an
in-process DuckDB that holds nothing but the released rows: post-processing of DP results
is free, and arithmetic between aggregates, HAVING on noisy counts, ORDER BY and LIMIT keep
their SQL meaning, with two deliberate differences: division is exact (``SUM(x) / COUNT(*)``
is not truncated to an integer), and dividing by zero gives NULL instead of an error, since
a zero can come from the noise. A cast to ``numeric`` reads the value's decimal digits, as
PostgreSQL does (``post_numeric``).
"""

from __future__ import annotations

from collections.abc import Collection

from sqlglot import exp

from rewriter.passes.aggregates import PostQuery
from rewriter.passes.post_numeric import numeric_casts

RELEASED = "released"


def post_query(post: PostQuery, integers: Collection[str] = ()) -> str:
    """The post-processing SQL; ``integers``: the released columns holding integers (a
    cast of one to numeric keeps no decimals: post_numeric)."""

    def written(node: exp.Expr) -> exp.Expr:
        return numeric_casts(safe_division(node), integers)

    select = [written(item) for item in post.select]
    query = exp.select(*select).from_(exp.to_identifier(RELEASED, quoted=True), copy=False)
    if post.distinct:
        query = query.distinct(copy=False)
    if post.having is not None:
        query = query.where(written(post.having), copy=False)
    if post.order is not None:
        query.set("order", numeric_casts(post.order.copy(), integers))
    if post.limit is not None:
        query = query.limit(post.limit, copy=False)
    if post.offset is not None:
        query = query.offset(post.offset, copy=False)
    return query.sql(dialect="duckdb")


def safe_division(node: exp.Expr) -> exp.Expr:
    def replace(sub: exp.Expr) -> exp.Expr:
        if isinstance(sub, (exp.Div, exp.Mod)):
            divisor = exp.func("NULLIF", sub.expression.transform(replace), exp.Literal.number(0))
            return sub.__class__(this=sub.this.transform(replace), expression=divisor)
        return sub

    return node.transform(replace)  # transform copies
