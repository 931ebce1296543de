"""Pieces of PostgreSQL's lexer that the statement scanners share (proxy.sql_tokens,
proxy.statements, proxy.several_statements): white space, and where a /* */ comment ends
(comments nest). Apart, with no imports of its own."""

from __future__ import annotations

#: White space as PostgreSQL's lexer knows it (not Unicode's: U+00A0 may be in a name).
SQL_SPACE = " \t\n\r\f\v"


def block_comment_end(sql: str, start: int) -> int | None:
    """The end of the /* */ comment at ``start``, nested ones inside; None if left open."""
    depth = 0
    position = start
    while position < len(sql):
        if sql.startswith("/*", position):
            depth += 1
            position += 2
        elif sql.startswith("*/", position):
            depth -= 1
            position += 2
            if depth == 0:
                return position
        else:
            position += 1
    return None
