"""The emulated catalog relations: their PostgreSQL columns, and how each is stored in the
in-memory DuckDB that answers catalog queries."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from proxy.catalog.relation_spec import RELATIONS_SPEC

PG_CATALOG = "pg_catalog"
INFORMATION_SCHEMA = "information_schema"
# The DuckDB schemas holding the emulation (never reachable from analysts' SQL directly:
# the translation only ever points table references at them).
DUCK_SCHEMAS = {PG_CATALOG: "dp_pg", INFORMATION_SCHEMA: "dp_is"}
FUNCTIONS_SCHEMA = "dp_pg"

# PostgreSQL column types of the catalog, as DuckDB stores them.
_DUCK_TYPES: dict[str, str] = {
    "boolean": "BOOLEAN",
    "smallint": "SMALLINT",
    "integer": "INTEGER",
    "bigint": "BIGINT",
    "real": "REAL",
    "double precision": "DOUBLE",
    "numeric": "DOUBLE",
    "cardinal_number": "INTEGER",
    "interval": "INTERVAL",
    "timestamp with time zone": "TIMESTAMPTZ",
    "time_stamp": "TIMESTAMPTZ",
    "oid": "BIGINT",
    "regproc": "VARCHAR",
    "regtype": "BIGINT",
    "xid": "BIGINT",
    "int2vector": "SMALLINT[]",
    "oidvector": "BIGINT[]",
    "oid[]": "BIGINT[]",
    "regtype[]": "BIGINT[]",
    "smallint[]": "SMALLINT[]",
    "real[]": "REAL[]",
    "double precision[]": "DOUBLE[]",
    "boolean[]": "BOOLEAN[]",
}
_TEXT_ARRAYS = {'"char"[]', "aclitem[]", "name[]", "text[]", "anyarray", "pg_statistic[]"}

# Relations whose rows depend on who asks (user, database, settings): DuckDB table macros
# taking (user_name, database_name, settings) rather than tables.
SESSION_RELATIONS = frozenset(
    {
        (PG_CATALOG, "pg_roles"),
        (PG_CATALOG, "pg_user"),
        (PG_CATALOG, "pg_database"),
        (PG_CATALOG, "pg_settings"),
        (INFORMATION_SCHEMA, "tables"),
        (INFORMATION_SCHEMA, "columns"),
        (INFORMATION_SCHEMA, "schemata"),
        (INFORMATION_SCHEMA, "views"),
        (INFORMATION_SCHEMA, "table_constraints"),
        (INFORMATION_SCHEMA, "check_constraints"),
        (INFORMATION_SCHEMA, "key_column_usage"),
        (INFORMATION_SCHEMA, "constraint_column_usage"),
        (INFORMATION_SCHEMA, "referential_constraints"),
    }
)
#: The cursors open in the asking session: a DuckDB table macro taking them (the only
#: argument: proxy.catalog.open_cursors).
CURSORS_RELATION = (PG_CATALOG, "pg_cursors")


@dataclass(frozen=True)
class Relation:
    schema: str
    name: str
    kind: str  # pg_class.relkind: r table, v view
    columns: tuple[tuple[str, str], ...]  # (name, PostgreSQL type)

    @property
    def key(self) -> tuple[str, str]:
        return (self.schema, self.name)

    @property
    def session(self) -> bool:
        """Whether its rows depend on the asking session (a table macro's, not a table's)."""
        return self.key in SESSION_RELATIONS or self.key == CURSORS_RELATION

    @property
    def duck_name(self) -> str:
        """The DuckDB object holding the rows (a table macro for session relations)."""
        return f'{DUCK_SCHEMAS[self.schema]}."{self.name}"'

    @property
    def base_name(self) -> str:
        """The DuckDB table holding the rows that do not depend on the session."""
        suffix = "__base" if self.session else ""
        return f'{DUCK_SCHEMAS[self.schema]}."{self.name}{suffix}"'

    def duck_columns(self) -> tuple[tuple[str, str], ...]:
        return tuple((name, duck_type(pg_type)) for name, pg_type in self.columns)


def duck_type(pg_type: str) -> str:
    if pg_type in _DUCK_TYPES:
        return _DUCK_TYPES[pg_type]
    if pg_type in _TEXT_ARRAYS:
        return "VARCHAR[]"
    return "VARCHAR"


def _parse(spec: str) -> dict[tuple[str, str], Relation]:
    entries = re.split(r"\n(?=\S)", spec.strip())
    relations: dict[tuple[str, str], Relation] = {}
    for entry in entries:
        head, _, body = " ".join(entry.split()).partition(": ")
        qualified, kind = head.split(" ")
        schema, name = qualified.split(".")
        columns = tuple(
            (column.split(" ", 1)[0], column.split(" ", 1)[1]) for column in body.split(", ")
        )
        relations[(schema, name)] = Relation(schema, name, kind, columns)
    return relations


RELATIONS: Mapping[tuple[str, str], Relation] = _parse(RELATIONS_SPEC)


def find_relation(schema: str | None, name: str) -> Relation | None:
    """The emulated relation ``schema.name``; without a schema, pg_catalog's (as PostgreSQL
    searches pg_catalog first; information_schema is never on the search path)."""
    return RELATIONS.get((schema or PG_CATALOG, name))
