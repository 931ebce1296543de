"""The extended query protocol for one connection: prepared statements and portals.

Produces the backend messages for Parse, Bind, Describe, Execute and Close; no I/O. A
Describe never runs or charges a query: it asks the session what the statement would
return. Only Execute runs it, once per portal; a row limit on Execute suspends the portal
and a later Execute continues from where it stopped.

Parameters are bound into the statement by :mod:`proxy.parameters` (through sqlglot's
syntax tree, never by pasting text), so the session receives ordinary SQL. Results are
sent in text, or in binary for the types :mod:`proxy.protocol.values` can encode.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from proxy import parameters
from proxy.protocol import codec
from proxy.protocol.messages import Bind, Close, Describe, Execute, Parse
from proxy.protocol.values import (
    BINARY_FORMAT,
    BINARY_RESULT_TYPES,
    TEXT_FORMAT,
    ValueFormatError,
    encode_binary,
    type_name,
)
from proxy.seam import ColumnDescription, QueryError, Session, StatementResult
from proxy.statements import Kind, StatementSyntaxError, recognize

FEATURE_NOT_SUPPORTED = "0A000"
PROTOCOL_VIOLATION = "08P01"
DUPLICATE_PREPARED_STATEMENT = "42P05"
INVALID_SQL_STATEMENT_NAME = "26000"
INVALID_CURSOR_NAME = "34000"


@dataclass(frozen=True)
class PreparedStatement:
    parsed: parameters.ParsedStatement

    @property
    def sql(self) -> str:
        return self.parsed.sql

    @property
    def parameter_types(self) -> tuple[int, ...]:
        return self.parsed.parameter_types


@dataclass
class Portal:
    statement: PreparedStatement
    sql: str
    result_formats: tuple[int, ...] = ()
    result: StatementResult | None = None
    sent_rows: int = 0


@dataclass
class ExtendedQueries:
    """The statements and portals of one connection."""

    statements: dict[str, PreparedStatement] = field(default_factory=dict)
    portals: dict[str, Portal] = field(default_factory=dict)

    def parse(self, msg: Parse) -> bytes:
        if msg.statement and msg.statement in self.statements:
            raise QueryError(
                DUPLICATE_PREPARED_STATEMENT,
                f'prepared statement "{msg.statement}" already exists',
                hint="Close it first, or use another name",
            )
        parsed = parameters.prepare(msg.query, msg.parameter_types)
        self.statements[msg.statement] = PreparedStatement(parsed)
        return codec.parse_complete()

    def bind(self, msg: Bind) -> bytes:
        statement = self._statement(msg.statement)
        if any(f not in (TEXT_FORMAT, BINARY_FORMAT) for f in msg.result_formats):
            raise QueryError(PROTOCOL_VIOLATION, "unsupported result format code")
        if msg.portal and msg.portal in self.portals:
            raise QueryError(INVALID_CURSOR_NAME, f'portal "{msg.portal}" already exists')
        sql = parameters.bind(statement.parsed, msg.parameter_formats, msg.parameters)
        self.portals[msg.portal] = Portal(statement, sql, msg.result_formats)
        return codec.bind_complete()

    async def describe(self, session: Session, msg: Describe) -> bytes:
        if msg.kind == "S":
            statement = self._statement(msg.name)
            columns = await session.describe(parameters.describe_sql(statement.parsed))
            types = codec.parameter_description(statement.parameter_types)
            return types + _row_description(columns, ())
        if msg.kind == "P":
            portal = self._portal(msg.name)
            if portal.result is not None:
                columns = portal.result.columns
            else:
                columns = await session.describe(portal.sql)
            return _row_description(columns, portal.result_formats)
        raise QueryError(PROTOCOL_VIOLATION, f"invalid DESCRIBE message subtype {msg.kind!r}")

    async def execute(self, session: Session, msg: Execute) -> bytes:
        portal = self._portal(msg.portal)
        parts: list[bytes] = []
        if portal.result is None:
            self.check_session_statement(portal.sql)
            portal.result = await session.execute(portal.sql)
            self.after_session_statement(portal.sql)
            parts.extend(
                codec.notice_response(
                    n.message, severity=n.severity, code=n.code, detail=n.detail, hint=n.hint
                )
                for n in portal.result.notices
            )
            parts.extend(
                codec.parameter_status(name, value)
                for name, value in portal.result.parameter_status
            )
        result = portal.result
        if result.empty:
            return b"".join([*parts, codec.EMPTY_QUERY_RESPONSE])
        encode = _row_encoder(result.columns, portal.result_formats)
        rows = result.rows[portal.sent_rows :]
        if msg.max_rows > 0 and len(rows) > msg.max_rows:
            rows = rows[: msg.max_rows]
            portal.sent_rows += len(rows)
            return b"".join([*parts, *map(encode, rows), codec.portal_suspended()])
        portal.sent_rows += len(rows)
        return b"".join([*parts, *map(encode, rows), codec.command_complete(result.tag)])

    def close(self, msg: Close) -> bytes:
        if msg.kind == "S":
            self.statements.pop(msg.name, None)
        elif msg.kind == "P":
            self.portals.pop(msg.name, None)
        else:
            raise QueryError(PROTOCOL_VIOLATION, f"invalid CLOSE message subtype {msg.kind!r}")
        return codec.close_complete()

    def forget_unnamed(self) -> None:
        """A simple Query ends the unnamed statement and portal, as in PostgreSQL."""
        self.statements.pop("", None)
        self.portals.pop("", None)

    # --- DEALLOCATE and DISCARD, which the session answers but which act on statements ---

    def check_session_statement(self, sql: str) -> None:
        """Before running ``sql``: DEALLOCATE of an unknown statement is an error."""
        statement = _cleanup_statement(sql)
        if statement is None or statement.kind is not Kind.DEALLOCATE or statement.name is None:
            return
        if statement.name not in self.statements:
            raise QueryError(
                INVALID_SQL_STATEMENT_NAME,
                f'prepared statement "{statement.name}" does not exist',
            )

    def after_session_statement(self, sql: str) -> None:
        """After ``sql`` succeeded: DEALLOCATE and DISCARD ALL drop prepared statements."""
        statement = _cleanup_statement(sql)
        if statement is None:
            return
        if statement.kind is Kind.DEALLOCATE and statement.name is not None:
            self.statements.pop(statement.name, None)
        elif statement.kind is Kind.DEALLOCATE or statement.name == "all":
            self.statements.clear()
            if statement.kind is Kind.DISCARD:  # DISCARD ALL also closes every portal
                self.portals.clear()

    def _statement(self, name: str) -> PreparedStatement:
        found = self.statements.get(name)
        if found is None:
            raise QueryError(
                INVALID_SQL_STATEMENT_NAME,
                f'prepared statement "{name}" does not exist'
                if name
                else "unnamed prepared statement does not exist",
            )
        return found

    def _portal(self, name: str) -> Portal:
        found = self.portals.get(name)
        if found is None:
            raise QueryError(
                INVALID_CURSOR_NAME,
                f'portal "{name}" does not exist' if name else "unnamed portal does not exist",
            )
        return found


def _cleanup_statement(sql: str) -> _Cleanup | None:
    lowered = sql.lower()
    if "dealloc" not in lowered and "discard" not in lowered:
        return None
    try:
        statement = recognize(sql)
    except StatementSyntaxError:
        return None  # the session reports the syntax error
    if statement is None or statement.kind not in (Kind.DEALLOCATE, Kind.DISCARD):
        return None
    return _Cleanup(statement.kind, statement.name)


@dataclass(frozen=True)
class _Cleanup:
    kind: Kind
    name: str | None


def column_formats(formats: Sequence[int], count: int) -> tuple[int, ...]:
    """The format of each of ``count`` columns from Bind's result format codes."""
    if not formats:
        return (TEXT_FORMAT,) * count
    if len(formats) == 1:
        return (formats[0],) * count
    if len(formats) != count:
        raise QueryError(
            PROTOCOL_VIOLATION,
            f"bind message has {len(formats)} result formats but query has {count} columns",
        )
    return tuple(formats)


def _check_binary(columns: Sequence[ColumnDescription], formats: Sequence[int]) -> None:
    for column, fmt in zip(columns, formats, strict=True):
        if fmt == BINARY_FORMAT and column.type_oid not in BINARY_RESULT_TYPES:
            raise QueryError(
                FEATURE_NOT_SUPPORTED,
                f'dpproxy cannot send column "{column.name}" ({type_name(column.type_oid)}) '
                "in binary format",
                hint="ask for text results (with psycopg: a cursor without binary=True)",
            )


def _row_description(
    columns: tuple[ColumnDescription, ...] | None, result_formats: Sequence[int]
) -> bytes:
    if columns is None:
        return codec.no_data()
    formats = column_formats(result_formats, len(columns))
    _check_binary(columns, formats)
    return codec.row_description(
        ((c.name, c.type_oid, c.type_size, c.type_modifier) for c in columns), formats
    )


class _RowEncoder:
    __slots__ = ("_binary",)

    def __init__(self, binary: tuple[int | None, ...]) -> None:
        self._binary = binary  # the type OID of each binary column, None for text

    def __call__(self, row: tuple[str | None, ...]) -> bytes:
        out: list[bytes | None] = []
        for oid, value in zip(self._binary, row, strict=True):
            if value is None:
                out.append(None)
            elif oid is None:
                out.append(value.encode("utf-8"))
            else:
                try:
                    out.append(encode_binary(oid, value))
                except ValueFormatError as error:
                    raise QueryError(error.sqlstate, error.message) from None
        return codec.data_row_bytes(out)


def _row_encoder(
    columns: tuple[ColumnDescription, ...] | None, result_formats: Sequence[int]
) -> codec.RowEncoder:
    if columns is None:
        return codec.data_row
    formats = column_formats(result_formats, len(columns))
    if BINARY_FORMAT not in formats:
        return codec.data_row
    _check_binary(columns, formats)
    return _RowEncoder(
        tuple(
            c.type_oid if f == BINARY_FORMAT else None
            for c, f in zip(columns, formats, strict=True)
        )
    )
