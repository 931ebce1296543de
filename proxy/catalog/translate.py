"""Decide whether a query is a catalog query, and translate it (PostgreSQL) into SQL for
the emulated catalog in DuckDB: the entry point, and its public API.

The translation works on sqlglot's syntax tree; values from the session are put in as
literals of the tree, never pasted into text. Its steps live in modules of their own:
classify (is it a catalog query; parsing, with respell), rewrite (the tree, through
tables, casts, operators, arithmetic, function_calls, local_times, settings, and
zoned_rewrites for times in the session's TimeZone), output_names (the columns' names as
PostgreSQL gives them) and cache_keys (what translations are remembered by).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from proxy.catalog.cache_keys import (
    PARSE_CACHE_SIZE,
    TranslationKey,
    cacheable,
    translation_key,
)
from proxy.catalog.classify import catalog_tree
from proxy.catalog.output_names import output_names, set_output_names
from proxy.catalog.output_types import jsonb_outputs
from proxy.catalog.recent import Recent
from proxy.catalog.refusal import CatalogRefused
from proxy.catalog.rewrite import rewritten
from proxy.catalog.session_values import SessionValues

__all__ = [
    "CatalogRefused",
    "SessionValues",
    "Translation",
    "cacheable",
    "catalog_tree",
    "remembered_translation",
    "translate",
    "translation_key",
]


@dataclass(frozen=True)
class Translation:
    sql: str  # DuckDB SQL over the emulated catalog
    column_names: tuple[str, ...] | None  # PostgreSQL's output names; None: unknown (*)
    jsonb_columns: frozenset[int] = frozenset()  # positions of jsonb columns (output_types)


def translate(
    sql: str, session: SessionValues, parameters: Sequence[str | None] = ()
) -> Translation | None:
    """The DuckDB translation of ``sql`` if it is a catalog query, else None.

    ``parameters`` are the text values of $1, $2, ... (extended protocol). Raises
    CatalogRefused for a catalog query dpproxy cannot answer.
    """
    tree = catalog_tree(sql, session.user)
    if tree is None:
        return None
    try:
        names = output_names(tree)
        jsonb = jsonb_outputs(tree)
        translated = rewritten(tree.copy(), session, parameters)
        if names is not None:
            set_output_names(translated, names)
        return Translation(translated.sql(dialect="duckdb"), names, jsonb)
    except RecursionError:
        # The syntax tree is deeper than Python's recursion allows (thousands of terms
        # nested, e.g. 1+1+...+1): refused as PostgreSQL refuses too deep a statement.
        raise CatalogRefused(
            "the statement is nested too deeply", hint="simplify the query", sqlstate="54001"
        ) from None


#: The translations of recent short catalog statements, shared by the translating threads.
_TRANSLATIONS: Recent[TranslationKey, Translation | None] = Recent(PARSE_CACHE_SIZE)


def remembered_translation(
    sql: str, session: SessionValues, parameters: Sequence[str | None] = ()
) -> Translation | None:
    """As translate(), remembering the translations of short statements (a translation is
    a pure function of the statement, the session values and the parameters)."""
    if not cacheable(sql, parameters, session.cursors) or catalog_tree(sql, session.user) is None:
        return translate(sql, session, parameters)
    key = translation_key(sql, session, parameters)
    found, translation = _TRANSLATIONS.get(key)
    if not found:
        translation = translate(sql, session, parameters)
        _TRANSLATIONS.put(key, translation)
    return translation
