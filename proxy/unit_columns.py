"""Privacy-unit columns must compare exactly in the database.

The rewriter links tables, and bounds each person's contribution, with the database's own
equality on the privacy unit (``v.patient_id = p.patient_id``, ``GROUP BY unit``). Where
that equality merges different values, one person's rows count under another's unit:
under a case-insensitive collation 'a' and 'A' are one person, and PostgreSQL compares a
``varchar`` with a ``char(n)`` ignoring trailing spaces ('a ' = 'a'). Measured: removing
one person then moved a count by twice its sensitivity. So the text columns that identify
persons (each protected table's unit column, and both ends of each foreign-key hop) must
use a byte-wise collation, and be all of one type if any is ``char(n)``. (Floating-point
and decimal unit columns are refused by ``rewriter.catalog``.)
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from proxy.backends import DeclaredType, Schema, column_type, find_declared
from rewriter import ColumnType, PolicyError
from rewriter.policy import TablePolicy

#: Collations that compare text byte by byte (None: the column uses the default one).
EXACT_COLLATIONS = frozenset({"c", "posix", "binary"})
#: Column types outside the rewriter's kinds (ColumnType.OTHER) whose equality is exact.
EXACT_OTHER_TYPES = frozenset({"uuid"})
#: PostgreSQL's blank-padded char(n), as information_schema names it (DuckDB has none).
BLANK_PADDED = re.compile(r"(character|char|bpchar)(\s*\(\d+\))?", re.IGNORECASE)


def inexact_equality(found: DeclaredType) -> str | None:
    """Why the database's equality on a column of this declared type could hold between
    different values (ending a sentence that names the column), or None: a type dpproxy
    cannot vouch for (PostgreSQL's citext), or text under a non-byte-wise collation."""
    kind = column_type(found.name)
    if kind is ColumnType.OTHER and found.name.strip().lower() not in EXACT_OTHER_TYPES:
        return (
            f"is of type {found.name}, whose equality dpproxy cannot vouch for "
            "(PostgreSQL's citext, for one, makes 'a' equal 'A')"
        )
    collation = found.collation
    if (
        kind is ColumnType.TEXT
        and collation is not None
        and collation.lower() not in EXACT_COLLATIONS
    ):
        return f'has the collation "{collation}", under which different values can be equal'
    return None


def check_unit_columns(declared: Schema, policies: Mapping[str, TablePolicy]) -> None:
    """Raise PolicyError naming the first unit or foreign-key column that the database
    could compare inexactly."""
    texts: list[tuple[str, DeclaredType]] = []
    for name, policy in policies.items():
        if policy.public or policy.privacy_unit is None:
            continue
        if policy.unit_link is not None:
            column, target, referenced = policy.unit_link
            ends = [(name, column), (target, referenced)]
        else:
            ends = [(name, policy.privacy_unit)]
        for table, col in ends:
            located = find_declared(declared, table, col)
            if located is None:
                continue
            found = located[2]
            where = f'[tables.{name}] privacy_unit: column "{table}.{col}"'
            problem = inexact_equality(found)
            if problem is not None:
                raise PolicyError(
                    f"{where} {problem} (one person's rows would count as another's); use "
                    'an integer, uuid or text column with the default collation or COLLATE "C"'
                )
            if column_type(found.name) is ColumnType.TEXT:
                texts.append((f"{table}.{col}", found))
    padded = [t for t in texts if BLANK_PADDED.fullmatch(t[1].name.strip())]
    if padded and len({(d.name.lower(), d.length) for _, d in texts}) > 1:
        raise PolicyError(
            f'privacy unit column "{padded[0][0]}" is a blank-padded char(n) but other unit '
            "or foreign-key columns are not: the database compares them ignoring trailing "
            "spaces ('a ' = 'a'), so one person's rows could count as another's; give them "
            "all one type (varchar or text)"
        )
