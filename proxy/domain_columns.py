"""Columns with a public domain must compare their values exactly in the database.

``GROUP BY department`` over a declared domain keeps the rows where ``department IN
(<domain>)`` holds by the database's rules, and the release then finds each returned
value in the domain by exact equality. Under a case-insensitive collation the database
keeps 'a' for a domain of 'A' and returns 'a'; PostgreSQL's char(n) returns 'C  ' for
'C'. The release cannot place such a value: before, that failed the query after its
charge, and only when such a row existed (an error that revealed it). So a column with a
domain must have a byte-wise collation and must not be a blank-padded char(n).
"""

from __future__ import annotations

from collections.abc import Mapping

from proxy.backends import Schema, column_type
from proxy.unit_columns import BLANK_PADDED, EXACT_COLLATIONS, EXACT_OTHER_TYPES
from rewriter import ColumnType, PolicyError
from rewriter.policy import TablePolicy


def check_domain_columns(declared: Schema, policies: Mapping[str, TablePolicy]) -> None:
    """Raise PolicyError naming the first column with a domain that the database could
    compare inexactly."""
    tables = {t.lower(): {c.lower(): d for c, d in cols.items()} for t, cols in declared.items()}
    for name, policy in policies.items():
        for column, column_policy in policy.columns.items():
            found = tables.get(name.lower(), {}).get(column.lower())
            if column_policy.domain is None or found is None:
                continue
            where = f"[tables.{name}.columns.{column}] domain"
            kind = column_type(found.name)
            if kind is ColumnType.OTHER and found.name.strip().lower() not in EXACT_OTHER_TYPES:
                raise PolicyError(
                    f"{where}: the column is of type {found.name}, whose equality dpproxy "
                    "cannot vouch for (citext makes 'a' equal 'A'); declare it varchar or "
                    "text, or remove the domain"
                )
            if kind is not ColumnType.TEXT:
                continue
            if found.collation is not None and found.collation.lower() not in EXACT_COLLATIONS:
                raise PolicyError(
                    f'{where}: the column has the collation "{found.collation}", under which '
                    "values other than the domain's compare equal to them; declare it with "
                    'the default collation or COLLATE "C", or remove the domain'
                )
            if BLANK_PADDED.fullmatch(found.name.strip()):
                raise PolicyError(
                    f"{where}: the column is a blank-padded {found.name}, whose values come "
                    "back padded with spaces; declare it varchar or text, or remove the domain"
                )
