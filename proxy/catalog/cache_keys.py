"""What the translation of a catalog query is remembered by, and which are remembered.

Most statements a client sends repeat (psql's \\d, JDBC's metadata queries), so their
classification and translation are remembered. A translation is a pure function of the
statement, the session values and the values of $1, $2...: that is its key. Only short
statements are remembered, so that the caches stay small whatever analysts send.
"""

from __future__ import annotations

from collections.abc import Sequence

from proxy.catalog.session_values import NO_CURSORS, SessionCursors, SessionValues
from proxy.pg_settings import parameters_key

PARSE_CACHE_SIZE = 1024  # statements whose classification (catalog query or not) is kept
CACHED_LENGTH = 4096  # longer statements are classified every time
#: The most text (names and statements) of a session's open cursors with which its
#: statements' translations are remembered: a translation of pg_cursors holds all of it,
#: and a session may hold 64 cursors of long statements.
CACHED_CURSORS_LENGTH = 16 * 1024


def cacheable(
    sql: str, parameters: Sequence[str | None], cursors: SessionCursors = NO_CURSORS
) -> bool:
    """Whether a statement's translation is remembered: a short statement, with short
    values of $1, $2... (both are kept in the cache's key), from a session whose open
    cursors are short (a translation of pg_cursors holds them)."""
    values = sum(len(value) for value in parameters if value is not None)
    return len(sql) + values <= CACHED_LENGTH and cursors.length <= CACHED_CURSORS_LENGTH


#: A statement's translation is a pure function of these: the statement, the session
#: values (the settings and the open cursors by their keys, never by themselves: they may
#: be many and long) and the values of $1, $2...
TranslationKey = tuple[str, str, str, str, str, str, tuple[str | None, ...]]


def translation_key(
    sql: str, session: SessionValues, parameters: Sequence[str | None]
) -> TranslationKey:
    settings_key = session.settings_key or parameters_key(session.settings)
    return (
        sql,
        session.user,
        session.database,
        session.version,
        settings_key,
        session.cursors.key,
        tuple(parameters),
    )
