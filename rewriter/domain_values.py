"""A query of GROUP BY keys with public domains alone, without an aggregate: BI tools'
lists of a column's values for a filter or a variable (Metabase's field values ``SELECT
department FROM visits GROUP BY department ORDER BY 1 LIMIT 1000``, Grafana's ``SELECT
DISTINCT department FROM visits``).

Its answer is the domains' cells: every declared value, whether or not the data holds it,
as a count grouped by these keys releases a row for each (an empty one with a noisy 0).
They come from the configuration, not the data, so nothing is run, charged or drawn: the
proxy post-processes the cells (select list, HAVING, ORDER BY, LIMIT) and answers them
free (``Plan.domain_values``), saying that they are the declared values.

Only where nothing else in the query could narrow the values in PostgreSQL's answer while
leaving them here, so that the answer does not mislead: one table, no join, and a WHERE
(if any) about the keys' own columns alone, whose cells ``where_cells`` rules out as it
does for a count (``WHERE department IS NOT NULL``, ``department <> 'X'``). Any other
WHERE or a join keeps the refusal of a query without an aggregate.
"""

from __future__ import annotations

from sqlglot import exp

from rewriter.passes.check_shape import QueryShape
from rewriter.passes.group_keys import GroupKey, from_data


def lists_values(shape: QueryShape, where: exp.Expr | None, keys: tuple[GroupKey, ...]) -> bool:
    """Whether a query of ``keys`` alone (if it has no aggregate) may be answered with the
    keys' declared values: keys all with a public domain, one table, and ``where`` (as
    checked) about key columns alone."""
    if not keys or from_data(keys) or shape.joins or len(shape.scope.sources) != 1:
        return False
    if where is None:
        return True
    if where.find(exp.Subquery, exp.Select, exp.Exists) is not None:
        return False
    columns = {
        (k.expression.table, k.expression.name)
        for k in keys
        if isinstance(k.expression, exp.Column)
    }
    return all((c.table, c.name) in columns for c in where.find_all(exp.Column))
