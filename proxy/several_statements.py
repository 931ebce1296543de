"""A simple Query that holds several statements (``SET …; SELECT …``), as PostgreSQL runs it.

The text is split where PostgreSQL's lexer finds a ``;`` outside string constants ('…'
with '' quotes, E'…' with backslash escapes), quoted identifiers, dollar-quoted strings
and comments (-- and nested /* */): the same reading (``proxy.parameters.scan``) by which
a Parse of several statements is refused. Text that cannot be read so (an unterminated
quote or comment) is refused whole, and nothing of it runs. Empty statements (``;;``,
only a comment) are skipped, as PostgreSQL skips them.

The statements then run one by one, each exactly as if it had come alone in a Query
message (``Session.execute``: session statements, catalog answers, the DP pipeline with
its checks, charge and audit); the first error ends the Query, and the rest is not run.
Between ``Session.begin_several`` and ``Session.end_several`` the session keeps
PostgreSQL's implicit transaction block: settings changed by the Query are undone if it
fails (unless a COMMIT in it kept them), SET LOCAL lasts until its end, and a cancel
request stops the rest. Answers released before an error stay charged.

An error that names where in a statement it is (a syntax error's "(line L, column C)")
names it in the Query's whole text, as PostgreSQL counts its positions: the second
statement's first line is not line 1 of the text (:meth:`Statement.placed`).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from proxy.parameters import scan
from proxy.seam import QueryError, Session
from proxy.sql_lexer import SQL_SPACE
from proxy.sqlstate import PROGRAM_LIMIT_EXCEEDED, SYNTAX_ERROR

T = TypeVar("T")

#: Where a syntax error is, as rewriter.parse words it (sqlglot's line and column: lines
#: end at \n, \r\n or \r; columns count characters from 1).
_WHERE = re.compile(r"\(line (\d+), column (\d+)\)")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Statement:
    """One statement of a Query's text, and where it begins there: ``line`` line breaks
    before it, ``column`` characters before it on its first line."""

    text: str
    line: int = 0
    column: int = 0

    def placed(self, error: QueryError) -> QueryError:
        """``error``, its syntax error's line and column counted in the whole text."""
        if (self.line, self.column) == (0, 0) or error.sqlstate != SYNTAX_ERROR:
            return error
        # The last one: rewriter.parse puts it after the text it quotes.
        found = next(reversed(list(_WHERE.finditer(error.message))), None)
        if found is None:
            return error
        line, column = int(found.group(1)), int(found.group(2))
        if line == 1:
            column += self.column
        where = f"(line {line + self.line}, column {column})"
        message = error.message[: found.start()] + where + error.message[found.end() :]
        return QueryError(
            error.sqlstate,
            message,
            detail=error.detail,
            hint=error.hint,
            severity=error.severity,
            notices=error.notices,
        )


#: The most statements one Query message may hold; one with more is refused whole.
#: Scripts of SET and SELECT statements stay well below; a client sending more is better
#: served one statement (or a few) per Query, each answered (and charged) as it comes.
MAX_STATEMENTS = 100

NOT_SPLIT_HINT = "dpproxy could not tell where the statements of this query end, so it ran none"


def split_query(sql: str) -> list[str]:
    """The statements of a simple Query's text, in order: each from after the ``;`` before
    it (comments before it kept) to its own ``;`` (excluded), without white space around
    it. Text without a ``;`` is
    one statement (or none), as it came. Text of no statement (``;``, only comments) is
    ``[""]``, answered by EmptyQueryResponse. Raise QueryError 42601 where the text
    cannot be read (nothing is run), 54000 for more than MAX_STATEMENTS statements."""
    return [statement.text for statement in split_statements(sql)]


def split_statements(sql: str) -> list[Statement]:
    """``split_query``'s statements, each with where it begins in ``sql``."""
    if ";" not in sql:
        return [Statement(sql)]
    try:
        spans = scan(sql).spans
    except QueryError as error:
        raise QueryError(error.sqlstate, error.message, hint=NOT_SPLIT_HINT) from None
    if len(spans) > MAX_STATEMENTS:
        raise QueryError(
            PROGRAM_LIMIT_EXCEEDED,
            f"this query holds {len(spans)} statements; dpproxy runs at most "
            f"{MAX_STATEMENTS} in one query, and ran none of these",
            hint=f"send them in several queries of at most {MAX_STATEMENTS} statements",
        )
    if not spans:
        return [Statement("")]
    statements = []
    line, line_start, scanned = 0, 0, 0
    for start, end in spans:  # in order: the text is read once for its line breaks
        piece = sql[start:end]
        begins = start + len(piece) - len(piece.lstrip(SQL_SPACE))
        for found in _LINE_BREAK.finditer(sql, scanned, begins):
            line, line_start = line + 1, found.end()
        scanned = begins
        statements.append(Statement(piece.strip(SQL_SPACE), line, begins - line_start))
    return statements


async def run_statements(
    session: Session, statements: Sequence[T], run: Callable[[T], Awaitable[bool]]
) -> None:
    """Run ``statements`` (split_query's) in order with ``run``, which answers one
    statement and returns False after an error; stop at the first error. Several run in
    the session's implicit transaction block, which ends here (a reported value its end
    restored is told to the client before ReadyForQuery, from
    ``Session.reported_parameters``)."""
    if len(statements) == 1:
        await run(statements[0])
        return
    session.begin_several()
    failed = True
    try:
        for statement in statements:
            if not await run(statement):
                break
        else:
            failed = False
    finally:
        session.end_several(failed=failed)
