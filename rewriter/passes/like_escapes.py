"""LIKE's escape character on DuckDB: PostgreSQL reads a backslash in a LIKE or ILIKE
pattern as its escape (``'%\\%%'`` matches a text holding a %; ``'a\\_b'`` the text a_b),
DuckDB reads it as a backslash unless the LIKE says ``ESCAPE '\\'``. So every LIKE and
ILIKE of SQL that DuckDB runs (the bounded query on DuckDB, and post-processing) whose
pattern holds a backslash gets ``ESCAPE '\\'``: PostgreSQL's meaning on both engines
(``check_predicate`` keeps patterns constant texts, never ending with a lone backslash).
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlglot import exp

_BACKSLASH = "\\"


def like_escapes(tree: exp.Expr, likes: Iterable[exp.Expr] | None = None) -> exp.Expr:
    """``tree`` (changed in place) with ``ESCAPE '\\'`` after each LIKE or ILIKE whose
    constant pattern holds a backslash and that has no ESCAPE. ``likes``: the LIKEs and
    ILIKEs of ``tree``, if the caller has found them already (in the order of ``find_all``)."""
    for node in list(tree.find_all(exp.Like, exp.ILike)) if likes is None else likes:
        pattern = node.expression
        if isinstance(node.parent, exp.Escape) or not (
            isinstance(pattern, exp.Literal) and pattern.is_string and _BACKSLASH in pattern.name
        ):
            continue
        escaped = exp.Escape(this=node.copy(), expression=exp.Literal.string(_BACKSLASH))
        if node is tree:
            return escaped
        node.replace(escaped)
    return tree
