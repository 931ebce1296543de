"""The tables whose columns a LEFT JOIN may make NULL, for the GROUP BY keys' domains.

A row of the tables before a ``LEFT JOIN`` that meets no row of the (public) table it joins
is kept, with NULL in each of that table's columns. A key that is such a column, with a
declared domain, then has a NULL group in PostgreSQL: ``visits v LEFT JOIN departments d
ON … GROUP BY d.building`` counts the visits without a department in the building NULL.
So its public domain is the declared values and NULL (``rewriter.passes.group_keys``), and
the NULL cell is released as the others are, always, with noise: which cells are released
depends on the SQL text and the policy alone, never on whether some row found no match.
That cell also holds the rows matched to a row whose column is NULL, as in PostgreSQL.

The rule is the join's kind alone: every table joined with ``LEFT JOIN``, whatever comes
after it. A later inner join or WHERE that compares one of its columns may leave the NULL
cell empty (a noisy 0, as any empty cell of a domain); reading them to leave it out would
drop the rows of a public table's own NULLs, which PostgreSQL shows. A NULL that a
protected table's column holds (no join made it), or a table joined with an inner join, is
left out of a domain key, as before (``docs/sql.md``).
"""

from __future__ import annotations

from rewriter.passes.check_shape import QueryShape


def outer_nullable(shape: QueryShape) -> frozenset[str]:
    """The aliases (``t1``, …) of the sources joined with ``LEFT JOIN``: their columns are
    NULL for the rows the join kept without a match."""
    return frozenset(join.source.alias for join in shape.joins if join.kind == "left")
