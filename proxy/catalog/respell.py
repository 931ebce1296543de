"""Statements respelled, before sqlglot parses them, where sqlglot would read PostgreSQL's
text otherwise than PostgreSQL does, or not at all.

Done on tokens of the text rather than on the syntax tree because by the time there is a
tree the meaning is lost (sqlglot keeps only the first number and unit of an interval's
text) or there is no tree (a reserved word as a column label).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import sqlglot
from sqlglot import Token, TokenType
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import SqlglotError

from proxy.catalog.relations import PG_CATALOG

_INTERVAL_UNITS = Postgres.VALID_INTERVAL_UNITS
_RESPELLED_WORDS = re.compile(r"\binterval\b|\bnow\s*\(", re.IGNORECASE)
# Reserved words PostgreSQL accepts as column labels after AS and as column names after a
# dot (Metabase writes "... AS select", "t.select"); sqlglot needs them quoted.
_KEYWORD_LABELS = frozenset(
    {"select", "insert", "update", "delete", "table", "schema", "role", "default", "user"}
)


def respelled(sql: str) -> str:
    """``sql`` with what sqlglot would read otherwise than PostgreSQL spelt as it reads it:
    INTERVAL '-1 day 02:00' as CAST('-1 day 02:00' AS INTERVAL) (sqlglot keeps the first
    number and unit of an interval's text and drops what follows: INTERVAL '-1' DAY), and
    now() as pg_catalog.now() (sqlglot reads it as CURRENT_TIMESTAMP, whose column
    PostgreSQL calls current_timestamp, not now)."""
    if _RESPELLED_WORDS.search(sql) is None:
        return sql
    try:
        tokens = sqlglot.tokenize(sql, read="postgres")
    except SqlglotError:
        return sql
    pieces: list[str] = []
    position = 0
    for index, token in enumerate(tokens):
        following = tokens[index + 1 : index + 3]
        if token.token_type == TokenType.INTERVAL and _plain_string(sql, following[:1]):
            string = following[0]
            after = tokens[index + 2] if index + 2 < len(tokens) else None
            if after is not None and (
                after.token_type == TokenType.VAR
                or after.text.upper() in _INTERVAL_UNITS
                or after.text.upper() == "TO"
            ):
                continue  # INTERVAL '1' DAY: sqlglot reads it as PostgreSQL does
            pieces.append(sql[position : token.start])
            pieces.append(f"CAST({sql[string.start : string.end + 1]} AS INTERVAL)")
            position = string.end + 1
        elif (
            token.token_type == TokenType.VAR
            and token.text.lower() == "now"
            and (index == 0 or tokens[index - 1].token_type != TokenType.DOT)
            and [t.token_type for t in following] == [TokenType.L_PAREN, TokenType.R_PAREN]
        ):
            pieces.append(sql[position : token.start])
            pieces.append(f"{PG_CATALOG}.now")
            position = token.end + 1
    pieces.append(sql[position:])
    return "".join(pieces)


def _plain_string(sql: str, tokens: Sequence[Token]) -> bool:
    """Whether ``tokens`` is one '...' literal (not E'...', $$...$$ or U&'...')."""
    if len(tokens) != 1 or tokens[0].token_type != TokenType.STRING:
        return False
    start, end = tokens[0].start, tokens[0].end
    return sql[start : start + 1] == "'" and sql[end : end + 1] == "'"


def quote_keyword_labels(sql: str) -> str:
    """``sql`` with the reserved words used as column labels or names quoted (``... AS
    select`` as ``... AS "select"``): tried when sqlglot cannot parse the statement."""
    try:
        tokens = sqlglot.tokenize(sql, read="postgres")
    except SqlglotError:
        return sql
    pieces: list[str] = []
    position = 0
    for before, token in zip(tokens, tokens[1:], strict=False):
        if (
            before.token_type in (TokenType.ALIAS, TokenType.DOT)
            and token.token_type not in (TokenType.VAR, TokenType.IDENTIFIER, TokenType.STRING)
            and token.text.lower() in _KEYWORD_LABELS
            and sql[token.start : token.end + 1].lower() == token.text.lower()
        ):
            pieces.append(sql[position : token.start])
            pieces.append(f'"{token.text.lower()}"')
            position = token.end + 1
    pieces.append(sql[position:])
    return "".join(pieces)
