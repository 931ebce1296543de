"""The columns each public table may be joined on: those known to be unique.

How long a query runs is not protected by the noise (docs/privacy.md). A public lookup
table joined on a column that repeats values multiplies the rows of the rest of the join
(``JOIN departments d1 ON d1.floor = p.sex``, three times, made one row thousands), so a
condition on one person (``WHERE p.patient_id = 42 AND p.income > x``) ran measurably
longer when it held. The rewriter therefore joins a public table only through an equality
on one of its unique columns (rewriter.passes.check_joins), found here when dpproxy starts:

- on PostgreSQL, a PRIMARY KEY, UNIQUE constraint or unique index on that column alone
  (``Backend.key_check``): other sessions can change the rows at any time, so rows unique
  today prove nothing;
- on DuckDB, a declared key or the rows themselves: the file is open read-only, and a file
  changed afterwards is not used before a restart unless the keys are declared in it too
  (``Backend.key_check`` records the columns it finds, proxy.backends.duckdb). One scan of
  the table counts the distinct values of all its candidate columns at once; only the
  columns found unique go to ``key_check`` (which scans the table once more for each that
  has no declared key), so a column that repeats values is recorded nowhere.

A column counts only if a join compares it as it is unique:

- of a type whose equality dpproxy checked on both engines: an integer, decimal, text,
  date, timestamp, boolean or uuid (not a floating-point number, rarely a key, nor a type
  of which it knows nothing: PostgreSQL's citext, an interval);
- a text column under the default or a byte-wise collation ("C", "POSIX", DuckDB's
  "binary"), in a schema whose configured columns carry no other collation: a join
  compares two texts under the collation of either side, and ``'a'`` and ``'A'``, distinct
  in a key, are equal under a case-insensitive one (on both engines; DuckDB's declared
  keys even ignore the column's own collation). Any unique index keeps a column unique
  byte by byte, whatever its collation;
- on PostgreSQL, a varchar column only if no configured column is a blank-padded
  ``character(n)``: ``varchar = character`` converts the varchar, where ``'a'`` and
  ``'a '``, distinct in the key, are equal.

A public table of more than ``max_rows`` rows ([backend] max_public_rows) gets no keys and
may not be read at all (``PublicKeys.oversized``, ``TableInfo.exceeds_rows``): even joined
on its key, the engine reads it only when the other side of the join has a row, so a
condition on one person took 30 ms when it held and 11 ms when not with a 20-million-row
lookup table (docs/privacy.md). Each public table is counted first, reading at most
``max_rows`` + 1 of its rows (``Backend.rows_within``; DuckDB counts again whenever it
opens a changed file).

Cost at startup: that count; PostgreSQL, one catalog query per candidate column of each
public table; DuckDB, one scan of each public table that has a candidate column, plus one
scan per column found unique without a declared key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from proxy.backends import (
    Backend,
    BackendError,
    CancelToken,
    DeclaredType,
    KeyCheck,
    Schema,
    column_type,
)
from proxy.text_collations import exposed_collations
from proxy.unit_columns import BLANK_PADDED, EXACT_COLLATIONS
from rewriter import ColumnType
from rewriter.policy import TablePolicy

#: The kinds of column a join compares exactly (as ColumnType); uuid is told by its name.
_KEY_TYPES = frozenset(
    {
        ColumnType.INTEGER,
        ColumnType.DECIMAL,
        ColumnType.TEXT,
        ColumnType.DATE,
        ColumnType.TIMESTAMP,
        ColumnType.BOOLEAN,
    }
)


@dataclass
class PublicKeys:
    #: table -> its unique columns, as the database spells them (build_catalog's ``unique``).
    unique: dict[str, list[str]] = field(default_factory=dict)
    #: table -> the row limit it exceeds (build_catalog's ``oversized``): not to be read.
    oversized: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # for the log, as information
    warnings: list[str] = field(default_factory=list)  # tables that cannot be joined


async def find_public_keys(
    backend: Backend,
    schema: str,
    declared: Schema,
    policies: Mapping[str, TablePolicy],
    *,
    max_rows: int,
) -> PublicKeys:
    """The unique columns of each public table of ``policies`` that holds at most
    ``max_rows`` rows, and the tables that hold more (a table the schema does not have is
    left to build_catalog to report)."""
    found = PublicKeys()
    collations = set(exposed_collations(declared, policies))
    padded = any(
        BLANK_PADDED.fullmatch(declared_type.name.strip())
        for table, columns in declared.items()
        if table.lower() in {name.lower() for name in policies}
        for declared_type in columns.values()
    )
    postgres = backend.dialect == "postgres"
    for name, policy in policies.items():
        if not policy.public:
            continue
        located = _table(declared, name)
        if located is None:
            continue
        table, columns = located
        if not await _rows_within(backend, schema, table, max_rows):
            found.oversized[table] = max_rows
            found.warnings.append(
                f"public table {table} holds more than {max_rows} rows, so queries cannot "
                "read it (the time a query takes to read a large lookup table can tell "
                "whether one person's row met a condition); give queries a smaller lookup "
                "table, or raise [backend] max_public_rows knowing that cost "
                "(docs/privacy.md) and restart dpproxy"
            )
            continue
        candidates: list[str] = []
        excluded: list[str] = []
        for column, declared_type in columns.items():
            if not _comparable(declared_type):
                continue
            why = _text_problem(declared_type, collations, padded=padded)
            if why is None:
                candidates.append(column)
            else:
                excluded.append(f"{column} ({why})")
        keys, checks = await _unique(backend, schema, table, candidates, postgres=postgres)
        found.unique[table] = keys
        _report(found, table, keys, checks, excluded, postgres=postgres)
    return found


def _table(declared: Schema, name: str) -> tuple[str, Mapping[str, DeclaredType]] | None:
    for table, columns in declared.items():
        if table.lower() == name.lower():
            return table, columns
    return None


def _comparable(declared_type: DeclaredType) -> bool:
    lowered = declared_type.name.strip().lower()
    return lowered == "uuid" or column_type(lowered) in _KEY_TYPES


def _text_problem(declared_type: DeclaredType, collations: set[str], *, padded: bool) -> str | None:
    """Why a join may find two distinct values of this column equal; None if it cannot."""
    if column_type(declared_type.name) is not ColumnType.TEXT:
        return None
    own = declared_type.collation
    if own is not None and own.lower() not in EXACT_COLLATIONS:
        return f'under its collation "{own}" different texts can be equal'
    other = sorted(c for c in collations if c.lower() not in EXACT_COLLATIONS)
    if other:
        listed = ", ".join(f'"{c}"' for c in other)
        return f"a join may compare it under the collation {listed} of other columns"
    lowered = declared_type.name.strip().lower()
    if padded and lowered != "text" and not BLANK_PADDED.fullmatch(lowered):
        return (
            "compared with a character(n) column it is converted to character(n), "
            "which ignores trailing spaces"
        )
    return None


async def _unique(
    backend: Backend, schema: str, table: str, candidates: list[str], *, postgres: bool
) -> tuple[list[str], dict[str, KeyCheck]]:
    """The candidate columns found unique, and how each was found."""
    if not candidates:
        return [], {}
    checked = candidates
    if not postgres:
        checked = await _distinct_now(backend, schema, table, candidates)
    checks = {column: await backend.key_check(schema, table, column) for column in checked}
    keys = [c for c, how in checks.items() if how in (KeyCheck.DECLARED, KeyCheck.VERIFIED)]
    return keys, checks


async def _rows_within(backend: Backend, schema: str, table: str, limit: int) -> bool:
    try:
        return await backend.rows_within(schema, table, limit)
    except BackendError as error:
        raise BackendError(
            f"counting the rows of public table {table} (up to {limit + 1}): {error}"
        ) from None


async def _distinct_now(backend: Backend, schema: str, table: str, columns: list[str]) -> list[str]:
    """The ``columns`` whose values (NULLs aside) are all different now, in one scan."""
    tests = ", ".join(f"COUNT({_quoted(c)}) = COUNT(DISTINCT {_quoted(c)})" for c in columns)
    try:
        rows = await backend.fetch_all(
            f"SELECT {tests} FROM {_quoted(schema)}.{_quoted(table)}", CancelToken()
        )
    except BackendError as error:
        raise BackendError(
            f"counting the distinct values of public table {table}, to find the columns it "
            f"may be joined on: {error}; dpproxy scans each public table once at start: "
            "raise [backend] statement_timeout_seconds, or configure a smaller lookup table"
        ) from None
    if len(rows) != 1 or len(rows[0]) != len(columns):
        raise RuntimeError(f"counting the distinct values of {table}: unexpected answer {rows!r}")
    return [column for column, unique in zip(columns, rows[0], strict=True) if unique is True]


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _report(
    found: PublicKeys,
    table: str,
    keys: list[str],
    checks: Mapping[str, KeyCheck],
    excluded: list[str],
    *,
    postgres: bool,
) -> None:
    skipped = f"; not used: {', '.join(excluded)}" if excluded else ""
    if keys:
        verified = [k for k in keys if checks[k] is KeyCheck.VERIFIED]
        how = (
            f" ({', '.join(verified)} without a declared key: found unique in the rows; a "
            "changed file is used only after a restart, which checks them again)"
            if verified
            else ""
        )
        found.notes.append(f"public table {table} may be joined on {', '.join(keys)}{how}{skipped}")
        return
    declare = (
        f"ALTER TABLE {table} ADD PRIMARY KEY (<column>), or a UNIQUE constraint or unique index"
        if postgres
        else "a PRIMARY KEY or UNIQUE constraint, or a column whose values are all different"
    )
    found.warnings.append(
        f"public table {table} has no column known to be unique, so queries cannot join it "
        f"(a join on a column that repeats values multiplies rows, and the time a query takes "
        f"is not protected); give it a key on the column it is joined on ({declare}) and "
        f"restart dpproxy{skipped}"
    )
