"""Where a /* */ comment ends, as PostgreSQL's lexer reads it (comments nest). Apart, with
no imports of its own, for the statement scanners that need it (proxy.sql_tokens,
proxy.statements)."""

from __future__ import annotations


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
