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
_RESPELLED_WORDS = re.compile(
    r"\binterval\b|\b(?:now|date_part|to_char)\s*\("
    r"|\b(?:date|time|timetz|timestamp|timestamptz|zone)\s*'[^']*'\s*::",
    re.IGNORECASE,
)
#: Functions sqlglot reads as its own (date_part as EXTRACT, to_char as strftime with a
#: format of its making): read as calls of PostgreSQL's, which the translation computes.
_PG_FUNCTIONS = frozenset({"now", "date_part", "to_char"})
#: The types of a typed constant (TIMESTAMPTZ '...') that sqlglot reads wrongly before
#: ::, as a cast of the cast (TIMESTAMPTZ ('...'::text)).
_TYPED_CONSTANTS = (
    ("timestamp", "with", "time", "zone"),
    ("timestamp", "without", "time", "zone"),
    ("time", "with", "time", "zone"),
    ("time", "without", "time", "zone"),
    ("timestamptz",),
    ("timestamp",),
    ("timetz",),
    ("time",),
    ("date",),
)
# Reserved words PostgreSQL accepts as column labels after AS and as column names after a
# dot (Metabase writes "... AS select", "t.select"); sqlglot needs them quoted.
_KEYWORD_LABELS = frozenset(
    {"select", "insert", "update", "delete", "table", "schema", "role", "default", "user"}
)


def respelled(sql: str) -> str:
    """``sql`` with what sqlglot would read otherwise than PostgreSQL spelt as it reads it:
    INTERVAL '-1 day 02:00' as CAST('-1 day 02:00' AS INTERVAL) (sqlglot keeps the first
    number and unit of an interval's text and drops what follows: INTERVAL '-1' DAY),
    now() as pg_catalog.now() (sqlglot reads it as CURRENT_TIMESTAMP, whose column
    PostgreSQL calls current_timestamp, not now), date_part() and to_char() as
    pg_catalog's (_PG_FUNCTIONS), and TIMESTAMPTZ '...'::text as
    CAST('...' AS TIMESTAMPTZ)::text (sqlglot casts the text first)."""
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
            and token.text.lower() in _PG_FUNCTIONS
            and (index == 0 or tokens[index - 1].token_type != TokenType.DOT)
            and following[:1]
            and following[0].token_type == TokenType.L_PAREN
            and (
                token.text.lower() != "now"
                or following[1:2]
                and following[1].token_type == TokenType.R_PAREN
            )
        ):
            pieces.append(sql[position : token.start])
            pieces.append(f"{PG_CATALOG}.{token.text}")
            position = token.end + 1
        else:
            words = _typed_constant(sql, tokens, index)
            if words:
                string = tokens[index + words]
                pieces.append(sql[position : token.start])
                type_name = " ".join(t.text for t in tokens[index : index + words])
                pieces.append(f"CAST({sql[string.start : string.end + 1]} AS {type_name})")
                position = string.end + 1
    pieces.append(sql[position:])
    return "".join(pieces)


def _typed_constant(sql: str, tokens: Sequence[Token], index: int) -> int:
    """The number of words of the type of a typed constant followed by :: that starts at
    ``index`` (TIMESTAMP WITH TIME ZONE '...'::text: 4), else 0."""
    if index > 0 and tokens[index - 1].token_type in (TokenType.DCOLON, TokenType.DOT):
        return 0
    for words in _TYPED_CONSTANTS:
        end = index + len(words)
        if (
            end + 1 < len(tokens)
            and tuple(t.text.lower() for t in tokens[index:end]) == words
            and _plain_string(sql, tokens[end : end + 1])
            and tokens[end + 1].token_type == TokenType.DCOLON
        ):
            return len(words)
    return 0


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
