"""The output columns of a catalog query that PostgreSQL types jsonb: DuckDB has one JSON
type, which the catalog shows as json (proxy.catalog.pgtypes.result_type), so a column of
the query's select list that is jsonb by how it is written (``'{}'::jsonb``,
``to_jsonb(x)``, ``jsonb_build_object(...)``) is marked here, and its JSON answer is
described as jsonb (3802). A jsonb column read through a subquery stays json."""

from __future__ import annotations

from sqlglot import exp

#: Functions of PostgreSQL that return jsonb, as sqlglot reads their calls (lower case).
_JSONB_FUNCTIONS = frozenset(
    {
        "to_jsonb",
        "jsonb_build_object",
        "jsonb_build_array",
        "jsonb_agg",
        "jsonb_object",
        "jsonb_strip_nulls",
        "jsonb_set",
        "jsonb_insert",
        "jsonb_path_query_array",
        "jsonb_path_query_first",
    }
)


def jsonb_outputs(tree: exp.Expression) -> frozenset[int]:
    """The positions (from 0) of the select list's jsonb columns."""
    select = tree
    while isinstance(select, exp.SetOperation):  # a UNION's columns: its first query's
        select = select.this
    if not isinstance(select, exp.Select):
        return frozenset()
    return frozenset(
        index for index, projection in enumerate(select.expressions) if _is_jsonb(projection)
    )


def _is_jsonb(node: exp.Expression) -> bool:
    while isinstance(node, (exp.Alias, exp.Paren)):
        node = node.this
    if isinstance(node, exp.Cast):
        return node.to.is_type(exp.DataType.Type.JSONB)
    if isinstance(node, exp.JSONBObjectAgg):
        return True
    return isinstance(node, exp.Anonymous) and str(node.this).lower() in _JSONB_FUNCTIONS
