"""Arrays of PostgreSQL's object identifier types written as PostgreSQL writes them
(``$1::oid[]``, ``x::regtype[]``), which sqlglot cannot read: it takes ``oid`` for a
column and ``[]`` for a subscript without an index. asyncpg's type lookup sends
``ti.oid = any($1::oid[])``. Respelt ``pg_catalog.oid[]`` (the same type to PostgreSQL),
which sqlglot reads as an array of a named type and writes back the same way.
"""

from __future__ import annotations

import sqlglot
from sqlglot import TokenType
from sqlglot.errors import SqlglotError

from proxy.catalog.relations import PG_CATALOG


def respell_oid_arrays(sql: str) -> str:
    """``sql`` with each ``oid[]``, ``regtype[]``, ``regclass[]``… (an object identifier
    type's name, not after a dot, then ``[`` and ``]`` at once) as ``pg_catalog.oid[]``.
    Anything else, and text sqlglot cannot tokenize, is returned as it is."""
    if "[" not in sql:
        return sql
    try:
        tokens = sqlglot.tokenize(sql, read="postgres")
    except SqlglotError:
        return sql
    pieces: list[str] = []
    position = 0
    for index, token in enumerate(tokens[:-2]):
        opening, closing = tokens[index + 1], tokens[index + 2]
        if (
            token.token_type == TokenType.OBJECT_IDENTIFIER
            and (index == 0 or tokens[index - 1].token_type != TokenType.DOT)
            and opening.token_type == TokenType.L_BRACKET
            and closing.token_type == TokenType.R_BRACKET
            and sql[token.start : token.end + 1].lower() == token.text.lower()
        ):
            pieces.append(sql[position : token.start])
            pieces.append(f"{PG_CATALOG}.{token.text.lower()}")
            position = token.end + 1
    pieces.append(sql[position:])
    return "".join(pieces)
