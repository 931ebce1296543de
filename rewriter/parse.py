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
        raise Rejected(
            _syntax_message(error), sqlstate="42601", hint="check the query's syntax"
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


def _syntax_message(error: ParseError | TokenError) -> str:
    """PostgreSQL's words where sqlglot's name its own classes ("Required keyword:
    'expression' missing for <class 'sqlglot.expressions.core.GT'>")."""
    found = error.errors[0] if isinstance(error, ParseError) and error.errors else None
    text = str(error).splitlines()[0] if str(error) else ""
    if found is None or "<class" not in str(found.get("description", "")):
        return f"syntax error: {text}" if text else "syntax error"
    near = str(found.get("highlight") or "").strip()
    where = f"line {found.get('line')}, column {found.get('col')}"
    return f'syntax error at or near "{near}" ({where})' if near else f"syntax error ({where})"


#: The token positions sqlglot's parser records in a node's meta: unused by the rewriter
#: and by SQL generation, but deep-copied with every copy of the node (dicts are copied by
#: ``copy.deepcopy``, the larger part of a parsed tree's copy time).
_POSITIONS = ("line", "col", "start", "end")


def _drop_positions(node: exp.Expr, meta: dict[str, object]) -> None:
    for key in _POSITIONS:
        meta.pop(key, None)
    if not meta:
        node._meta = None  # other meta (sqlglot's own flags) is kept as it is
