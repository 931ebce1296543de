"""The rewriter's view of the database: tables, column types and policies.

Built by the proxy from the backend's schema (never its data) and the configuration.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import Enum

from sqlglot import exp

from rewriter.errors import PolicyError, Rejected
from rewriter.policy import ColumnPolicy, TablePolicy


class ColumnType(Enum):
    INTEGER = "integer"
    FLOAT = "float"
    DECIMAL = "decimal"
    TEXT = "text"
    DATE = "date"
    TIMESTAMP = "timestamp"
    BOOLEAN = "boolean"
    OTHER = "other"

    @property
    def numeric(self) -> bool:
        return self in (ColumnType.INTEGER, ColumnType.FLOAT, ColumnType.DECIMAL)

    @property
    def temporal(self) -> bool:
        return self in (ColumnType.DATE, ColumnType.TIMESTAMP)


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    type: ColumnType
    policy: ColumnPolicy
    #: (integer digits, decimal places) of a DECIMAL that holds every value of the column
    #: exactly, from its declared type (INTEGER: (10, 0), DECIMAL(15,2): (13, 2)); None
    #: when unknown or when no DECIMAL does (HUGEINT, floats, an unconstrained NUMERIC).
    digits: tuple[int, int] | None = None
    #: A DECIMAL column whose engine stores no NaN or infinity in it (DuckDB; PostgreSQL's
    #: numeric holds NaN), with known ``digits``: every value is a finite number.
    finite: bool = False
    #: A timestamp with time zone (``type`` TIMESTAMP): its values are instants, its
    #: declared bounds instants (UTC), and a query reads its dates and times in the
    #: session's TimeZone (``rewriter.zones``).
    zoned: bool = False
    #: The session's TimeZone that a plan reads this zoned column in (``Catalog.in_zone``);
    #: None outside a plan, and for every other column.
    zone: str | None = None
    #: Why dpproxy does not read this column (a DuckDB TIMESTAMP_NS), for a query that
    #: names it, refused before it is charged (``Scope.lookup``); None for the others.
    unread: str | None = None
    #: The engine's name of an OTHER column's type ("uuid", "json"), lower case: two such
    #: columns compare only when of one type (``value_types.other_values``); None if unknown.
    other_type: str | None = None

    @property
    def whole_bounds(self) -> tuple[int, int] | None:
        """An integer column's declared bounds rounded inwards to whole numbers: the values
        cleaning clamps it to (lower > upper when no whole number lies within the bounds).
        None without bounds or for a column of another type."""
        found = self.policy.bounds
        if found is None or self.type is not ColumnType.INTEGER:
            return None
        return math.ceil(found[0]), math.floor(found[1])

    @property
    def date_bounds(self) -> tuple[dt.date, dt.date] | None:
        """A date or timestamp column's declared bounds as values of the column's type:
        dates for a DATE column; datetimes for a TIMESTAMP column, where date bounds cover
        whole days (lower from 00:00:00, upper until 23:59:59.999999). None without them.
        A ``zoned`` column's bounds are instants in UTC (``rewriter.zones.instant_bound``)."""
        found = self.policy.date_bounds
        if found is None or not self.type.temporal:
            return None
        lower, upper = found
        if self.type is ColumnType.DATE or isinstance(lower, dt.datetime):
            return lower, upper
        return dt.datetime.combine(lower, dt.time.min), dt.datetime.combine(upper, dt.time.max)


@dataclass(frozen=True)
class UnitHop:
    """One step of a foreign-key path to the privacy unit: ``column -> table.referenced``."""

    column: str
    table: TableInfo
    referenced: str


@dataclass(frozen=True)
class TableInfo:
    """A table as the database spells it (``schema``, ``name``) with its policy.

    ``columns`` is keyed by lower-case name; each ColumnInfo keeps the database's spelling.
    """

    schema: str
    name: str
    columns: Mapping[str, ColumnInfo]
    policy: TablePolicy
    derived: exp.Select | None = None  # a per-unit subquery standing in for a table
    unit_path: tuple[UnitHop, ...] = ()  # how rows reach their person, if not directly
    #: The columns (lower-case keys of ``columns``) known to hold each value in at most
    #: one row, under every equality a join may compare them with: a public table may be
    #: joined only through an equality on one of them (rewriter.passes.check_joins). Found
    #: when dpproxy starts (proxy.public_keys); empty when unknown.
    unique_columns: frozenset[str] = frozenset()
    #: A public table found at start to hold more rows than this limit ([backend]
    #: max_public_rows, proxy.public_keys): no query may read it. None when within.
    exceeds_rows: int | None = None

    def column(self, name: str) -> ColumnInfo:
        found = self.columns.get(name.lower())
        if found is None:
            raise Rejected(
                f'column "{name}" does not exist in table "{self.name}"',
                sqlstate="42703",
                hint=f"columns of {self.name}: {', '.join(sorted(self.columns))}",
            )
        return found

    @property
    def privacy_unit(self) -> ColumnInfo | None:
        """The column identifying the person, if this table has one directly."""
        unit = self.policy.privacy_unit
        if unit is None or self.policy.unit_link is not None:
            return None
        return self.columns[unit.lower()]

    @property
    def protected(self) -> bool:
        return not self.policy.public


@dataclass(frozen=True)
class Catalog:
    tables: Mapping[str, TableInfo]

    def with_table(self, key: str, table: TableInfo) -> Catalog:
        return Catalog({**self.tables, key.lower(): table})

    def in_zone(self, zone: str) -> Catalog:
        """The catalog whose timestamp with time zone columns a query reads in ``zone``,
        the session's TimeZone (``rewriter.zones``; checked where a query reads one)."""
        tables = {key: _table_in_zone(table, zone) for key, table in self.tables.items()}
        if all(tables[key] is table for key, table in self.tables.items()):
            return self
        return Catalog(tables)

    def table(self, name: str, schema: str | None = None) -> TableInfo:
        found = self.tables.get(name.lower())
        if found is None or (schema is not None and schema.lower() not in SCHEMA_ALIASES):
            known = ", ".join(sorted(self.tables)) or "none"
            raise Rejected(
                f'relation "{name}" does not exist or is not available through dpproxy',
                sqlstate="42P01",
                hint=f"tables you may query: {known}",
            )
        if found.exceeds_rows is not None:
            raise Rejected(
                f'public table "{found.name}" holds more than {found.exceeds_rows} rows, so '
                "queries cannot read it: the time a query takes to read a large lookup table "
                "can tell whether one person's row met a condition",
                sqlstate="42501",
                hint="ask your dpproxy admin for a smaller lookup table (or to raise [backend] "
                "max_public_rows, knowing that cost)",
            )
        return found


SCHEMA_ALIASES = frozenset({"public", "main"})


def _table_in_zone(table: TableInfo, zone: str) -> TableInfo:
    columns = {
        key: dataclasses.replace(info, zone=zone) if info.zoned else info
        for key, info in table.columns.items()
    }
    path = tuple(
        dataclasses.replace(hop, table=_table_in_zone(hop.table, zone)) for hop in table.unit_path
    )
    changed = any(columns[k] is not table.columns[k] for k in columns)
    if not changed and all(a.table is b.table for a, b in zip(path, table.unit_path, strict=True)):
        return table
    return dataclasses.replace(table, columns=columns, unit_path=path)


class ColumnTypes(dict[str, dict[str, ColumnType]]):
    """table -> column -> ColumnType, as a backend's schema gives them, with the timestamp
    columns that hold a time zone (``zoned``: table -> columns), which ``build_catalog``
    marks (``ColumnInfo.zoned``) when it is not told them otherwise, and the columns it
    does not read (``unread``: table -> column -> why, ``ColumnInfo.unread``), and the
    type names of its OTHER columns (``other_types``, ``ColumnInfo.other_type``)."""

    def __init__(
        self,
        columns: Mapping[str, Mapping[str, ColumnType]],
        zoned: Mapping[str, frozenset[str]] | None = None,
        unread: Mapping[str, Mapping[str, str]] | None = None,
        other_types: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        super().__init__({table: dict(found) for table, found in columns.items()})
        self.zoned: dict[str, frozenset[str]] = dict(zoned or {})
        self.unread: dict[str, dict[str, str]] = {t: dict(c) for t, c in (unread or {}).items()}
        #: table -> OTHER column -> its type's name (``ColumnInfo.other_type``).
        self.other_types: dict[str, dict[str, str]] = {
            t: dict(c) for t, c in (other_types or {}).items()
        }


def build_catalog(
    schema_columns: Mapping[str, Mapping[str, ColumnType]],
    policies: Mapping[str, TablePolicy],
    *,
    schema: str,
    digits: Mapping[str, Mapping[str, tuple[int, int]]] | None = None,
    finite_decimals: bool = False,
    zoned: Mapping[str, Collection[str]] | None = None,
    unique: Mapping[str, Collection[str]] | None = None,
    oversized: Mapping[str, int] | None = None,
) -> Catalog:
    """Combine the backend's columns (table -> column -> type) with the table policies.

    ``digits`` (table -> column -> (integer digits, decimal places)) gives the numeric
    columns whose declared type one DECIMAL holds exactly (``ColumnInfo.digits``).
    ``finite_decimals``: the engine's DECIMAL columns hold no NaN or infinity (DuckDB's
    do not; PostgreSQL's numeric holds NaN), so those with ``digits`` are finite.
    ``zoned`` (table -> columns): the TIMESTAMP columns that are timestamps with time zone
    (``ColumnInfo.zoned``); by default those a ``ColumnTypes`` names.
    ``unique`` (table -> columns): the columns known to hold each value at most once
    (``TableInfo.unique_columns``; proxy.public_keys finds them for the public tables).
    ``oversized`` (table -> row limit): the public tables found to hold more rows than the
    limit, which no query may read (``TableInfo.exceeds_rows``).

    Only tables with a policy are visible. Raises PolicyError naming the table or column
    when a policy refers to something the database does not have.
    """
    by_key = {t.lower(): (t, cols) for t, cols in schema_columns.items()}
    if zoned is None and isinstance(schema_columns, ColumnTypes):
        zoned = schema_columns.zoned
    with_zone = {
        table.lower(): {c.lower() for c in found} for table, found in (zoned or {}).items()
    }
    unread = schema_columns.unread if isinstance(schema_columns, ColumnTypes) else {}
    not_read = {
        table.lower(): {c.lower(): why for c, why in found.items()}
        for table, found in unread.items()
    }
    others = schema_columns.other_types if isinstance(schema_columns, ColumnTypes) else {}
    other_types = {
        table.lower(): {c.lower(): name for c, name in found.items()}
        for table, found in others.items()
    }
    keyed = _unique_columns(unique or {}, by_key)
    too_large = {table.lower(): limit for table, limit in (oversized or {}).items()}
    tables: dict[str, TableInfo] = {}
    for table_name, policy in policies.items():
        key = table_name.lower()
        found = by_key.get(key)
        if found is None:
            raise PolicyError(
                f'[tables.{table_name}]: the database has no table "{table_name}" in schema '
                f'"{schema}"; fix the name or remove the section'
            )
        _one_spelling(
            f"[tables.{table_name}]", "tables", [t for t in schema_columns if t.lower() == key]
        )
        db_name, db_columns = found
        _one_spelling(f"[tables.{table_name}]", f'columns of "{db_name}"', list(db_columns))
        columns = {c.lower(): ty for c, ty in db_columns.items()}
        spelled = {c.lower(): c for c in db_columns}
        for col in policy.columns:
            if col.lower() not in columns:
                raise PolicyError(
                    f'[tables.{table_name}.columns.{col}]: table "{table_name}" has no column '
                    f'"{col}"; columns are {", ".join(sorted(columns))}'
                )
        unit = policy.privacy_unit
        if policy.unit_link is not None:
            unit = policy.unit_link[0]
        if unit is not None and unit.lower() not in columns:
            raise PolicyError(
                f'[tables.{table_name}] privacy_unit = "{unit}": no such column; columns are '
                f"{', '.join(sorted(columns))}"
            )
        if unit is not None and not policy.public:
            _exact_identifier(f"[tables.{table_name}] privacy_unit", unit, columns[unit.lower()])
        for col, col_policy in policy.columns.items():
            where = f"[tables.{table_name}.columns.{col}]"
            _check_bounds_fit(where, col_policy, columns[col.lower()])
            _check_domain_fits(where, col_policy, columns[col.lower()])
        col_policies = {c.lower(): p for c, p in policy.columns.items()}
        declared = {c.lower(): d for c, d in (digits or {}).get(db_name, {}).items()}
        instants = with_zone.get(key, set())
        infos = {
            name: ColumnInfo(
                spelled[name],
                ty,
                col_policies.get(name, ColumnPolicy()),
                declared.get(name) if ty in (ColumnType.INTEGER, ColumnType.DECIMAL) else None,
                finite_decimals and ty is ColumnType.DECIMAL and name in declared,
                zoned=ty is ColumnType.TIMESTAMP and name in instants,
                unread=not_read.get(key, {}).get(name),
                other_type=other_types.get(key, {}).get(name) if ty is ColumnType.OTHER else None,
            )
            for name, ty in columns.items()
        }
        tables[key] = TableInfo(
            schema=schema,
            name=db_name,
            columns=infos,
            policy=policy,
            unique_columns=keyed.get(key, frozenset()),
            exceeds_rows=too_large.get(key),
        )
    return Catalog({key: _with_path(key, tables, ()) for key in tables})


def _one_spelling(where: str, what: str, names: Collection[str]) -> None:
    """Refuse names that differ only in case (``"Zips"`` and ``zips``): dpproxy reads
    names without regard to case, so it could not tell which one a policy, a key check or
    a row count was about (one could take another's bounds, keys or size)."""
    seen: dict[str, str] = {}
    for name in names:
        other = seen.setdefault(name.lower(), name)
        if other != name:
            raise PolicyError(
                f'{where}: the database has {what} "{other}" and "{name}", whose names differ '
                "only in case, which dpproxy cannot tell apart; rename one of them (or serve "
                "another schema)"
            )


def _unique_columns(
    unique: Mapping[str, Collection[str]],
    by_key: Mapping[str, tuple[str, Mapping[str, ColumnType]]],
) -> dict[str, frozenset[str]]:
    """``unique`` keyed by lower-case table names, with lower-case column names; a table
    or column the schema does not have is an error of the caller (ValueError)."""
    found: dict[str, frozenset[str]] = {}
    for table, columns in unique.items():
        schema_table = by_key.get(table.lower())
        known = {c.lower() for c in schema_table[1]} if schema_table is not None else set()
        names = frozenset(c.lower() for c in columns)
        if schema_table is None or not names <= known:
            raise ValueError(f"unique columns {sorted(columns)} of {table}: not in the schema")
        found[table.lower()] = names
    return found


def _check_domain_fits(where: str, policy: ColumnPolicy, kind: ColumnType) -> None:
    """Each domain value must be of the column's kind, spelled as the database returns it:
    the database keeps a row when ``column IN (<domain>)`` holds by its own rules, and the
    release finds the row's value in the domain by equality; where the two disagree (the
    integer 1 and the text '1', a timestamp and a date's text), a group would be lost."""
    if policy.domain is None:
        return
    for value in policy.domain:
        problem = _domain_problem(value, kind)
        if problem is not None:
            raise PolicyError(
                f"{where}: domain value {value!r} {problem} (the column is of type "
                f"{kind.value}); list values of the column's type"
            )


def _domain_problem(value: object, kind: ColumnType) -> str | None:
    if kind is ColumnType.BOOLEAN:
        return None if isinstance(value, bool) else "is not true or false"
    if isinstance(value, bool):
        return "is a boolean"
    if kind is ColumnType.INTEGER:
        whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        return None if whole else "is not a whole number"
    if kind in (ColumnType.FLOAT, ColumnType.DECIMAL):
        finite = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))
        return None if finite else "is not a finite number"
    if not isinstance(value, str):
        return "is not a text"
    if kind in (ColumnType.DATE, ColumnType.TIMESTAMP):
        parse = dt.date.fromisoformat if kind is ColumnType.DATE else dt.datetime.fromisoformat
        try:
            same = parse(value).isoformat() == value
        except ValueError:
            same = False
        form = "YYYY-MM-DD" if kind is ColumnType.DATE else "YYYY-MM-DDTHH:MM:SS"
        return None if same else f"is not written {form}"
    return None


def _check_bounds_fit(where: str, policy: ColumnPolicy, kind: ColumnType) -> None:
    """Numbers bound a numeric column; dates a date column; dates or date-times a
    timestamp column."""
    if policy.bounds is not None and not kind.numeric:
        fix = (
            ": give a date or timestamp column's bounds as dates (lower = 2020-01-01)"
            if kind.temporal
            else ""
        )
        raise PolicyError(
            f"{where}: bounds are declared but the column is of type {kind.value}, not numeric{fix}"
        )
    found = policy.date_bounds
    if found is None:
        return
    if not kind.temporal:
        fix = ": give a numeric column's bounds as numbers (lower = 0)" if kind.numeric else ""
        raise PolicyError(
            f"{where}: date bounds are declared but the column is of type {kind.value}; only "
            f"date and timestamp columns take date bounds{fix}"
        )
    if kind is ColumnType.DATE and isinstance(found[0], dt.datetime):
        raise PolicyError(
            f"{where}: the column is of type date but its bounds are date-times; give dates "
            f"(lower = {found[0].date().isoformat()})"
        )


#: Types whose values the engines compare after a conversion that can make different
#: values equal (BIGINT 2^53 + 1 = DOUBLE 2^53; on DuckDB an INTEGER = REAL from 2^24 + 1).
_INEXACT_IDENTIFIERS = frozenset({ColumnType.FLOAT, ColumnType.DECIMAL})


def _exact_identifier(where: str, column: str, kind: ColumnType) -> None:
    """A column that identifies persons (a privacy unit, either end of a foreign-key hop)
    must compare exactly: joins and per-person bounds use the database's equality."""
    if kind in _INEXACT_IDENTIFIERS:
        raise PolicyError(
            f'{where}: column "{column}" is of type {kind.value}; a column that identifies '
            "persons must be an integer, text or uuid column (the database compares "
            "floating-point and decimal values after converting them, and different "
            "persons' values could then be equal)"
        )


def _with_path(key: str, tables: dict[str, TableInfo], seen: tuple[str, ...]) -> TableInfo:
    """The table with its foreign-key path to the privacy unit resolved (checked)."""
    table = tables[key]
    link = table.policy.unit_link
    if link is None:
        return table
    column, target_name, referenced = link
    where = f'[tables.{table.name}] privacy_unit = "{table.policy.privacy_unit}"'
    if key in seen:
        raise PolicyError(f"{where}: the foreign-key paths form a cycle through {key}")
    target_key = target_name.lower()
    if target_key not in tables:
        raise PolicyError(f'{where}: no table "{target_name}" has a policy; add one')
    target = _with_path(target_key, tables, (*seen, key))
    if target.policy.public:
        raise PolicyError(
            f'{where}: "{target_name}" is public; the path must reach a protected table'
        )
    if referenced.lower() not in target.columns:
        raise PolicyError(f'{where}: table "{target_name}" has no column "{referenced}"')
    _exact_identifier(where, f"{target_name}.{referenced}", target.column(referenced).type)
    hop = UnitHop(table.column(column).name, target, target.column(referenced).name)
    return dataclasses.replace(table, unit_path=(hop,))
