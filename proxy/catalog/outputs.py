"""What a catalog query gives, its limits, and how it fails: shared by the server's side
(proxy.catalog.database) and the catalog engine's process (proxy.catalog.engine_process),
which sends them back pickled. Imports nothing heavy: the engine's process starts fast.
"""

from __future__ import annotations

from dataclasses import dataclass

#: A catalog query is interrupted after this long.
TIMEOUT_SECONDS = 5.0
MAX_ROWS = 100_000
#: The largest answer (about: the length of its text values, 8 bytes for other values).
MAX_BYTES = 64 * 1024 * 1024
#: What DuckDB's own buffers may hold (sorts, hash tables, aggregates, results).
MEMORY_LIMIT = "256MB"
#: The most memory the catalog engine's process may map for its data (Python's objects,
#: DuckDB's buffers, and the strings and lists DuckDB's functions make outside its
#: MEMORY_LIMIT: repeat('x', 1000000000), range(300000000)): its RLIMIT_DATA.
ENGINE_MEMORY_BYTES = 1024 * 1024 * 1024
ENGINE_MEMORY = f"{ENGINE_MEMORY_BYTES // (1024 * 1024)} MB"


class CatalogQueryFailed(Exception):
    """DuckDB could not run a translated catalog query (its message is safe to show: the
    catalog database holds no data)."""


class CatalogQueryTooLong(CatalogQueryFailed):
    """The query ran longer than TIMEOUT_SECONDS or returned more than MAX_ROWS rows."""


class CatalogQueryTimedOut(CatalogQueryTooLong):
    """The query ran longer than TIMEOUT_SECONDS."""


class CatalogResultTooLarge(CatalogQueryFailed):
    """The answer is larger than MAX_BYTES, or the query needs more memory than catalog
    queries may use (MEMORY_LIMIT, ENGINE_MEMORY_BYTES)."""


class CatalogQueryCanceled(CatalogQueryFailed):
    """The query's QueryStop was cancelled: it was interrupted, or never started."""


class CatalogEngineLost(CatalogQueryFailed):
    """The catalog engine's process ended while the query ran (it ran out of memory, or
    was stopped because a catalog query would not stop); it starts again for the next."""


@dataclass(frozen=True)
class QueryOutput:
    column_names: tuple[str, ...]
    column_types: tuple[str, ...]  # DuckDB type names
    rows: list[tuple[object, ...]]
    size: int = 0  # about how many bytes the rows hold (see value_size)


def value_size(value: object) -> int:
    """About how many bytes ``value`` (a row, or one of its values) takes in an answer:
    the length of text and binary values, 8 bytes for any other, nested lists and
    structs counted whole."""
    if isinstance(value, str | bytes):
        return 8 + len(value)
    if isinstance(value, list | tuple):
        return 8 + sum(value_size(item) for item in value)
    if isinstance(value, dict):
        return 8 + sum(value_size(k) + value_size(v) for k, v in value.items())
    return 8


def memory_refusal() -> CatalogResultTooLarge:
    return CatalogResultTooLarge(
        f"it needs more memory than catalog queries may use ({MEMORY_LIMIT} for DuckDB's "
        f"buffers, {ENGINE_MEMORY} in all)"
    )
