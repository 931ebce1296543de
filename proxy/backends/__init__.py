"""Database backends: run the rewriter's SQL and describe the schema (never the data)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from rewriter.catalog import ColumnType
from rewriter.planner import Dialect


class BackendError(Exception):
    """The database failed. Its text is for the audit log and server log, never the analyst."""


class QueryCanceled(BackendError):
    """The query was stopped by a cancel request."""


class CancelToken:
    """Lets a session stop the query its backend is running now."""

    def __init__(self) -> None:
        self._canceller: Callable[[], None] | None = None
        self.canceled = False

    def bind(self, canceller: Callable[[], None] | None) -> None:
        self._canceller = canceller

    def cancel(self) -> None:
        self.canceled = True
        canceller = self._canceller
        if canceller is not None:
            canceller()


class Backend(Protocol):
    dialect: Dialect

    async def schema_columns(self, schema: str) -> Mapping[str, Mapping[str, ColumnType]]:
        """table -> column -> type, from the catalog only."""
        ...

    async def fetch_all(self, sql: str, token: CancelToken) -> list[tuple[object, ...]]:
        """Run ``sql`` (produced by the rewriter) and return its rows."""
        ...

    async def close(self) -> None: ...


_TYPE_PREFIXES: tuple[tuple[str, ColumnType], ...] = (
    ("bigint", ColumnType.INTEGER),
    ("integer", ColumnType.INTEGER),
    ("smallint", ColumnType.INTEGER),
    ("tinyint", ColumnType.INTEGER),
    ("hugeint", ColumnType.INTEGER),
    ("ubigint", ColumnType.INTEGER),
    ("uinteger", ColumnType.INTEGER),
    ("usmallint", ColumnType.INTEGER),
    ("utinyint", ColumnType.INTEGER),
    ("int", ColumnType.INTEGER),
    ("double", ColumnType.FLOAT),
    ("real", ColumnType.FLOAT),
    ("float", ColumnType.FLOAT),
    ("decimal", ColumnType.DECIMAL),
    ("numeric", ColumnType.DECIMAL),
    ("varchar", ColumnType.TEXT),
    ("text", ColumnType.TEXT),
    ("character", ColumnType.TEXT),
    ("char", ColumnType.TEXT),
    ("date", ColumnType.DATE),
    ("timestamp", ColumnType.TIMESTAMP),
    ("boolean", ColumnType.BOOLEAN),
    ("bool", ColumnType.BOOLEAN),
)


def column_type(declared: str) -> ColumnType:
    """Map an information_schema data_type (DuckDB or PostgreSQL spelling) to a ColumnType."""
    lowered = declared.strip().lower()
    for prefix, kind in _TYPE_PREFIXES:
        if lowered.startswith(prefix):
            return kind
    return ColumnType.OTHER


SCHEMA_QUERY = (
    "SELECT table_name, column_name, data_type FROM information_schema.columns "
    "WHERE table_schema = {placeholder} ORDER BY table_name, ordinal_position"
)


def group_columns(rows: list[tuple[str, str, str]]) -> dict[str, dict[str, ColumnType]]:
    tables: dict[str, dict[str, ColumnType]] = {}
    for table, column, declared in rows:
        tables.setdefault(table, {})[column] = column_type(declared)
    return tables
