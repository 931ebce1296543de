"""Post-processing under the database's collation (proxy.text_order), in a DuckDB of its own.

``SET default_collation`` makes DuckDB order and compare every text under an ICU collation:
ORDER BY (windows and ordered aggregates too), ``<`` and the other comparisons, BETWEEN,
``min``/``max``, ``arg_min``/``arg_max``. ``greatest`` and ``least`` ignore it: over the
collated connection they are written ``list_max([…])``/``list_min([…])``, which honour it
and give the same value and type for every other type (NULLs skipped, NaN the largest).

PostgreSQL's collations are deterministic: texts that the collation finds equal but whose
bytes differ (``'a'`` and ``'a\\u200b'``, a zero-width space being ignored; ``'é'``
composed and decomposed; ``'1'`` and the Arabic-Indic ``'١'``) are ordered by their bytes,
and ``=``, GROUP BY and DISTINCT keep them apart. DuckDB's collations find them equal:
GROUP BY, DISTINCT, UNION and ``=`` would merge them. So a post-query runs under the
collation only when no two of its texts can be equal so: every released text and every
quoted text of the query is in Unicode NFC and does not start with a combining mark, no
two of them are equal under the collation, and no two of the characters they are made of
(with their upper- and lower-case forms) are, nor any of them with the empty text (an
ignored character). Otherwise that post-query orders text by bytes, as without a
collation (docs/sql.md, Text order).
"""

from __future__ import annotations

import logging
import re
import string
import unicodedata
from collections.abc import Iterable, Sequence
from functools import lru_cache

import duckdb
import sqlglot
from sqlglot import exp

logger = logging.getLogger("dpproxy.postprocess")

#: A quoted text of DuckDB SQL as sqlglot writes it ('' for a quote).
_QUOTED = re.compile(r"'((?:[^']|'')*)'")
_GREATEST_OR_LEAST = re.compile(r"\b(?:GREATEST|LEAST)\s*\(", re.IGNORECASE)
#: Characters a post-query may make out of numbers or dates (casts to text).
_PRINTABLE = frozenset(string.printable)


class CollatedRuns:
    """A DuckDB connection whose text order is ``collation``'s (None: no connection)."""

    def __init__(self, collation: str | None) -> None:
        self.collation = collation
        self._connection: duckdb.DuckDBPyConnection | None = None
        if collation is not None:
            self._connection = duckdb.connect(
                ":memory:",
                config={"enable_external_access": False, "default_collation": collation},
            )

    def run_on(
        self, rows: Sequence[Sequence[object]], sql: str
    ) -> tuple[duckdb.DuckDBPyConnection, str] | None:
        """The collated connection and ``sql`` as it runs there (collated_sql), if the
        post-query ``sql`` over ``rows`` may run on it (see the module's docstring); else
        None: it runs in byte order."""
        if self._connection is None:
            return None
        collated = collated_sql(sql)
        if collated is None:
            return None
        texts = {value for row in rows for value in row if isinstance(value, str)}
        texts.update(quoted.replace("''", "'") for quoted in _QUOTED.findall(sql))
        if not all(_composed(text) for text in texts) or not _composed(sql):
            logger.debug("a text is not in NFC: this post-query orders text by bytes")
            return None
        if not self._distinct(texts, _characters(texts | {sql})):
            logger.debug("two texts are equal under %s: this one orders by bytes", self.collation)
            return None
        return self._connection, collated

    def _distinct(self, texts: set[str], characters: set[str]) -> bool:
        """Whether no two ``texts`` are equal under the collation, nor two ``characters``,
        nor a character with the empty text."""
        if self._connection is None:
            return False
        cursor = self._connection.cursor()
        try:
            row = cursor.execute(
                "SELECT (SELECT count(DISTINCT v) FROM unnest(?::VARCHAR[]) AS t(v)), "
                "(SELECT count(DISTINCT v) FROM unnest(?::VARCHAR[]) AS t(v)), "
                "(SELECT count(*) FROM unnest(?::VARCHAR[]) AS t(v) WHERE v = '')",
                [sorted(texts), sorted(characters), sorted(characters)],
            ).fetchone()
        except (duckdb.Error, UnicodeError) as error:  # never seen: then byte order
            logger.warning("texts not compared under %s: %s", self.collation, error)
            return False
        finally:
            cursor.close()
        return row == (len(texts), len(characters), 0)


def _composed(text: str) -> bool:
    """In NFC, and not starting with a combining mark (which a concatenation would put
    after another text's last character)."""
    return unicodedata.is_normalized("NFC", text) and not (text and unicodedata.combining(text[0]))


def _characters(texts: Iterable[str]) -> set[str]:
    """The characters of ``texts``, with their upper- and lower-case forms and the
    printable ASCII ones."""
    found = set(_PRINTABLE)
    for text in texts:
        found.update(text)
    for character in list(found):
        found.update(character.upper())
        found.update(character.lower())
    return found


@lru_cache(maxsize=1024)
def collated_sql(sql: str) -> str | None:
    """``sql`` with greatest and least written as list_max and list_min (which DuckDB's
    default collation orders), unchanged without them; None if sqlglot cannot read it
    (never seen: the query then orders text by bytes)."""
    if _GREATEST_OR_LEAST.search(sql) is None:
        return sql

    def replace(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Greatest | exp.Least):
            name = "list_max" if isinstance(node, exp.Greatest) else "list_min"
            values = exp.Array(expressions=[node.this, *node.expressions])
            return exp.Anonymous(this=name, expressions=[values])
        return node

    try:
        tree = sqlglot.parse_one(sql, read="duckdb")
    except sqlglot.errors.ParseError as error:
        logger.warning("post-processing SQL not read for its collation: %s", error)
        return None
    return tree.transform(replace).sql(dialect="duckdb")
