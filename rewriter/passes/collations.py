"""LIKE and ILIKE under the database's default collation, in the SQL for PostgreSQL.

PostgreSQL before 18 refuses LIKE and ILIKE on a text under a nondeterministic collation
(``CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic =
false)``), and ILIKE on a text whose collation is indeterminate (a CASE choosing between
columns of two different collations), with an error raised only when a row reaches the
operator: under a condition (``CASE WHEN income = 12345 THEN code LIKE 'f%' END``, a
FILTER, a WHERE with AND) the error told whether some row met the condition, after the
charge. The rewriter does not know the columns' collations, so in the SQL for PostgreSQL
the text that every LIKE and ILIKE matches is read under the database's default collation,
``(x) COLLATE "default"``, which is always deterministic: the operator never fails for its
collation. The pattern is a quoted text (``check_types``), of no collation of its own, so
the two never conflict. Nothing changes for a text under the default collation, nor for
LIKE under any deterministic collation (it compares characters); ILIKE folds case as the
database's default collation does, and LIKE on a column of a nondeterministic collation
compares characters exactly (case-sensitive, for a case-insensitive one).

DuckDB raises no such error (its collations change what LIKE matches, never whether it
runs; two different collations in one comparison are refused when the query is bound,
whatever the rows): its SQL is left as it is.

``strpos(a, b)`` and ``position(b IN a)``, which PostgreSQL refuses under a
nondeterministic collation too, search ``((a) COLLATE "default")`` alike (in parentheses:
``position``'s operands take no ``COLLATE``): the explicit collation is the search's
whatever ``b``'s. The other functions PostgreSQL refuses under a
nondeterministic collation (the regular expressions ``~``, ``~*``, ``SIMILAR TO``,
``regexp_…``; ``replace``, ``split_part``, ``starts_with``) are not among the allowed
row-level expressions (``check_predicate``).
"""

from __future__ import annotations

from sqlglot import exp

#: The operators whose text PostgreSQL 15 refuses under a nondeterministic collation.
MATCHING = (exp.Like, exp.ILike, exp.StrPosition)


def default_collation(tree: exp.Expr) -> None:
    """Read the text of every LIKE and ILIKE of ``tree`` (the bounded query, for PostgreSQL)
    under the default collation, in place."""
    for node in list(tree.find_all(*MATCHING)):
        text = collated(node.this)
        node.set("this", exp.Paren(this=text) if isinstance(node, exp.StrPosition) else text)


def collated(text: exp.Expr) -> exp.Expr:
    """``(text) COLLATE "default"`` (a column without parentheses)."""
    operand = text if isinstance(text, (exp.Column, exp.Paren)) else exp.Paren(this=text)
    return exp.Collate(this=operand, expression=exp.Identifier(this="default", quoted=True))
