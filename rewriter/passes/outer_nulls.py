"""The tables whose columns a LEFT JOIN may make NULL, for the GROUP BY keys' domains and
for counts of persons.

A row of the tables before a ``LEFT JOIN`` that meets no row of the table it joins (a
public lookup table, or a protected table along the privacy unit: check_joins) is kept,
with NULL in each of that table's columns. A key that is such a column, with a declared
domain, then has a NULL group in PostgreSQL: ``visits v LEFT JOIN departments d ON …
GROUP BY d.building`` counts the visits without a department in the building NULL, and
``visits v LEFT JOIN patients p ON p.patient_id = v.patient_id GROUP BY p.sex`` the visits
of persons without a patients row in the sex NULL. So its public domain is the declared
values and NULL (``rewriter.passes.group_keys``), and the NULL cell is released as the
others are, always, with noise: which cells are released depends on the SQL text and the
policy alone, never on whether some row found no match. That cell also holds the rows
matched to a row whose column is NULL, as in PostgreSQL.

The rule is the join's kind alone: every table joined with ``LEFT JOIN``, whatever comes
after it. A later inner join or WHERE that compares one of its columns may leave the NULL
cell empty (a noisy 0, as any empty cell of a domain); reading them to leave it out would
drop the rows of a public table's own NULLs, which PostgreSQL shows. A NULL that a
protected table's column holds (no join made it), or a table joined with an inner join, is
left out of a domain key, as before (``docs/sql.md``).

The rows a LEFT JOIN kept belong to the person of the tables before it (the query's unit
is the first protected table's), so a count of persons counts them all. PostgreSQL's
``COUNT(DISTINCT p.patient_id)`` of a protected table ``p`` LEFT JOINed counts only the
persons with a row of ``p`` (its NULL is no value): it is read as ``COUNT(DISTINCT
p.patient_id) FILTER (WHERE NOT p.patient_id IS NULL)``, the same count in SQL, which
dpproxy computes per person (:func:`count_matched_persons`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from sqlglot import exp

from rewriter.errors import Rejected
from rewriter.scope import Join, Scope

if TYPE_CHECKING:  # check_shape calls count_matched_persons
    from rewriter.passes.check_shape import QueryShape


def outer_nullable(shape: QueryShape) -> frozenset[str]:
    """The aliases (``t1``, …) of the sources joined with ``LEFT JOIN``: their columns are
    NULL for the rows the join kept without a match."""
    return frozenset(join.source.alias for join in shape.joins if join.kind == "left")


def count_matched_persons(tree: exp.Select, scope: Scope, joins: Sequence[Join]) -> None:
    """Add ``FILTER (WHERE NOT x IS NULL)`` to each ``COUNT(DISTINCT x)`` of ``tree``'s
    select list, HAVING and ORDER BY (not of a subquery in them) whose ``x`` is the privacy
    unit of a protected table LEFT JOINed (module docstring), ANDed with a FILTER it has.
    ``tree`` is changed in place."""
    nullable = {
        j.source.alias for j in joins if j.kind == "left" and not j.source.table.policy.public
    }
    if not nullable:
        return
    parts = [*tree.expressions, tree.args.get("having"), tree.args.get("order")]
    counts = [
        node
        for part in parts
        if isinstance(part, exp.Expr)
        for node in part.find_all(exp.Count)
        if node.find_ancestor(exp.Query) is tree
    ]
    for count in counts:
        column = _counted(count)
        if column is None:
            continue
        try:
            source, info = scope.lookup(column, "COUNT")
        except Rejected:
            continue  # refused as it was by the aggregates pass
        unit = source.table.privacy_unit
        if source.alias not in nullable or unit is None or unit.name != info.name:
            continue
        matched = exp.Not(this=exp.Is(this=column.copy(), expression=exp.Null()))
        parent = count.parent
        if isinstance(parent, exp.Filter) and count.arg_key == "this":
            where = parent.expression
            written = where.this if isinstance(where, exp.Where) else where
            both = exp.and_(exp.Paren(this=written.copy()), matched)
            parent.set("expression", exp.Where(this=both))
        else:
            filtered = exp.Filter(this=count.copy(), expression=exp.Where(this=matched))
            count.replace(filtered)


def _counted(count: exp.Count) -> exp.Column | None:
    """The column of ``COUNT(DISTINCT column)`` (in parentheses, as an inlined subquery's
    name is), or None."""
    argument = count.this
    if not isinstance(argument, exp.Distinct) or len(argument.expressions) != 1:
        return None
    value = argument.expressions[0]
    while isinstance(value, exp.Paren):
        value = value.this
    return value if isinstance(value, exp.Column) else None
