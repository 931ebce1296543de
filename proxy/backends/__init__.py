"""Database backends: run the rewriter's SQL and describe the schema (never the data)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from proxy.backend_error import BackendError as BackendError
from rewriter.catalog import ColumnType, ColumnTypes
from rewriter.planner import Dialect


class QueryCanceled(BackendError):
    """The query was stopped by a cancel request."""


class NotReady(BackendError):
    """The engine cannot run a query now, found by ``Backend.ready`` before the charge (the
    database cannot be reached, the DuckDB file cannot be read, or it changed in a way that
    only a restart of dpproxy can take in: ``needs_restart``). Its text is for the server
    log; the analyst is told that nothing was charged (proxy.pipeline)."""

    def __init__(self, message: str, *, needs_restart: bool = False) -> None:
        super().__init__(message)
        self.needs_restart = needs_restart


#: Why a statement was stopped, as PostgreSQL words it ("canceling statement due to …").
USER_REQUEST = "user request"
STATEMENT_TIMEOUT = "statement timeout"


class CancelToken:
    """Lets a session stop the query its backend is running now: a cancel request, or the
    session's statement_timeout running out (``reason``, the first one that fired)."""

    def __init__(self) -> None:
        self._canceller: Callable[[], None] | None = None
        self.canceled = False
        self.reason = USER_REQUEST

    def bind(self, canceller: Callable[[], None] | None) -> None:
        self._canceller = canceller

    def cancel(self, reason: str = USER_REQUEST) -> None:
        if not self.canceled:
            self.reason = reason
        self.canceled = True
        canceller = self._canceller
        if canceller is not None:
            canceller()


@dataclass(frozen=True)
class DeclaredType:
    """A column's type as the database declares it (information_schema.columns), for the
    catalog that clients browse; the rewriter only needs the coarse ColumnType."""

    name: str  # data_type, as the engine spells it ("integer", "VARCHAR", "DECIMAL(9,2)")
    length: int | None = None  # character_maximum_length
    precision: int | None = None  # numeric_precision
    scale: int | None = None  # numeric_scale
    collation: str | None = None  # collation_name, when not the default
    not_null: bool = False  # is_nullable 'NO': the column is declared NOT NULL


#: What a constraint is, as pg_constraint.contype says: a primary key, a unique
#: constraint, a foreign key.
PRIMARY_KEY = "p"
UNIQUE = "u"
FOREIGN_KEY = "f"


@dataclass(frozen=True)
class DeclaredKey:
    """A PRIMARY KEY, UNIQUE or FOREIGN KEY constraint as the database declares it (its
    catalog, never its rows), for the catalog that clients browse: names as the database
    spells them, columns in the constraint's order."""

    table: str
    kind: str  # PRIMARY_KEY, UNIQUE or FOREIGN_KEY
    columns: tuple[str, ...]
    #: The constraint's name (that of its index too); None when the database names none
    #: of its own (DuckDB): the catalog then names it as PostgreSQL would.
    name: str | None = None
    referenced_table: str | None = None  # a foreign key's, in the same schema
    referenced_columns: tuple[str, ...] = ()
    update_rule: str = "a"  # a foreign key's confupdtype (a no action, r restrict, c cascade…)
    delete_rule: str = "a"  # confdeltype
    match_full: bool = False  # MATCH FULL (else MATCH SIMPLE)
    deferrable: bool = False
    deferred: bool = False


Schema = Mapping[str, Mapping[str, DeclaredType]]


class KeyCheck(enum.Enum):
    """Whether a column holds each value at most once: one a foreign-key path references, or
    one a public table is joined on."""

    DECLARED = "a PRIMARY KEY, UNIQUE constraint or unique index keeps it unique"
    VERIFIED = "its rows are unique now; a file changed afterwards is not used before a restart"
    DUPLICATED = "a value occurs in more than one row"
    UNENFORCED = "nothing keeps it unique: no PRIMARY KEY, UNIQUE constraint or unique index"


class Backend(Protocol):
    dialect: Dialect
    #: Whether the engine's DECIMAL columns hold only finite numbers (no NaN, no infinity),
    #: so that the rewriter can skip their tests (rewriter.catalog.ColumnInfo.finite).
    finite_decimals: bool

    async def schema_declared(self, schema: str) -> Schema:
        """table -> column -> declared type, from the catalog only (never the data)."""
        ...

    async def schema_keys(self, schema: str) -> tuple[DeclaredKey, ...]:
        """The PRIMARY KEY, UNIQUE and FOREIGN KEY constraints of the tables of ``schema``
        (a foreign key only if it references a table of ``schema``), from the catalog
        only (never the data); read with ``schema_declared`` when dpproxy starts."""
        ...

    async def ready(self, token: CancelToken) -> None:
        """Make sure the engine can run the next query, before it is charged: reopen a
        DuckDB file that was replaced or rewritten since it was opened, have a live
        PostgreSQL connection at hand. Raises NotReady if it cannot (nothing is charged
        then), or QueryCanceled if ``token`` fired meanwhile."""
        ...

    async def fetch_all(self, sql: str, token: CancelToken) -> list[tuple[object, ...]]:
        """Run ``sql`` (produced by the rewriter) and return its rows."""
        ...

    async def key_check(self, schema: str, table: str, column: str) -> KeyCheck:
        """Whether ``table.column`` (names as the database spells them) is unique, for a
        foreign-key path that references it (proxy.unit_keys) or a public table's joins
        (proxy.public_keys). Nothing of the data leaves the backend but the answer."""
        ...

    async def rows_within(self, schema: str, table: str, limit: int) -> bool:
        """Whether ``table`` holds at most ``limit`` rows, reading at most ``limit`` + 1 of
        them (proxy.public_keys: a public table larger than that may not be read). DuckDB
        counts again whenever it opens a changed file."""
        ...

    async def close(self) -> None: ...


def single_count(rows: Sequence[Sequence[object]], what: str) -> int:
    """The one integer of a ``SELECT COUNT(*)`` answer (``rows``), else a RuntimeError
    naming ``what`` was counted."""
    if len(rows) != 1 or len(rows[0]) != 1 or not isinstance(rows[0][0], int):
        raise RuntimeError(f"counting {what}: unexpected answer {rows!r}")
    return rows[0][0]


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
    ("double", ColumnType.FLOAT),
    ("real", ColumnType.FLOAT),
    ("float", ColumnType.FLOAT),
    ("decimal", ColumnType.DECIMAL),
    ("numeric", ColumnType.DECIMAL),
    ("varchar", ColumnType.TEXT),
    ("text", ColumnType.TEXT),
    ("character", ColumnType.TEXT),
    ("char", ColumnType.TEXT),
    ("timestamp", ColumnType.TIMESTAMP),
    ("boolean", ColumnType.BOOLEAN),
    ("bool", ColumnType.BOOLEAN),
)


def column_type(declared: str) -> ColumnType:
    """Map an information_schema data_type (DuckDB or PostgreSQL spelling) to a ColumnType."""
    lowered = declared.strip().lower()
    if lowered.endswith("]"):
        return ColumnType.OTHER  # a list or array (INTEGER[], VARCHAR[3])
    if lowered in _INT_ALIASES:
        return ColumnType.INTEGER
    if lowered == "date":  # as a prefix it took PostgreSQL's daterange, datemultirange
        return ColumnType.DATE
    for prefix, kind in _TYPE_PREFIXES:
        if lowered.startswith(prefix):
            return kind
    return ColumnType.OTHER


#: Short integer names, matched whole: "int" as a prefix took INTERVAL and int4range.
_INT_ALIASES = frozenset({"int", "int2", "int4", "int8"})
#: Types of a kind dpproxy reads (by their names' prefixes, for their bounds) that it
#: does not read (information_schema's data_type, lower case), and why: queries that name
#: such a column are refused before they are charged (rewriter.catalog.ColumnInfo.unread).
UNREAD_TYPES = {
    # pandas' and Arrow's datetime64[ns]. DuckDB compares a TIMESTAMP with one as a
    # TIMESTAMP_NS, and dpproxy's own bounds (years 1 to 9999) and any literal outside the
    # years 1677 to 2262 do not convert: every query failed, after the charge.
    "timestamp_ns": "a TIMESTAMP_NS (nanoseconds) column, which dpproxy does not read: "
    "DuckDB converts every timestamp compared with it to nanoseconds, which fails outside "
    "the years 1677 to 2262",
}


SCHEMA_QUERY = (
    "SELECT table_name, column_name, data_type, character_maximum_length, "
    "numeric_precision, numeric_scale, collation_name, collation_schema, is_nullable "
    "FROM information_schema.columns "
    "WHERE table_schema = {placeholder} ORDER BY table_name, ordinal_position"
)


def group_declared(rows: list[tuple[object, ...]]) -> dict[str, dict[str, DeclaredType]]:
    """SCHEMA_QUERY's rows as table -> column -> declared type (the collation, its schema
    and is_nullable, the seventh to ninth values, may be left out: nullable). A collation
    of a schema other than pg_catalog is named with its schema (``s_a.ci``): PostgreSQL's
    own "C" is byte-wise, a user's ``s."C"`` may not be, and ``s_a.ci`` and ``s_b.ci`` are
    two."""
    tables: dict[str, dict[str, DeclaredType]] = {}
    for table, column, declared, length, precision, scale, *rest in rows:
        collated = rest[0] if rest and isinstance(rest[0], str) else None
        schema = rest[1] if len(rest) > 1 and isinstance(rest[1], str) else None
        not_null = len(rest) > 2 and rest[2] == "NO"
        if collated is not None and schema not in (None, "pg_catalog"):
            collated = f"{schema}.{collated}"
        tables.setdefault(str(table), {})[str(column)] = DeclaredType(
            str(declared),
            _int_or_none(length),
            _int_or_none(precision),
            _int_or_none(scale),
            collated,
            not_null,
        )
    return tables


def find_declared(schema: Schema, table: str, column: str) -> tuple[str, str, DeclaredType] | None:
    """``table.column`` as the database spells them, and its declared type, matched without
    regard to case as the catalog matches policies; None if the schema has no such column."""
    for table_name, columns in schema.items():
        if table_name.lower() != table.lower():
            continue
        for column_name, declared in columns.items():
            if column_name.lower() == column.lower():
                return table_name, column_name, declared
    return None


def column_types(schema: Schema) -> ColumnTypes:
    """table -> column -> the rewriter's coarse ColumnType, with the timestamp columns
    that hold a time zone (``ColumnTypes.zoned``): a query reads their dates and times in
    the session's TimeZone (rewriter.zones); the columns dpproxy does not read
    (``unread``), and the type names of the others it reads as OTHER (``other_types``)."""
    types = {
        table: {name: column_type(declared.name) for name, declared in columns.items()}
        for table, columns in schema.items()
    }
    zoned = {
        table: frozenset(name for name, declared in columns.items() if with_time_zone(declared))
        for table, columns in schema.items()
    }
    unread = {
        table: {
            name: UNREAD_TYPES[declared.name.strip().lower()]
            for name, declared in columns.items()
            if declared.name.strip().lower() in UNREAD_TYPES
        }
        for table, columns in schema.items()
    }
    others = {
        table: {
            name: declared.name.strip().lower()
            for name, declared in columns.items()
            if types[table][name] is ColumnType.OTHER
        }
        for table, columns in schema.items()
    }
    return ColumnTypes(
        types,
        {table: names for table, names in zoned.items() if names},
        {table: names for table, names in unread.items() if names},
        {table: names for table, names in others.items() if names},
    )


#: How the engines name a timestamp with time zone (information_schema's data_type).
_ZONED_TYPES = frozenset({"timestamp with time zone", "timestamptz"})


def with_time_zone(declared: DeclaredType) -> bool:
    """Whether the column is a timestamp with time zone (PostgreSQL's timestamptz, DuckDB's
    TIMESTAMP WITH TIME ZONE), whose values are instants."""
    return declared.name.strip().lower() in _ZONED_TYPES


#: Integer types (information_schema's data_type, lower case) and the decimal digits that
#: hold each one's every value; HUGEINT needs 39, more than a DECIMAL has.
_INTEGER_DIGITS = {
    "tinyint": 3,
    "utinyint": 3,
    "smallint": 5,
    "usmallint": 5,
    "integer": 10,
    "uinteger": 10,
    "bigint": 19,
    "ubigint": 20,
}


def column_digits(schema: Schema) -> dict[str, dict[str, tuple[int, int]]]:
    """table -> column -> (integer digits, decimal places) of a DECIMAL that holds every
    value of the column exactly, for the integer and DECIMAL(p, s) columns that have one
    (rewriter.catalog.ColumnInfo.digits)."""
    found: dict[str, dict[str, tuple[int, int]]] = {}
    for table, columns in schema.items():
        for name, declared in columns.items():
            digits = declared_digits(declared)
            if digits is not None:
                found.setdefault(table, {})[name] = digits
    return found


def declared_digits(declared: DeclaredType) -> tuple[int, int] | None:
    """A DECIMAL(p, s) column's (p - s, s); an integer type's digits; None for others
    (an unconstrained PostgreSQL NUMERIC reports no precision)."""
    lowered = declared.name.strip().lower()
    if lowered in _INTEGER_DIGITS:
        return _INTEGER_DIGITS[lowered], 0
    precision, scale = declared.precision, declared.scale
    if column_type(lowered) is not ColumnType.DECIMAL or precision is None or scale is None:
        return None
    if not 0 <= scale <= precision:
        return None
    return precision - scale, scale


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
