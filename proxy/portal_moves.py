"""FETCH and MOVE of a portal made by the extended protocol's Bind, as PostgreSQL moves it.

In PostgreSQL a named portal is a cursor: FETCH, MOVE and CLOSE find it by name, in the
transaction that bound it, as they find a DECLAREd one. asyncpg's ``Cursor.forward(n)``
sends ``MOVE FORWARD n "__asyncpg_portal_1__"`` on the portal it Binds and Executes.
Such a portal moves forward only (PostgreSQL's CreatePortal makes it NO SCROLL), over
the rows of its answer, which the portal holds once it ran (proxy.extended); Execute and
FETCH take rows from the same place. The moves are proxy.cursors' (PostgreSQL's
DoPortalRunFetch). No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from proxy.catalog.session_values import OpenCursor
from proxy.cursor_statements import Fetch
from proxy.cursors import Cursor, Row, run_fetch
from proxy.seam import StatementResult


@dataclass(frozen=True)
class Moved:
    """What a FETCH or MOVE answered, and where the portal is then."""

    result: StatementResult
    sent_rows: int  # the rows taken (by Execute, FETCH or MOVE): the next is the one after
    at_end: bool  # it ran out of rows: Execute returns none


def move_portal(fetch: Fetch, answer: StatementResult, sent_rows: int, *, at_end: bool) -> Moved:
    """``fetch`` of a portal whose answer is ``answer``, of which ``sent_rows`` rows were
    taken already (``at_end``: all, and it ran out). Raises QueryError as a NO SCROLL
    cursor's FETCH does (55000 for a move backward)."""
    rows = answer.rows
    cursor = Cursor(
        fetch.name,
        answer.columns or (),
        rows,
        scroll=False,
        depth=None,
        hold=False,
        listed=OpenCursor(fetch.name, "", False, False, False, datetime.now(UTC)),
        at_start=sent_rows == 0,
        at_end=at_end,
        position=sent_rows,
        scan=len(rows) + 1 if at_end else sent_rows,
    )
    sent: list[Row] | None = None if fetch.move else []
    count = run_fetch(cursor, fetch.direction, fetch.count, sent)
    tag = f"{fetch.command} {count}"
    # Forward only: the cursor's position is the rows it went over.
    moved_to = min(cursor.position, len(rows))
    if sent is None:
        return Moved(StatementResult(tag=tag), moved_to, cursor.at_end)
    result = StatementResult(tag=tag, columns=answer.columns, rows=tuple(sent))
    return Moved(result, moved_to, cursor.at_end)
