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

from proxy.backends import Schema, column_type, find_declared
from proxy.unit_columns import BLANK_PADDED, inexact_equality
from rewriter import ColumnType, PolicyError
from rewriter.policy import TablePolicy


def check_domain_columns(declared: Schema, policies: Mapping[str, TablePolicy]) -> None:
    """Raise PolicyError naming the first column with a domain that the database could
    compare inexactly."""
    for name, policy in policies.items():
        for column, column_policy in policy.columns.items():
            located = find_declared(declared, name, column)
            if column_policy.domain is None or located is None:
                continue
            found = located[2]
            where = f"[tables.{name}.columns.{column}] domain: the column"
            problem = inexact_equality(found)
            if problem is not None:
                raise PolicyError(
                    f"{where} {problem}, so values other than the domain's would match it; "
                    'declare it varchar or text with the default collation or COLLATE "C", '
                    "or remove the domain"
                )
            if column_type(found.name) is ColumnType.TEXT and BLANK_PADDED.fullmatch(
                found.name.strip()
            ):
                raise PolicyError(
                    f"{where} is a blank-padded {found.name}, whose values come "
                    "back padded with spaces; declare it varchar or text, or remove the domain"
                )
