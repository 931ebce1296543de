"""The cursors of one session (DECLARE, FETCH, MOVE, CLOSE), as PostgreSQL 15 keeps them.

A cursor holds the rows of its query's answer, made once at DECLARE (the query answered
as the same query sent alone: planned, charged, audited; proxy.session), and a position
in them. FETCH and MOVE only move through these rows: they run nothing, and cost nothing.
No I/O here.

Positions follow PostgreSQL's portal (src/backend/tcop/pquery.c, DoPortalRunFetch and
PortalRunSelect), transcribed: the flags atStart and atEnd, portalPos (the row last
fetched, counted from 1), and the scan's own place in the rows, which each forward or
backward run moves. Moving backward (PRIOR, BACKWARD, FETCH 0 on a row, ABSOLUTE to an
earlier row, LAST ...) needs a SCROLL cursor: 55000 ``cursor can only scan forward``.
PostgreSQL lets a cursor declared with neither SCROLL nor NO SCROLL move backward when
its plan can (a query ending in an aggregate cannot); dpproxy's are NO SCROLL then.

A FETCH or MOVE that fails leaves its cursor unusable (55000 ``portal "c" cannot be
run``), as PostgreSQL marks the portal failed; CLOSE still closes it.

Lifetimes, as PostgreSQL's: a cursor without HOLD belongs to its transaction block and
ends with it (COMMIT or ROLLBACK), or with the savepoint it was declared after (ROLLBACK
TO it; RELEASE hands it to the savepoint before). A WITH HOLD cursor outlives the COMMIT
of the block that declared it (declared outside a block, at once), but not its ROLLBACK;
once held, only CLOSE, DISCARD ALL and the end of the session end it. Moves are never
undone by a rollback, nor is a CLOSE.

A session holds at most MAX_CURSORS cursors: their rows are answers already in memory,
and a client must not grow that without bound.

The cursors open are the rows of the session's pg_cursors (``listed``, read by the
catalog: proxy.catalog.open_cursors), as PostgreSQL lists its portals made by DECLARE:
their name, the DECLARE's text, WITH HOLD, BINARY (never), SCROLL as the cursor moves, and
when the DECLARE began.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from proxy.catalog.session_values import NO_CURSORS, OpenCursor, SessionCursors
from proxy.cursor_statements import FETCH_ALL, Declare, Direction, Fetch
from proxy.seam import ColumnDescription, QueryError, StatementResult
from proxy.sqlstate import (
    DUPLICATE_CURSOR,
    FEATURE_NOT_SUPPORTED,
    INVALID_CURSOR_NAME,
    NO_ACTIVE_SQL_TRANSACTION,
    OBJECT_NOT_IN_PREREQUISITE_STATE,
    PROGRAM_LIMIT_EXCEEDED,
)

#: The most cursors one session may hold open at once.
MAX_CURSORS = 64

Row = tuple[str | None, ...]


@dataclass
class Cursor:
    name: str
    columns: tuple[ColumnDescription, ...]
    rows: tuple[Row, ...]
    scroll: bool
    #: The savepoints open when it was declared in the current transaction block (its
    #: ROLLBACK TO ends it); None once it outlives its transaction (WITH HOLD).
    depth: int | None
    hold: bool
    #: Its row of pg_cursors (the DECLARE's text, when it began ...).
    listed: OpenCursor
    at_start: bool = True
    at_end: bool = False
    position: int = 0  # PostgreSQL's portalPos
    #: Where the scan is: on row ``scan`` (from 1), or before the first (0), or past the
    #: last (len(rows) + 1).
    scan: int = 0
    failed: bool = False


class Cursors:
    """The cursors of one session, by name."""

    def __init__(self) -> None:
        self._open: dict[str, Cursor] = {}
        self._listed: SessionCursors | None = NO_CURSORS  # None: to be made again

    def listed(self) -> SessionCursors:
        """The cursors open, in the order they were declared: the rows of the session's
        pg_cursors. The same object until a cursor opens or ends (its key is computed
        once per change)."""
        if self._listed is None:
            self._listed = SessionCursors(tuple(c.listed for c in self._open.values()))
        return self._listed

    def columns(self, name: str) -> tuple[ColumnDescription, ...] | None:
        """The columns of the cursor ``name`` (None: there is none), for a Describe of
        its portal or of a FETCH from it."""
        cursor = self._open.get(name)
        return None if cursor is None else cursor.columns

    def check_declare(self, declare: Declare, *, in_block: bool) -> None:
        """Refuse (QueryError) a DECLARE that could not open its cursor, before its
        query is answered (and charged)."""
        if declare.binary:
            raise QueryError(
                FEATURE_NOT_SUPPORTED,
                "DECLARE ... BINARY CURSOR is not supported by dpproxy",
                hint="declare the cursor without BINARY (its rows then come in text); a "
                "client may still ask for binary results of FETCH in the extended protocol",
            )
        if not declare.hold and not in_block:
            raise QueryError(
                NO_ACTIVE_SQL_TRANSACTION, "DECLARE CURSOR can only be used in transaction blocks"
            )
        if declare.name in self._open:
            raise QueryError(DUPLICATE_CURSOR, f'cursor "{declare.name}" already exists')
        if len(self._open) >= MAX_CURSORS:
            raise QueryError(
                PROGRAM_LIMIT_EXCEEDED,
                f"this session already holds {len(self._open)} open cursors; dpproxy keeps "
                f"at most {MAX_CURSORS}",
                hint="CLOSE the cursors no longer needed (CLOSE name, or CLOSE ALL), or "
                "declare them WITHOUT HOLD so that they end with their transaction",
            )

    def open(
        self,
        declare: Declare,
        answer: StatementResult,
        *,
        depth: int | None,
        begun: datetime | None = None,
    ) -> StatementResult:
        """Open the cursor of ``declare`` (checked by ``check_declare``) on ``answer``,
        its query's answer; ``depth``: the savepoints open (None outside a block, where
        only a WITH HOLD cursor may be declared, held at once). pg_cursors shows it with
        the DECLARE's text and when it began (``begun``, with its time zone: else now)."""
        scroll = bool(declare.scroll)
        listed = OpenCursor(
            name=declare.name,
            statement=declare.text,
            is_holdable=declare.hold,
            is_binary=declare.binary,
            is_scrollable=scroll,
            creation_time=datetime.now(UTC) if begun is None else begun,
        )
        self._open[declare.name] = Cursor(
            declare.name,
            answer.columns or (),
            answer.rows,
            scroll=scroll,
            depth=depth,
            hold=declare.hold,
            listed=listed,
        )
        self._listed = None
        return StatementResult(tag="DECLARE CURSOR", notices=answer.notices)

    def fetch(self, fetch: Fetch) -> StatementResult:
        """FETCH (its rows) or MOVE (how many rows it moved over), as PostgreSQL's."""
        cursor = self._cursor(fetch.name)
        if cursor.failed:
            raise QueryError(
                OBJECT_NOT_IN_PREREQUISITE_STATE, f'portal "{cursor.name}" cannot be run'
            )
        sent: list[Row] | None = None if fetch.move else []
        try:
            count = run_fetch(cursor, fetch.direction, fetch.count, sent)
        except QueryError:
            cursor.failed = True  # as PostgreSQL's MarkPortalFailed
            raise
        tag = f"{fetch.command} {count}"
        if sent is None:
            return StatementResult(tag=tag)
        return StatementResult(tag=tag, columns=cursor.columns, rows=tuple(sent))

    def close(self, name: str | None) -> StatementResult:
        """CLOSE name, or CLOSE ALL (``name`` None)."""
        if name is None:
            self.close_all()
            return StatementResult(tag="CLOSE CURSOR ALL")
        self._cursor(name)
        self._end(name)
        return StatementResult(tag="CLOSE CURSOR")

    def end_transaction(self, *, commit: bool) -> None:
        """The transaction block ended: its cursors end, but those WITH HOLD when it
        commits, which are held from now on."""
        for name, cursor in list(self._open.items()):
            if cursor.depth is None:
                continue
            if commit and cursor.hold:
                cursor.depth = None
            else:
                self._end(name)

    def rollback_to(self, savepoints: int) -> None:
        """ROLLBACK TO the savepoint that ``savepoints`` were open before: the cursors
        declared after it end."""
        for name, cursor in list(self._open.items()):
            if cursor.depth is not None and cursor.depth >= savepoints + 1:
                self._end(name)

    def release(self, savepoints: int) -> None:
        """RELEASE of the savepoint that ``savepoints`` were open before: the cursors
        declared after it now belong to the savepoint before it."""
        for cursor in self._open.values():
            if cursor.depth is not None and cursor.depth > savepoints:
                cursor.depth = savepoints

    def close_all(self) -> None:
        """CLOSE ALL, DISCARD ALL."""
        self._open.clear()
        self._listed = NO_CURSORS

    def _end(self, name: str) -> None:
        del self._open[name]
        self._listed = None

    def _cursor(self, name: str) -> Cursor:
        found = self._open.get(name)
        if found is None:
            raise QueryError(INVALID_CURSOR_NAME, f'cursor "{name}" does not exist')
        return found


def run_fetch(cursor: Cursor, direction: Direction, count: int, sent: list[Row] | None) -> int:
    """PostgreSQL's DoPortalRunFetch: move ``cursor``, put the rows fetched in ``sent``
    (None: MOVE), and return the count of the command's tag."""
    if direction is Direction.FORWARD and count < 0:
        direction, count = Direction.BACKWARD, -count
    elif direction is Direction.BACKWARD and count < 0:
        direction, count = Direction.FORWARD, -count
    elif direction is Direction.ABSOLUTE:
        if count > 0:
            # Rewind and go forward, or go from where it is when that is nearer.
            if count - 1 <= cursor.position // 2 or cursor.position >= FETCH_ALL:
                _rewind(cursor)
                if count > 1:
                    _select(cursor, True, count - 1, None)
            else:
                position = cursor.position + 1 if cursor.at_end else cursor.position
                if count <= position:
                    _select(cursor, False, position - count + 1, None)
                elif count > position + 1:
                    _select(cursor, True, count - position - 1, None)
            return _select(cursor, True, 1, sent)
        if count < 0:
            # To the end, back abs(count) - 1 rows, then the row before.
            _select(cursor, True, FETCH_ALL, None)
            if count < -1:
                _select(cursor, False, -count - 1, None)
            return _select(cursor, False, 1, sent)
        _rewind(cursor)
        return _select(cursor, True, 0, sent)
    elif direction is Direction.RELATIVE:
        if count > 0:
            if count > 1:
                _select(cursor, True, count - 1, None)
            return _select(cursor, True, 1, sent)
        if count < 0:
            if count < -1:
                _select(cursor, False, -count - 1, None)
            return _select(cursor, False, 1, sent)
        direction = Direction.FORWARD  # RELATIVE 0 is FORWARD 0
    forward = direction is Direction.FORWARD
    if count == 0:  # the current row again, if the cursor is on one
        on_row = not cursor.at_start and not cursor.at_end
        if sent is None:
            return 1 if on_row else 0  # MOVE 0: whether FETCH 0 would return a row
        if on_row:
            _select(cursor, False, 1, None)
            count, forward = 1, True
    if not forward and count == FETCH_ALL and sent is None:  # MOVE BACKWARD ALL: a rewind
        moved = cursor.position
        if moved > 0 and not cursor.at_end:
            moved -= 1
        _rewind(cursor)
        return moved
    return _select(cursor, forward, count, sent)


def _select(cursor: Cursor, forward: bool, count: int, sent: list[Row] | None) -> int:
    """PostgreSQL's PortalRunSelect: up to ``count`` rows (FETCH_ALL: all) forward or
    backward from the scan's place, into ``sent`` unless it is None; how many."""
    rows, last = cursor.rows, len(cursor.rows)
    if forward:
        if cursor.at_end or count <= 0:
            return 0  # no movement
        taken = (
            rows[cursor.scan :] if count == FETCH_ALL else rows[cursor.scan : cursor.scan + count]
        )
        processed = len(taken)
        ran_out = count == FETCH_ALL or processed < count
        cursor.scan = last + 1 if ran_out else cursor.scan + processed
        if processed > 0:
            cursor.at_start = False
        if ran_out:
            cursor.at_end = True
        cursor.position += processed
    else:
        if not cursor.scroll:
            raise _forward_only()
        if cursor.at_start or count <= 0:
            return 0
        before = rows[: max(cursor.scan - 1, 0)][::-1]  # the rows before the scan's, nearest first
        taken = before if count == FETCH_ALL else before[:count]
        processed = len(taken)
        ran_out = count == FETCH_ALL or processed < count
        cursor.scan = 0 if ran_out else cursor.scan - processed
        if processed > 0 and cursor.at_end:
            cursor.at_end = False
            cursor.position += 1
        if ran_out:
            cursor.at_start = True
            cursor.position = 0
        else:
            cursor.position -= processed
    if sent is not None:
        sent.extend(taken)
    return processed


def _rewind(cursor: Cursor) -> None:
    """PostgreSQL's DoPortalRewind: back before the first row (needs SCROLL unless the
    cursor has not moved)."""
    if cursor.at_start and not cursor.at_end:
        return
    if not cursor.scroll:
        raise _forward_only()
    cursor.scan, cursor.at_start, cursor.at_end, cursor.position = 0, True, False, 0


def _forward_only() -> QueryError:
    return QueryError(
        OBJECT_NOT_IN_PREREQUISITE_STATE,
        "cursor can only scan forward",
        hint="Declare it with SCROLL option to enable backward scan.",
    )
