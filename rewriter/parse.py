"""Parse one SQL statement with sqlglot (PostgreSQL dialect: what clients speak)."""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from rewriter.errors import Rejected

MAX_SQL_LENGTH = 100_000


def parse_statement(sql: str) -> exp.Expr:
    """Parse exactly one statement, or raise Rejected with SQLSTATE 42601 / 0A000 / 54000."""
    if len(sql) > MAX_SQL_LENGTH:
        raise Rejected(
            f"query text is {len(sql)} characters long; dpproxy accepts at most {MAX_SQL_LENGTH}",
            sqlstate="54000",
            hint="shorten the query",
        )
    try:
        statements = [s for s in sqlglot.parse(sql, read="postgres") if s is not None]
    except RecursionError:
        raise Rejected(
            "the statement is nested too deeply", sqlstate="54001", hint="simplify the query"
        ) from None
    except (ParseError, TokenError) as error:
        first_line = str(error).splitlines()[0] if str(error) else "syntax error"
        raise Rejected(
            f"syntax error: {first_line}", sqlstate="42601", hint="check the query's syntax"
        ) from None
    if len(statements) != 1:
        raise Rejected(
            f"expected one statement, got {len(statements)}",
            hint="send one statement per query",
        )
    statement = statements[0]
    for node in statement.walk():
        node.comments = None  # the analyst's comments never reach the database
        meta = node._meta
        if meta is not None:
            _drop_positions(node, meta)
    return statement


#: The token positions sqlglot's parser records in a node's meta: unused by the rewriter
#: and by SQL generation, but deep-copied with every copy of the node (dicts are copied by
#: ``copy.deepcopy``, the larger part of a parsed tree's copy time).
_POSITIONS = ("line", "col", "start", "end")


def _drop_positions(node: exp.Expr, meta: dict[str, object]) -> None:
    for key in _POSITIONS:
        meta.pop(key, None)
    if not meta:
        node._meta = None  # other meta (sqlglot's own flags) is kept as it is
