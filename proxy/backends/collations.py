"""DuckDB's column collations: information_schema leaves collation_name empty, so they
are read from each table's CREATE statement (``duckdb_tables().sql``)."""

from __future__ import annotations

import re
from dataclasses import replace

from proxy.backends import DeclaredType, column_type
from rewriter import ColumnType

COLLATIONS_QUERY = "SELECT table_name, sql FROM duckdb_tables() WHERE schema_name = ?"
_COLLATE = re.compile(r"\bCOLLATE\s+(\"[^\"]+\"|\w+)", re.IGNORECASE)


def with_collations(
    declared: dict[str, dict[str, DeclaredType]], statements: list[tuple[object, ...]]
) -> dict[str, dict[str, DeclaredType]]:
    """``declared`` with each text column's collation from its table's CREATE statement.
    A statement that names a collation which cannot be placed on one column gives it to
    every text column of the table (so that a check of unit columns fails closed)."""
    found = {str(table): str(sql) for table, sql in statements if sql is not None}
    result: dict[str, dict[str, DeclaredType]] = {}
    for table, columns in declared.items():
        sql = found.get(table, "")
        result[table] = dict(columns)
        if not _COLLATE.search(sql):
            continue
        placed = False
        for name, column in columns.items():
            definition = re.search(
                r"[(,]\s*\"?" + re.escape(name) + r"\"?\s+[^,()]*?" + _COLLATE.pattern,
                sql,
                re.IGNORECASE,
            )
            if definition is not None:
                result[table][name] = replace(column, collation=definition.group(1).strip('"'))
                placed = True
        if not placed:
            for name, column in columns.items():
                if column_type(column.name) is ColumnType.TEXT:
                    result[table][name] = replace(column, collation="unknown")
    return result
