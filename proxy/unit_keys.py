"""Foreign-key paths must reference unique columns.

A table reaches its privacy unit through a foreign key (``l_orderkey -> orders.o_orderkey``):
each of its rows belongs to the person of the one row it references. If the referenced
column held a value twice, for two persons, the row would count for both, and removing
one of them would change the other's contribution too: the sensitivity would no longer
hold. So each referenced column must be unique, and stay so while dpproxy runs: on
PostgreSQL a PRIMARY KEY, UNIQUE constraint or unique index on that column alone; on
DuckDB a declared key, or the rows themselves (a file dpproxy has open cannot be written).
"""

from __future__ import annotations

from collections.abc import Mapping

from proxy.backends import Backend, KeyCheck, Schema, find_declared
from rewriter import PolicyError
from rewriter.policy import TablePolicy


async def check_unit_keys(
    backend: Backend, schema: str, declared: Schema, policies: Mapping[str, TablePolicy]
) -> list[str]:
    """Raise PolicyError for the first foreign-key path whose referenced column may hold a
    value twice; return notes for the log on the columns found unique by their rows."""
    notes: list[str] = []
    for name, policy in policies.items():
        link = None if policy.public else policy.unit_link
        if link is None:
            continue
        _, target, referenced = link
        where = f'[tables.{name}] privacy_unit = "{policy.privacy_unit}"'
        located = find_declared(declared, target, referenced)
        if located is None:
            raise PolicyError(f"{where}: the database has no column {target}.{referenced}")
        table, column, _ = located
        found = await backend.key_check(schema, table, column)
        if found is KeyCheck.DUPLICATED:
            raise PolicyError(
                f"{where}: {table}.{column} holds a value in more than one row, so a row of "
                f"{name} could belong to two persons; a foreign-key path must reference a "
                "unique column (a primary key): fix the data or reference another column"
            )
        if found is KeyCheck.UNENFORCED:
            raise PolicyError(
                f"{where}: nothing keeps {table}.{column} unique (no PRIMARY KEY, UNIQUE "
                "constraint or unique index on that column alone), and a value in two rows "
                f"would count a row of {name} for two persons; declare one, e.g. "
                f"ALTER TABLE {table} ADD UNIQUE ({column})"
            )
        if found is KeyCheck.VERIFIED:
            notes.append(
                f"{table}.{column} (referenced by {name}) has no declared key; its rows were "
                "checked to be unique; a changed file is used only after a restart, which checks "
                "them again"
            )
    return notes
