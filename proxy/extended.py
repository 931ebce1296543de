"""The extended query protocol for one connection: prepared statements and portals.

Produces the backend messages for Parse, Bind, Describe, Execute and Close; no I/O. A
Describe never runs or charges a query: it asks the session what the statement would
return. Only Execute runs it, once per portal; a row limit on Execute suspends the portal
and a later Execute continues from where it stopped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from proxy.protocol import codec
from proxy.protocol.messages import Bind, Close, Describe, Execute, Parse
from proxy.seam import ColumnDescription, QueryError, Session, StatementResult

FEATURE_NOT_SUPPORTED = "0A000"
PROTOCOL_VIOLATION = "08P01"
DUPLICATE_PREPARED_STATEMENT = "42P05"
INVALID_SQL_STATEMENT_NAME = "26000"
INVALID_CURSOR_NAME = "34000"
TEXT_FORMAT = 0
_PLACEHOLDER = re.compile(r"\$(\d+)")


@dataclass(frozen=True)
class PreparedStatement:
    sql: str
    parameter_types: tuple[int, ...]


@dataclass
class Portal:
    statement: PreparedStatement
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
        self.statements[msg.statement] = PreparedStatement(msg.query, msg.parameter_types)
        return codec.parse_complete()

    def bind(self, msg: Bind) -> bytes:
        statement = self._statement(msg.statement)
        if msg.parameters or _placeholder_count(statement.sql):
            raise QueryError(
                FEATURE_NOT_SUPPORTED,
                "dpproxy does not support query parameters yet; write the values into the "
                "query text",
                hint="with psycopg, pass no parameters to execute()",
            )
        if any(f != TEXT_FORMAT for f in msg.result_formats):
            raise QueryError(
                FEATURE_NOT_SUPPORTED,
                "dpproxy sends results in text format only",
                hint="with psycopg, use a text cursor (binary=False, the default)",
            )
        if msg.portal and msg.portal in self.portals:
            raise QueryError(INVALID_CURSOR_NAME, f'portal "{msg.portal}" already exists')
        self.portals[msg.portal] = Portal(statement)
        return codec.bind_complete()

    async def describe(self, session: Session, msg: Describe) -> bytes:
        if msg.kind == "S":
            statement = self._statement(msg.name)
            columns = await session.describe(statement.sql)
            parameters = codec.parameter_description(statement.parameter_types)
            return parameters + _row_description(columns)
        if msg.kind == "P":
            portal = self._portal(msg.name)
            if portal.result is not None:
                return _row_description(portal.result.columns)
            return _row_description(await session.describe(portal.statement.sql))
        raise QueryError(PROTOCOL_VIOLATION, f"invalid DESCRIBE message subtype {msg.kind!r}")

    async def execute(self, session: Session, msg: Execute) -> bytes:
        portal = self._portal(msg.portal)
        parts: list[bytes] = []
        if portal.result is None:
            portal.result = await session.execute(portal.statement.sql)
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
        rows = result.rows[portal.sent_rows :]
        if msg.max_rows > 0 and len(rows) > msg.max_rows:
            rows = rows[: msg.max_rows]
            portal.sent_rows += len(rows)
            return b"".join([*parts, *map(codec.data_row, rows), codec.portal_suspended()])
        portal.sent_rows += len(rows)
        return b"".join([*parts, *map(codec.data_row, rows), codec.command_complete(result.tag)])

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


def _row_description(columns: tuple[ColumnDescription, ...] | None) -> bytes:
    if columns is None:
        return codec.no_data()
    return codec.row_description(
        (c.name, c.type_oid, c.type_size, c.type_modifier) for c in columns
    )


def _placeholder_count(sql: str) -> int:
    return max((int(n) for n in _PLACEHOLDER.findall(sql)), default=0)
