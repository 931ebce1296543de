"""Pass 7: the post-processing query, run by the proxy on released (noisy) values only.

The analyst's select list (window functions included: post_windows), DISTINCT, HAVING,
ORDER BY, LIMIT and OFFSET, with aggregates and keys replaced by the released relation's
columns, over ``released(k0…, a0…)``. It runs in an
in-process DuckDB that holds nothing but the released rows: post-processing of DP results
is free, and arithmetic between aggregates, HAVING on noisy counts, ORDER BY and LIMIT keep
their SQL meaning, with two deliberate differences: division is exact (``SUM(x) / COUNT(*)``
is not truncated to an integer), and dividing by zero gives NULL instead of an error, since
a zero can come from the noise (``mod`` and ``div`` alike). A cast to ``numeric`` reads
the value's decimal digits, as PostgreSQL does (``post_numeric``); sqrt, power, ln and the
other numeric functions are computed as PostgreSQL computes them, errors included
(``post_functions``); values turned to text and the text functions as PostgreSQL writes
and computes them (``post_strings``, ``post_text``).
"""

from __future__ import annotations

from collections.abc import Collection

from sqlglot import exp

from rewriter.dialects import dialect
from rewriter.passes.aggregates import PostQuery
from rewriter.passes.like_escapes import like_escapes
from rewriter.passes.post_functions import plain_div, post_functions
from rewriter.passes.post_kinds import ColumnKinds, released_kinds
from rewriter.passes.post_numeric import numeric_casts
from rewriter.passes.post_reals import widened_reals
from rewriter.passes.post_strings import post_strings

RELEASED = "released"


def post_query(post: PostQuery, integers: Collection[str] = ()) -> str:
    """The post-processing SQL; ``integers``: the released columns holding integers (a
    cast of one to numeric keeps no decimals: post_numeric; the others hold doubles or
    keys of other types: post_functions)."""

    kinds = released_kinds(integers)

    def written(node: exp.Expr, where: str) -> exp.Expr:
        return post_written(node, integers, kinds, where)

    select = [written(item, "the select list") for item in post.select]
    query = exp.select(*select).from_(exp.to_identifier(RELEASED, quoted=True), copy=False)
    if post.distinct:
        query = query.distinct(copy=False)
    if post.having is not None:
        query = query.where(written(post.having, "HAVING"), copy=False)
    if post.order is not None:
        order = widened_reals(plain_div(post.order.copy()), kinds)
        order = post_strings(order, kinds, "ORDER BY")
        order = numeric_casts(order, integers)
        query.set("order", post_functions(order, kinds, "ORDER BY"))
    if post.limit is not None:
        query = query.limit(post.limit, copy=False)
    if post.offset is not None:
        query = query.offset(post.offset, copy=False)
    return like_escapes(query).sql(dialect=dialect("duckdb"), copy=False)  # not kept


def post_written(
    node: exp.Expr, integers: Collection[str], kinds: ColumnKinds, where: str
) -> exp.Expr:
    """An expression of post-processing as DuckDB computes what PostgreSQL would (a copy):
    exact division, reals beside other types in double precision (post_reals), texts
    (post_strings), numeric casts, functions (post_functions);
    Rejected for a function PostgreSQL computes otherwise."""
    divided = widened_reals(safe_division(plain_div(node.copy()), copy=False), kinds)
    texts = post_strings(divided, kinds, where)
    return post_functions(numeric_casts(texts, integers), kinds, where)


def safe_division(node: exp.Expr, *, copy: bool = True) -> exp.Expr:
    """``node`` (a copy, or ``node`` itself changed in place with ``copy=False``) with each
    division and modulo by zero giving NULL."""

    def replace(sub: exp.Expr) -> exp.Expr:
        if isinstance(sub, (exp.Div, exp.Mod)):
            divisor = exp.func("NULLIF", sub.expression.transform(replace), exp.Literal.number(0))
            return sub.__class__(this=sub.this.transform(replace), expression=divisor)
        return sub

    return node.transform(replace, copy=copy)
