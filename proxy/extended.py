"""The extended query protocol for one connection: prepared statements and portals.

Produces the backend messages for Parse, Bind, Describe, Execute and Close; no I/O. A
Describe never runs or charges a query: it asks the session what the statement would
return. Only Execute runs it, once per portal; a row limit on Execute suspends the portal
and a later Execute continues from where it stopped. A portal that ran to completion is
never run again (an Execute of it returns no rows, as in PostgreSQL), and the portals end
with their transaction (:meth:`ExtendedQueries.sync`).

Parameters are bound into the statement by :mod:`proxy.parameters` (through sqlglot's
syntax tree, never by pasting text), so the session receives ordinary SQL. Results are
sent in text, or in binary for the types :mod:`proxy.protocol.values` can encode.

Everything that could refuse an Execute is decided before the session runs (and charges)
the statement: the result formats asked for in Bind, and that the rows will have the
columns of the RowDescription the client was sent by a Describe. A charged answer always
reaches the client.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

from proxy import parameters
from proxy.copy_out import copy_messages
from proxy.cursor_statements import Close as CloseCursor
from proxy.cursor_statements import Declare, Fetch, read_cursor_statement
from proxy.parameter_type_rules import ColumnOids
from proxy.portal_moves import move_portal
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
from proxy.seam import (
    ColumnDescription,
    Notice,
    QueryError,
    Session,
    StatementResult,
    TransactionStatus,
)
from proxy.sqlstate import (
    DUPLICATE_CURSOR,
    DUPLICATE_PREPARED_STATEMENT,
    FEATURE_NOT_SUPPORTED,
    IN_FAILED_SQL_TRANSACTION,
    INTERNAL_ERROR,
    INVALID_CURSOR_NAME,
    INVALID_SQL_STATEMENT_NAME,
    OBJECT_NOT_IN_PREREQUISITE_STATE,
    PROGRAM_LIMIT_EXCEEDED,
    PROTOCOL_VIOLATION,
)
from proxy.statements import Kind, StatementSyntaxError, recognize, strip_sql

INVALID_CURSOR_STATE = "24000"
#: The statements that may name a portal bound by the extended protocol.
_PORTAL_KINDS = frozenset({Kind.FETCH, Kind.MOVE, Kind.CLOSE})

logger = logging.getLogger(__name__)


#: Prepared statements one connection may hold at once (PostgreSQL has no limit; dpproxy
#: keeps each statement with parameters parsed, about 100 bytes per character of SQL).
MAX_PREPARED_STATEMENTS = 1000
#: The characters of SQL all of one connection's prepared statements may hold together.
MAX_PREPARED_CHARACTERS = 1_000_000
#: Portals one connection may hold at once (they end with their transaction).
MAX_PORTALS = 1000
#: Command tags that end with a row count (PostgreSQL's, as dpproxy's sessions send them).
_COUNTED_TAGS = frozenset(
    {"SELECT", "INSERT", "UPDATE", "DELETE", "MERGE", "FETCH", "MOVE", "COPY"}
)


@dataclass(frozen=True)
class Told:
    """What a Describe sent the client: the columns (None: NoData), the format of each as
    sent, and the connection's statement count then (see ``ExtendedQueries.generation``)."""

    columns: tuple[ColumnDescription, ...] | None
    formats: tuple[int, ...]
    generation: int


@dataclass
class PreparedStatement:
    parsed: parameters.ParsedStatement
    told: Told | None = None
    """The last Describe of this statement: Execute of its portals keeps its columns."""

    @cached_property
    def is_query(self) -> bool:
        """Whether it is a query, not a session statement (``snapshot_taken`` asks at
        each Parse and Bind; read once)."""
        return _is_query(self.parsed.sql)

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
    told: Told | None = None
    """The last Describe of this portal, which its rows must match."""
    formats: tuple[int, ...] | None = None
    """The format of each column, decided before it ran (None: all text)."""
    started: bool = False
    """An Execute began running it: it never runs again (once failed, it cannot be run)."""
    result: StatementResult | None = None
    sent_rows: int = 0
    done: bool = False
    """CommandComplete was sent: a further Execute returns no rows."""


@dataclass
class ExtendedQueries:
    """The statements and portals of one connection."""

    statements: dict[str, PreparedStatement] = field(default_factory=dict)
    portals: dict[str, Portal] = field(default_factory=dict)
    generation: int = 0
    """How many statements this connection has begun to run (Execute and simple Query):
    a Describe made since the last one still holds, as nothing (a SET) could change it."""
    _ended: int = 0  # Session.transactions_ended when the portals were last looked at

    def parse(self, msg: Parse, columns: ColumnOids | None = None) -> bytes:
        """``columns``: the session's column types, which the statement's undeclared
        parameters compared with a column take (proxy.parameter_types)."""
        if msg.statement and msg.statement in self.statements:
            raise QueryError(
                DUPLICATE_PREPARED_STATEMENT,
                f'prepared statement "{msg.statement}" already exists',
                hint="Close it first, or use another name",
            )
        parameters.check_length(msg.query)
        self._check_room(msg.statement, msg.query)
        parsed = parameters.prepare(msg.query, msg.parameter_types, columns)
        self.statements[msg.statement] = PreparedStatement(parsed)
        return codec.parse_complete()

    def snapshot_taken(self, session: Session, statement: str) -> None:
        """After Parse or Bind of the prepared statement named ``statement``: as
        PostgreSQL, whose parse analysis of a query (not of SET, SHOW, BEGIN...) takes the
        transaction's snapshot, the session's transaction block has its modes set from
        then on (SET TRANSACTION ISOLATION LEVEL is 25001 after it)."""
        if self.statements[statement].is_query:
            session.query_prepared()

    def _check_room(self, name: str, sql: str) -> None:
        """Refuse a statement that would make this connection hold too many, or too much."""
        others = [s for n, s in self.statements.items() if n != name]
        named = len(self.statements) - ("" in self.statements)
        if name and named >= MAX_PREPARED_STATEMENTS:
            raise QueryError(
                PROGRAM_LIMIT_EXCEEDED,
                f"this connection already holds {named} prepared statements; "
                f"dpproxy keeps at most {MAX_PREPARED_STATEMENTS}",
                hint="Close (or DEALLOCATE) the prepared statements no longer needed, or "
                "lower the client's statement cache (pgJDBC: preparedStatementCacheQueries)",
            )
        held = sum(len(s.sql) for s in others)
        if held + len(sql) > MAX_PREPARED_CHARACTERS:
            raise QueryError(
                PROGRAM_LIMIT_EXCEEDED,
                f"this connection's prepared statements would hold {held + len(sql)} "
                f"characters of SQL; dpproxy keeps at most {MAX_PREPARED_CHARACTERS}",
                hint="Close (or DEALLOCATE) the prepared statements no longer needed, or "
                "lower the client's statement cache (pgJDBC: preparedStatementCacheSizeMiB)",
            )

    def bind(self, msg: Bind) -> bytes:
        statement = self._statement(msg.statement)
        if any(f not in (TEXT_FORMAT, BINARY_FORMAT) for f in msg.result_formats):
            raise QueryError(PROTOCOL_VIOLATION, "unsupported result format code")
        if msg.portal and msg.portal in self.portals:
            raise QueryError(
                DUPLICATE_CURSOR,
                f'portal "{msg.portal}" already exists',
                hint="Close it first, or use another name",
            )
        if msg.portal and len(self.portals) - ("" in self.portals) >= MAX_PORTALS:
            raise QueryError(
                PROGRAM_LIMIT_EXCEEDED,
                f"this connection already holds {MAX_PORTALS} portals; dpproxy keeps at most "
                f"{MAX_PORTALS}",
                hint="Close the portals no longer needed, or end the transaction",
            )
        sql = parameters.bind(statement.parsed, msg.parameter_formats, msg.parameters)
        self.portals[msg.portal] = Portal(statement, sql, msg.result_formats)
        return codec.bind_complete()

    async def describe(self, session: Session, msg: Describe) -> bytes:
        if msg.kind == "S":
            statement = self._statement(msg.name)
            # Before Bind, no value is known: the statement is planned with a stand-in for
            # each parameter (proxy.parameter_stand_ins), which only tells its columns; it
            # is planned and checked again with the real values at Execute, before any
            # charge, and refused there (free) if those columns differ (_formats).
            columns = await self._describe(session, parameters.describe_sql(statement.parsed))
            # A statement's formats are not known until Bind: its RowDescription says text.
            formats = column_formats((), 0 if columns is None else len(columns))
            statement.told = Told(columns, formats, self.generation)
            types = codec.parameter_description(statement.parameter_types)
            return types + _row_description(columns, formats)
        if msg.kind == "P":
            declared = None if msg.name in self.portals else session.cursor_columns(msg.name)
            if declared is not None:  # a cursor's portal (DECLARE): its columns, in text
                return _row_description(declared, column_formats((), len(declared)))
            portal = self._portal(msg.name)
            if portal.result is not None:
                columns = portal.result.columns
                formats = portal.formats or column_formats((), _count(columns))
            elif portal.started:
                raise _cannot_run(msg.name)
            else:
                columns = await self._describe(session, portal.sql)
                formats = _sendable(columns, portal.result_formats)
                portal.told = Told(columns, formats, self.generation)
            return _row_description(columns, formats)
        raise QueryError(PROTOCOL_VIOLATION, f"invalid DESCRIBE message subtype {msg.kind!r}")

    async def execute(self, session: Session, msg: Execute) -> bytes:
        portal = self._portal(msg.portal)
        parts: list[bytes] = []
        result = portal.result
        if result is None:
            result = await self._run(session, msg.portal, portal)
            parts.extend(
                codec.notice_response(
                    n.message, severity=n.severity, code=n.code, detail=n.detail, hint=n.hint
                )
                for n in result.notices
            )
        if result.empty:
            return b"".join([*parts, codec.EMPTY_QUERY_RESPONSE])
        if portal.done and session.transaction_status is TransactionStatus.FAILED:
            raise QueryError(
                IN_FAILED_SQL_TRANSACTION,
                "current transaction is aborted, commands ignored until end of transaction block",
                hint="ROLLBACK, then run the statement again",
            )
        if portal.done:  # as PostgreSQL: no rows again; a statement without rows cannot run
            if result.columns is None:
                raise _cannot_run(msg.portal)
            return codec.command_complete(_with_count(result.tag, 0))
        if result.copy is not None:  # COPY … TO STDOUT: all of it, whatever the row limit
            portal.done = True
            copied = copy_messages(result.copy)
            return b"".join([*parts, copied, codec.command_complete(result.tag)])
        encode = _row_encoder(result.columns, portal.formats)
        resumed = portal.sent_rows > 0
        rows = result.rows[portal.sent_rows :]
        if msg.max_rows > 0 and len(rows) > msg.max_rows:
            rows = rows[: msg.max_rows]
            portal.sent_rows += len(rows)
            return b"".join([*parts, *map(encode, rows), codec.portal_suspended()])
        portal.sent_rows += len(rows)
        portal.done = True
        # After a suspension, PostgreSQL counts the rows of this Execute only.
        tag = _with_count(result.tag, len(rows)) if resumed else result.tag
        return b"".join([*parts, *map(encode, rows), codec.command_complete(tag)])

    async def _run(self, session: Session, name: str, portal: Portal) -> StatementResult:
        """Run ``portal`` (named ``name``), which has not run yet: its answer, kept in it."""
        if portal.started:  # it failed: never run a statement (and charge) twice
            raise _cannot_run(name)
        portal.started = True
        # Everything that could refuse this Execute, before the statement is charged.
        portal.formats = await self._formats(session, portal)
        before = session.transactions_ended
        portal.result = await self.run_statement(session, portal.sql, running=portal)
        if session.transactions_ended != before:
            # COMMIT or ROLLBACK (AND CHAIN too): the transaction's other portals end
            self.portals = {n: p for n, p in self.portals.items() if p is portal}
        self._ended = session.transactions_ended
        return portal.result

    async def run_statement(
        self, session: Session, sql: str, *, running: Portal | None = None
    ) -> StatementResult:
        """Answer ``sql``, a statement of a simple Query or the SQL of the portal
        ``running`` (Execute): FETCH, MOVE and CLOSE of a portal this connection bound
        move or close it (as PostgreSQL's, whose named portals are cursors); the session
        answers anything else."""
        self.check_session_statement(sql)
        result = await self._portal_statement(session, sql, running)
        if result is None:
            result = await session.execute(sql)
        self.after_session_statement(sql, running)
        return result

    async def _portal_statement(
        self, session: Session, sql: str, running: Portal | None
    ) -> StatementResult | None:
        """FETCH, MOVE or CLOSE of a portal of this connection's (not of a DECLAREd
        cursor); None for any other statement, which the session answers."""
        found = self._portal_named(session, sql)
        if found is None:
            return None
        statement, name, portal = found
        if isinstance(statement, CloseCursor):
            if portal is running:
                raise QueryError(INVALID_CURSOR_STATE, f'cannot drop active portal "{name}"')
            del self.portals[name]
            return StatementResult(tag="CLOSE CURSOR")
        if portal is running:
            raise _cannot_run(name)
        answer = portal.result
        notices: tuple[Notice, ...] = ()
        if answer is None:
            answer = await self._run(session, name, portal)
            notices = answer.notices
        if answer.columns is None or answer.copy is not None:
            raise _cannot_run(name)  # it returns no rows (SET, COPY)
        try:
            moved = move_portal(statement, answer, portal.sent_rows, at_end=portal.done)
        except QueryError:
            portal.result = None  # failed, as PostgreSQL marks it: it cannot be run again
            raise
        portal.sent_rows, portal.done = moved.sent_rows, moved.at_end
        return dataclasses.replace(moved.result, notices=notices)

    def _portal_named(
        self, session: Session, sql: str
    ) -> tuple[Fetch | CloseCursor, str, Portal] | None:
        """The FETCH, MOVE or CLOSE ``sql`` of a portal bound here, and the portal; None
        if ``sql`` is none (or is one of a DECLAREd cursor: the session's), or cannot be
        read (the session says why), or the transaction failed (the session refuses it)."""
        if not self.portals or not _may_name_portal(sql):
            return None
        if session.transaction_status is TransactionStatus.FAILED:
            return None
        try:
            recognized = recognize(sql)
            if recognized is None or recognized.kind not in _PORTAL_KINDS:
                return None
            statement = read_cursor_statement(sql)
        except (StatementSyntaxError, QueryError):
            return None
        if isinstance(statement, Declare) or statement.name is None:
            return None  # CLOSE ALL: the session's cursors, and then after_session_statement
        name = statement.name
        portal = self.portals.get(name) if name else None
        if portal is None or session.cursor_columns(name) is not None:
            return None
        return statement, name, portal

    async def _describe(self, session: Session, sql: str) -> tuple[ColumnDescription, ...] | None:
        """The columns ``sql`` returns: a FETCH of a portal bound here, its portal's."""
        found = self._portal_named(session, sql)
        if found is None:
            return await session.describe(sql)
        statement, _, portal = found
        if isinstance(statement, CloseCursor) or statement.move:
            return None
        if portal.result is not None:
            return portal.result.columns
        return None if portal.started else await session.describe(portal.sql)

    async def _formats(self, session: Session, portal: Portal) -> tuple[int, ...] | None:
        """The format of each column of ``portal``'s rows, decided before it runs: refuse
        (QueryError) what cannot be answered as asked, before anything is charged."""
        told = portal.told
        if told is not None and told.generation == self.generation:
            return told.formats  # described since the last statement ran: still true
        if told is None:
            told = portal.statement.told
        requested = portal.result_formats
        if told is None and len(requested) <= 1 and BINARY_FORMAT not in requested:
            return None  # text, and the client was not told what columns to expect
        # The columns of the statement with its real values. A Describe of the statement
        # (``portal.statement.told``) was made with stand-ins for its parameters, of their
        # types: the columns' names and types come from the statement's shape and those
        # types, seldom from a value (a value that makes another literal: NaN for 0.5, a
        # NULL); where they do differ, the client would misread the rows, so the portal
        # is refused here, before the charge, as PostgreSQL refuses a plan whose result
        # type changed.
        planned = await self._describe(session, portal.sql)
        if told is not None and _shape(told.columns) != _shape(planned):
            raise QueryError(
                FEATURE_NOT_SUPPORTED,
                "cached plan must not change result type",
                detail=f"the statement was described with {_shown(told.columns)}; it would "
                f"now return {_shown(planned)}",
                hint="a SET (such as dpproxy.report), or the parameters' values, changed "
                "the statement's columns: Describe it again (or the portal, after Bind), "
                "or Close it and prepare it again",
                routine="RevalidateCachedQuery",  # as PostgreSQL's: asyncpg prepares again
            )
        if planned is None:
            return None
        if portal.told is not None:
            return portal.told.formats  # the same columns, as the client was told
        formats = column_formats(requested, len(planned))
        # The client was sent no RowDescription saying otherwise: it reads the columns in
        # the formats it asked for, so a column dpproxy cannot send in binary is refused.
        _check_binary(planned, formats)
        return formats if BINARY_FORMAT in formats else None

    def close(self, msg: Close) -> bytes:
        if msg.kind == "S":
            self.statements.pop(msg.name, None)
        elif msg.kind == "P":
            self.portals.pop(msg.name, None)
        else:
            raise QueryError(PROTOCOL_VIOLATION, f"invalid CLOSE message subtype {msg.kind!r}")
        return codec.close_complete()

    def sync(self, status: TransactionStatus, transactions_ended: int) -> None:
        """At Sync, and after a simple Query: outside a transaction block (``status`` IDLE)
        the transaction has ended, and its portals with it, as in PostgreSQL; so has it
        when a block ended since (``Session.transactions_ended``: COMMIT AND CHAIN)."""
        if status is TransactionStatus.IDLE or transactions_ended != self._ended:
            self.portals.clear()
        self._ended = transactions_ended

    def forget_unnamed(self) -> None:
        """A simple Query ends the unnamed statement and portal, as in PostgreSQL."""
        self.statements.pop("", None)
        self.portals.pop("", None)

    # --- DEALLOCATE and DISCARD, which the session answers but which act on statements ---

    def check_session_statement(self, sql: str) -> None:
        """Before running ``sql``: DEALLOCATE of an unknown statement is an error. Called
        before every statement the session runs: a Describe made before is now stale."""
        self.generation += 1
        statement = _cleanup_statement(sql)
        if statement is None or statement.kind is not Kind.DEALLOCATE or statement.name is None:
            return
        if statement.name not in self.statements:
            raise QueryError(
                INVALID_SQL_STATEMENT_NAME,
                f'prepared statement "{statement.name}" does not exist',
            )

    def after_session_statement(self, sql: str, running: Portal | None = None) -> None:
        """After ``sql`` succeeded: DEALLOCATE and DISCARD ALL drop prepared statements;
        CLOSE ALL closes the portals, as in PostgreSQL (but ``running``, the one whose
        Execute ran it, as PostgreSQL keeps an active portal)."""
        if _is_close_all(sql):
            self.portals = {n: p for n, p in self.portals.items() if p is running}
            return
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


def _cannot_run(name: str) -> QueryError:
    return QueryError(
        OBJECT_NOT_IN_PREREQUISITE_STATE,
        f'portal "{name}" cannot be run',
        hint="it has run (or failed) already: Bind it again to run the statement again",
    )


def _count(columns: tuple[ColumnDescription, ...] | None) -> int:
    return 0 if columns is None else len(columns)


def _shape(columns: tuple[ColumnDescription, ...] | None) -> tuple[tuple[str, int], ...] | None:
    """What a client reading the rows relies on: each column's name and type."""
    return None if columns is None else tuple((c.name, c.type_oid) for c in columns)


def _shown(columns: tuple[ColumnDescription, ...] | None) -> str:
    if columns is None:
        return "no columns (no rows)"
    listed = ", ".join(f"{c.name} {type_name(c.type_oid)}" for c in columns)
    return f"{len(columns)} column{'s' if len(columns) != 1 else ''} ({listed})"


def _with_count(tag: str, count: int) -> str:
    """``tag`` with its row count replaced by ``count`` (a tag without one as it is)."""
    words = tag.split(" ")
    if len(words) > 1 and words[0] in _COUNTED_TAGS and words[-1].isdigit():
        return " ".join([*words[:-1], str(count)])
    return tag


def _is_query(sql: str) -> bool:
    """Whether ``sql`` is a query, not a session statement (nor empty, nor one that fails
    as one: its error comes when it runs)."""
    try:
        return recognize(sql) is None and bool(strip_sql(sql))
    except (StatementSyntaxError, QueryError):
        return False


def _may_name_portal(sql: str) -> bool:
    """Whether ``sql`` may be a FETCH, MOVE or CLOSE (a quick look, before reading it)."""
    lowered = sql.lower()
    return "fetch" in lowered or "move" in lowered or "close" in lowered


def _is_close_all(sql: str) -> bool:
    if "close" not in sql.lower():
        return False
    try:
        statement = recognize(sql)
        if statement is None or statement.kind is not Kind.CLOSE:
            return False
        read = read_cursor_statement(sql)
    except (StatementSyntaxError, QueryError):
        return False
    return isinstance(read, CloseCursor) and read.name is None


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


def _unsendable(
    columns: Sequence[ColumnDescription], formats: Sequence[int]
) -> ColumnDescription | None:
    """The first column asked for in binary that dpproxy cannot send so (None: none)."""
    return next(
        (
            c
            for c, f in zip(columns, formats, strict=False)
            if f == BINARY_FORMAT and c.type_oid not in BINARY_RESULT_TYPES
        ),
        None,
    )


def _check_binary(columns: Sequence[ColumnDescription], formats: Sequence[int]) -> None:
    if len(columns) != len(formats):
        raise ValueError("one format per column")
    column = _unsendable(columns, formats)
    if column is not None:
        raise QueryError(
            FEATURE_NOT_SUPPORTED,
            f'dpproxy cannot send column "{column.name}" ({type_name(column.type_oid)}) '
            "in binary format; nothing was charged",
            hint="ask for text results (psycopg: a cursor without binary=True; pgJDBC: "
            "binaryTransfer=false), or Describe the portal before Execute: dpproxy then "
            "sends such a column in text, and its RowDescription says so",
        )


def _sendable(
    columns: tuple[ColumnDescription, ...] | None, result_formats: Sequence[int]
) -> tuple[int, ...]:
    """For a Describe of a portal: the formats asked for in Bind or, when dpproxy cannot
    send a column asked for in binary, text for every column. Clients read the formats
    from the RowDescription (libpq, pgJDBC, node-postgres); psycopg takes the first
    column's format for all, so they are never mixed against what was asked."""
    if columns is None:
        return ()
    formats = column_formats(result_formats, len(columns))
    if _unsendable(columns, formats) is not None:
        return (TEXT_FORMAT,) * len(columns)
    return formats


def _row_description(
    columns: tuple[ColumnDescription, ...] | None, formats: Sequence[int]
) -> bytes:
    if columns is None:
        return codec.no_data()
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
    columns: tuple[ColumnDescription, ...] | None, formats: tuple[int, ...] | None
) -> codec.RowEncoder:
    """The encoder of the rows of ``columns`` in ``formats``, decided before the statement
    ran (None: all text) from the columns the session said it would return."""
    if columns is None or formats is None or BINARY_FORMAT not in formats:
        return codec.data_row
    if len(formats) != len(columns) or _unsendable(columns, formats) is not None:
        # The session described other columns than it returned: a bug, logged as one.
        logger.error("the result's columns %s differ from those described before it ran", columns)
        raise QueryError(
            INTERNAL_ERROR,
            "internal error in dpproxy: the answer's columns differ from those described",
            hint="ask for text results; report this to an admin",
        )
    return _RowEncoder(
        tuple(
            c.type_oid if f == BINARY_FORMAT else None
            for c, f in zip(columns, formats, strict=True)
        )
    )
