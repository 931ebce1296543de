"""The script that builds the emulated catalog in DuckDB: its schemas, tables and rows
(``contents.py``), type names, keywords and macros.

Made on the server's side (from the Catalog) and run by the catalog engine's process
(proxy.catalog.engine), which so needs neither the rewriter nor sqlglot.
"""

from __future__ import annotations

from collections.abc import Sequence

from proxy.catalog.arithmetic_macros import arithmetic_macro_statements
from proxy.catalog.contents import (
    CONSTRAINT_DEFINITIONS,
    INDEX_DEFINITIONS,
    Declared,
    Keys,
    Row,
    catalog_rows,
    session_relation_sql,
)
from proxy.catalog.functions import macro_statements
from proxy.catalog.keywords import KEYWORDS
from proxy.catalog.messages import Step, TableRows
from proxy.catalog.open_cursors import cursors_macro_sql
from proxy.catalog.pgtypes import TYPE_ALIASES, TYPES
from proxy.catalog.relations import CURSORS_RELATION, DUCK_SCHEMAS, FUNCTIONS_SCHEMA, RELATIONS
from proxy.catalog.zoned_macros import zoned_macro_statements
from rewriter import Catalog

#: The tables of pg_get_indexdef's and pg_get_constraintdef's answers (contents.py).
_DEFINITIONS = {
    INDEX_DEFINITIONS: (("dp_ix_oid", "BIGINT"), ("dp_ix_col", "BIGINT"), ("dp_ix_def", "VARCHAR")),
    CONSTRAINT_DEFINITIONS: (("dp_cd_oid", "BIGINT"), ("dp_cd_def", "VARCHAR")),
}
_KEYWORD_DESCRIPTIONS = {
    "U": "unreserved",
    "C": "unreserved (cannot be function or type name)",
    "T": "reserved (can be function or type name)",
    "R": "reserved",
}


def build_script(
    catalog: Catalog, declared: Declared | None = None, keys: Keys = ()
) -> tuple[Step, ...]:
    steps: list[Step] = [f"CREATE SCHEMA {schema}" for schema in DUCK_SCHEMAS.values()]
    contents = catalog_rows(catalog, declared, keys)
    for relation in RELATIONS.values():
        columns = relation.duck_columns()
        ddl = ", ".join(f'"{name}" {duck}' for name, duck in columns)
        steps.append(f"CREATE TABLE {relation.base_name} ({ddl})")
        steps += _rows(relation.base_name, [c for c, _ in columns], contents.get(relation.key, []))
    schema = FUNCTIONS_SCHEMA
    steps.append(f"CREATE TABLE {schema}.dp_type_formats (oid BIGINT, formatted VARCHAR)")
    steps += _rows(
        f"{schema}.dp_type_formats",
        ("oid", "formatted"),
        [{"oid": oid, "formatted": t.formatted} for oid, t in TYPES.items()],
    )
    steps.append(f"CREATE TABLE {schema}.dp_type_names (oid BIGINT, name VARCHAR)")
    steps += _rows(
        f"{schema}.dp_type_names",
        ("oid", "name"),
        [{"oid": oid, "name": name} for oid, name in sorted(_type_names())],
    )
    for (table_schema, table), columns in _DEFINITIONS.items():
        name = f"{table_schema}.{table}"
        ddl = ", ".join(f"{column} {duck}" for column, duck in columns)
        steps.append(f"CREATE TABLE {name} ({ddl})")
        steps += _rows(name, [c for c, _ in columns], contents.get((table_schema, table), []))
    steps.append(
        f"CREATE TABLE {schema}.dp_keywords (word VARCHAR, catcode VARCHAR, "
        "barelabel BOOLEAN, catdesc VARCHAR, baredesc VARCHAR)"
    )
    steps += _rows(
        f"{schema}.dp_keywords",
        ("word", "catcode", "barelabel", "catdesc", "baredesc"),
        [
            {
                "word": word,
                "catcode": code,
                "barelabel": bare,
                "catdesc": _KEYWORD_DESCRIPTIONS[code],
                "baredesc": "can be bare label" if bare else "requires AS",
            }
            for (code, bare), words in KEYWORDS.items()
            for word in words.split()
        ],
    )
    steps += macro_statements()
    steps += arithmetic_macro_statements()
    steps += zoned_macro_statements()
    for relation in RELATIONS.values():
        if relation.key == CURSORS_RELATION:
            steps.append(cursors_macro_sql(relation))
        elif relation.session:
            steps.append(
                f"CREATE MACRO {relation.duck_name}(user_name, database_name, settings) "
                f"AS TABLE {session_relation_sql(relation)}"
            )
    return tuple(steps)


def _rows(table: str, columns: Sequence[str], rows: list[Row]) -> list[Step]:
    if not rows:
        return []
    unknown = {name for row in rows for name in row} - set(columns)
    if unknown:
        raise ValueError(f"{table} has no columns {sorted(unknown)}")
    values = tuple(tuple(row.get(name) for name in columns) for row in rows)
    return [TableRows(table, tuple(columns), values)]


def _type_names() -> set[tuple[int, str]]:
    names: set[tuple[int, str]] = set()
    for oid, pg_type in TYPES.items():
        for name in (pg_type.name, pg_type.formatted):
            names.add((oid, name.lower()))
            names.add((oid, f"pg_catalog.{name.lower()}"))
        if pg_type.category == "A":
            element = TYPES.get(pg_type.element)
            if element is not None:
                names.add((oid, f"{element.name}[]"))
    for alias, oid in TYPE_ALIASES.items():
        names.add((oid, alias))
        array = TYPES[oid].array
        if array:
            names.add((array, f"{alias}[]"))
    return names
