"""On PostgreSQL, the exposed columns may carry at most one collation besides the default.

PostgreSQL gives an operation on two texts the collation of either side when only one of
them has a non-default collation (default + "C" is "C"), but when two columns carry two
different ones ("en-x-icu" and "C", or "C" and "POSIX") the collation is indeterminate,
and ``=``, ``<``, IN, IS DISTINCT FROM, greatest, lower of a coalesce, a join ON them...
fail with "could not determine which collation to use" only when a row reaches the
operator. Under a condition (``CASE WHEN stay = 7 THEN code = other END``) that error,
after the charge, told whether some row met the condition. The rewriter knows no
collations, so dpproxy refuses to start over such a schema. (DuckDB refuses two different
collations when the query is bound, whatever the rows: it needs no such check.)

information_schema.columns names a column's collation only when it is not the database
default (``pg_catalog."default"``), so every name it gives counts, even "default" (a
collation of that name in another schema is not the database default). Every column with
a collation counts, whatever its type (text, varchar, a domain over text, name).
"""

from __future__ import annotations

from collections.abc import Mapping

from proxy.backends import DeclaredType, Schema
from rewriter import PolicyError
from rewriter.policy import TablePolicy

#: How many columns of one collation the message names.
_NAMED = 5


Column = tuple[str, str, DeclaredType]


def exposed_collations(
    declared: Schema, policies: Mapping[str, TablePolicy]
) -> dict[str, list[Column]]:
    """collation -> the (table, column, type) of the configured tables (protected and
    public; all their columns are visible) that carry it, non-default collations only."""
    configured = {name.lower() for name in policies}
    found: dict[str, list[Column]] = {}
    for table, columns in declared.items():
        if table.lower() not in configured:
            continue
        for column, declared_type in columns.items():
            if declared_type.collation is not None:
                found.setdefault(declared_type.collation, []).append((table, column, declared_type))
    return found


def check_text_collations(declared: Schema, policies: Mapping[str, TablePolicy]) -> None:
    """Raise PolicyError, naming the columns and their collations, when the configured
    tables' columns carry two or more different non-default collations (PostgreSQL)."""
    found = exposed_collations(declared, policies)
    if len(found) < 2:
        return
    listed = "; ".join(
        f'"{collation}": {_names(columns)}' for collation, columns in sorted(found.items())
    )
    table, column, example = sorted(found.items())[-1][1][0]
    length = f"({example.length})" if example.length is not None else ""
    raise PolicyError(
        f"the configured tables have columns of {len(found)} different collations "
        f"({listed}); PostgreSQL cannot compare two columns of different collations "
        "(a = b, IN, CASE, a join) and fails only when a row reaches the comparison, after "
        "the query was charged, which would tell whether such a row exists. Give these "
        'columns one collation, or the database default (e.g. ALTER TABLE "'
        f'{table}" ALTER COLUMN "{column}" TYPE {example.name}{length} COLLATE "default"), '
        "or remove the [tables.NAME] sections of the tables analysts need not see"
    )


def _names(columns: list[Column]) -> str:
    shown = ", ".join(f"{table}.{column}" for table, column, _ in columns[:_NAMED])
    more = len(columns) - _NAMED
    return shown if more <= 0 else f"{shown} and {more} more"
