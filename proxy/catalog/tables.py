"""The relations a catalog query reads, as the emulated relations of the catalog DuckDB.

A pg_catalog or information_schema relation is a table of the emulation's DuckDB schema.
A session relation, whose rows depend on who asks (pg_roles, pg_database, pg_settings,
information_schema.tables...), is a table macro called with the session's user, database
and settings as literals of the tree; pg_settings also gets each parameter's unit.
pg_cursors' macro is called with the session's open cursors alone (open_cursors).
"""

from __future__ import annotations

from sqlglot import exp

from proxy.catalog.open_cursors import cursors_table
from proxy.catalog.relations import CURSORS_RELATION, PG_CATALOG, Relation, find_relation
from proxy.catalog.session_values import SessionValues
from proxy.catalog.settings import settings_literal, with_units


def rewrite_table(table: exp.Table, session: SessionValues) -> exp.Expression:
    """A relation named in FROM as the emulation's (a CTE's name is left as it is)."""
    schema = table.db.lower() if table.db else None
    relation = find_relation(schema, table.name.lower())
    if relation is None:
        return table  # a CTE
    alias = table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(relation.name))
    return _duck_relation(relation, session, alias)


def _duck_relation(
    relation: Relation, session: SessionValues, alias: exp.TableAlias
) -> exp.Expression:
    schema, _, name = relation.duck_name.partition(".")
    identifier = exp.to_identifier(name.strip('"'), quoted=True)
    if not relation.session:
        return exp.Table(this=identifier, db=exp.to_identifier(schema), alias=alias)
    if relation.key == CURSORS_RELATION:
        return cursors_table(relation, session.cursors, alias)
    call = exp.Anonymous(
        this=identifier,
        expressions=[
            exp.Literal.string(session.user),
            exp.Literal.string(session.database),
            settings_literal(session.settings),
        ],
    )
    if relation.key == (PG_CATALOG, "pg_settings"):
        rows = exp.Table(this=call, db=exp.to_identifier(schema), alias=exp.TableAlias(this="m"))
        return with_units(relation, rows, session, alias)
    return exp.Table(this=call, db=exp.to_identifier(schema), alias=alias)
