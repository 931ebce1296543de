"""pg_cursors: the cursors open in the asking session, and no other session's.

As pg_settings is made of the session's settings, pg_cursors is made of its cursors
(SessionValues.cursors, which proxy.cursors keeps): the translation calls the table macro
``dp_pg."pg_cursors"(cursors)`` with them as one literal of the syntax tree (a typed list
of structs, never pasted into text), so the catalog engine's process holds no session's
cursors and sees only the asking session's, in its query. The rows are those PostgreSQL
15's view gives: name, statement, is_holdable, is_binary (always false: dpproxy refuses
BINARY cursors), is_scrollable (as dpproxy lets the cursor move: a cursor declared without
SCROLL is NO SCROLL) and creation_time.
"""

from __future__ import annotations

from sqlglot import exp

from proxy.catalog.relations import Relation
from proxy.catalog.session_values import OpenCursor, SessionCursors

#: The fields of a cursor in the macro's argument, with their DuckDB types.
_FIELDS = (
    ("name", "VARCHAR"),
    ("statement", "VARCHAR"),
    ("is_holdable", "BOOLEAN"),
    ("is_binary", "BOOLEAN"),
    ("is_scrollable", "BOOLEAN"),
    ("creation_time", "TIMESTAMPTZ"),
)
_LIST_TYPE = f"STRUCT({', '.join(f'{name} {duck}' for name, duck in _FIELDS)})[]"


def cursors_macro_sql(relation: Relation) -> str:
    """The statement that makes pg_cursors' table macro, taking the session's cursors (a
    list of structs: cursors_literal) and giving PostgreSQL's columns."""
    fields = dict(_FIELDS)
    columns = ", ".join(
        f'CAST(c."{name}" AS {duck}) AS "{name}"'
        if name in fields
        else f'CAST(NULL AS {duck}) AS "{name}"'
        for name, duck in relation.duck_columns()
    )
    return (
        f"CREATE MACRO {relation.duck_name}(cursors) AS TABLE "
        f"SELECT {columns} FROM (SELECT unnest(cursors) AS c)"
    )


def cursors_literal(cursors: SessionCursors) -> exp.Expression:
    """The session's cursors as the macro's argument: a list of structs cast to its type
    (so that a session without cursors gives a typed empty list)."""
    rows = exp.Array(expressions=[_struct(row) for row in cursors.rows])
    return exp.cast(rows, exp.DataType.build(_LIST_TYPE, dialect="duckdb"))


def _struct(row: OpenCursor) -> exp.Expression:
    values: dict[str, exp.Expression] = {
        "name": exp.Literal.string(row.name),
        "statement": exp.Literal.string(row.statement),
        "is_holdable": exp.Boolean(this=row.is_holdable),
        "is_binary": exp.Boolean(this=row.is_binary),
        "is_scrollable": exp.Boolean(this=row.is_scrollable),
        # With its offset (+00:00): read as the same instant whatever the engine's zone.
        "creation_time": exp.Literal.string(row.creation_time.isoformat(sep=" ")),
    }
    return exp.Struct(
        expressions=[
            exp.PropertyEQ(this=exp.to_identifier(name), expression=values[name])
            for name, _ in _FIELDS
        ]
    )


def cursors_table(relation: Relation, cursors: SessionCursors, alias: exp.TableAlias) -> exp.Table:
    """pg_cursors in FROM: the macro called with the asking session's cursors."""
    schema, _, name = relation.duck_name.partition(".")
    call = exp.Anonymous(
        this=exp.to_identifier(name.strip('"'), quoted=True),
        expressions=[cursors_literal(cursors)],
    )
    return exp.Table(this=call, db=exp.to_identifier(schema), alias=alias)
