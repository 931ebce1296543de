"""The one seam between the wire protocol (``proxy.server``) and the query pipeline.

The server knows bytes, connection states and authentication exchanges; the application
knows analysts, sessions and queries. Neither imports the other's internals: the server
is given an object satisfying :class:`Application`, and every statement it receives goes
through :meth:`Session.execute`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol


class TransactionStatus(Enum):
    """The transaction indicator sent in ReadyForQuery."""

    IDLE = b"I"
    IN_TRANSACTION = b"T"
    FAILED = b"E"


@dataclass(frozen=True)
class Notice:
    """A NoticeResponse: information for the client that does not end the statement."""

    message: str
    severity: str = "NOTICE"
    code: str = "00000"
    detail: str | None = None
    hint: str | None = None


@dataclass(frozen=True)
class ColumnDescription:
    """One field of a RowDescription. Values are always sent in text format."""

    name: str
    type_oid: int
    type_size: int = -1
    type_modifier: int = -1


@dataclass(frozen=True)
class CopyOut:
    """What a ``COPY (query) TO STDOUT`` sends after its notices: CopyOutResponse (text
    format, ``columns`` columns), one CopyData per line of ``lines`` (each ending with its
    newline, the header line first if asked for), CopyDone (proxy.copy_out)."""

    columns: int
    lines: tuple[str, ...]


@dataclass(frozen=True)
class StatementResult:
    """The outcome of one statement that succeeded.

    ``columns`` is None for statements that return no rows (SET, BEGIN, ...): the server
    then sends only CommandComplete. ``rows`` hold text-format values (None is NULL).
    ``empty`` marks an empty query string (EmptyQueryResponse); ``copy``, the data of a
    COPY ... TO STDOUT (``columns`` is then None and ``rows`` empty). The ParameterStatus
    messages of reported values a statement changed are not part of it: the server sends
    them before ReadyForQuery from :meth:`Session.reported_parameters`.
    """

    tag: str
    columns: tuple[ColumnDescription, ...] | None = None
    rows: tuple[tuple[str | None, ...], ...] = ()
    notices: tuple[Notice, ...] = ()
    empty: bool = False
    copy: CopyOut | None = None


class QueryError(Exception):
    """A statement failed; the server sends an ErrorResponse with these fields.

    ``message`` is what the analyst reads: it says what went wrong and what to do.
    Raw backend error text must never be put here.
    """

    def __init__(
        self,
        sqlstate: str,
        message: str,
        *,
        detail: str | None = None,
        hint: str | None = None,
        severity: str = "ERROR",
        notices: tuple[Notice, ...] = (),
        routine: str | None = None,
    ) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate
        self.message = message
        self.detail = detail
        self.hint = hint
        self.severity = severity
        self.notices = notices
        #: PostgreSQL's source routine (the R field), where a client recognises an error
        #: by it: asyncpg prepares again on 0A000 from RevalidateCachedQuery.
        self.routine = routine


@dataclass(frozen=True)
class ClientInfo:
    """Who connected: the startup packet's parameters and the peer address."""

    user: str
    database: str
    address: str
    parameters: dict[str, str] = field(default_factory=dict)


class Session(Protocol):
    """One authenticated connection's application state."""

    @property
    def transaction_status(self) -> TransactionStatus: ...

    @property
    def transactions_ended(self) -> int:
        """How many transaction blocks (explicit or implicit) have ended so far: COMMIT
        and ROLLBACK end one even when AND CHAIN begins the next at once, and the
        portals of the one that ended end with it."""
        ...

    def abort_transaction(self) -> None:
        """An error outside ``execute`` (the extended protocol's own) inside a transaction
        block: the block has failed, as any error fails it in PostgreSQL."""
        ...

    def reported_parameters(self) -> dict[str, str]:
        """The session's values of the parameters it reports (ParameterStatus), under
        PostgreSQL's names: the startup packet may have set them (TimeZone, …). Before
        each ReadyForQuery the server sends those that changed since it last told the
        client, as PostgreSQL 15 does."""
        ...

    async def execute(self, sql: str) -> StatementResult:
        """Run one statement (a Query message, one of its statements, or Execute of a
        portal). Raise QueryError."""
        ...

    def parameter_columns(self) -> Mapping[str, Mapping[str, int | None]]:
        """The type OID of each column of the tables the session may query (table ->
        column, lower case; None: a type parameters are not compared as), which an
        undeclared parameter compared with the column takes (proxy.parameter_types)."""
        ...

    def begin_several(self) -> None:
        """A Query message of several statements starts (``proxy.several_statements``):
        until ``end_several`` they run in PostgreSQL's implicit transaction block, and a
        cancel request stops the statements not run yet."""
        ...

    def end_several(self, *, failed: bool) -> None:
        """That Query ended, at an error if ``failed``: its implicit transaction block
        ends (settings it changed are undone if it failed)."""
        ...

    def query_prepared(self) -> None:
        """The extended protocol's Parse or Bind of a query (not of SET, SHOW, BEGIN...)
        takes the transaction's snapshot, as in PostgreSQL: the transaction block's modes
        are fixed from then (SET TRANSACTION ISOLATION LEVEL is refused after it)."""
        ...

    async def describe(self, sql: str) -> tuple[ColumnDescription, ...] | None:
        """The columns ``execute(sql)`` would return (None: no rows), without running the
        statement or charging anything. Raise QueryError if it would be refused."""
        ...

    def cursor_columns(self, name: str) -> tuple[ColumnDescription, ...] | None:
        """The columns of the cursor ``name`` a DECLARE opened (None: no such cursor): a
        portal of the extended protocol, as in PostgreSQL, which a Describe describes."""
        ...

    def cancel(self) -> None:
        """Ask the statement running now (if any) to stop. Safe from any task."""
        ...

    async def close(self) -> None:
        """The connection ended (Terminate or disconnect)."""
        ...


class Application(Protocol):
    """What the server needs from the rest of dpproxy."""

    async def scram_verifier(self, user: str) -> str | None:
        """The stored SCRAM-SHA-256 verifier for ``user``, or None if unknown. Awaited, so
        that a slow lookup stalls only this login."""
        ...

    def server_parameters(self) -> dict[str, str]:
        """ParameterStatus values sent after authentication (server_version, ...)."""
        ...

    async def open_session(self, client: ClientInfo) -> Session:
        """Called after successful authentication. Raise QueryError to refuse."""
        ...

    def log_authentication_failure(self, client: ClientInfo, reason: str) -> None:
        """Record a failed login (audit)."""
        ...
