"""What a catalog query's translation takes from the session.

Session-dependent functions (current_user, version(), current_setting(), now() in the
session's TimeZone) and the session relations (pg_settings, pg_roles, pg_cursors...) are
answered from these values, put into the translated query as literals of its syntax tree,
never pasted into text. They are also part of what a translation is remembered by
(proxy.catalog.cache_keys), so nothing else of the session may change a translation.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property


@dataclass(frozen=True)
class OpenCursor:
    """A row of pg_cursors: one cursor open in the session (proxy.cursors)."""

    name: str
    statement: str  # the DECLARE's text, as the session received it
    is_holdable: bool
    is_binary: bool
    is_scrollable: bool
    creation_time: datetime  # with its time zone (UTC)


@dataclass(frozen=True)
class SessionCursors:
    """The cursors open in the session, in the order they were declared. The session
    makes a new one only when they change (proxy.cursors), so ``key`` is computed once
    per change, not per statement."""

    rows: tuple[OpenCursor, ...] = ()

    @cached_property
    def length(self) -> int:
        """The characters of their names and statements."""
        return sum(len(row.name) + len(row.statement) for row in self.rows)

    @cached_property
    def key(self) -> str:
        """What identifies them in cache keys: "" when there are none, else a SHA-256 of
        their rows (a fixed size, however long their statements)."""
        if not self.rows:
            return ""
        canonical = json.dumps(
            [
                (
                    row.name,
                    row.statement,
                    row.is_holdable,
                    row.is_binary,
                    row.is_scrollable,
                    row.creation_time.isoformat(),
                )
                for row in self.rows
            ],
            ensure_ascii=True,
        )
        return hashlib.sha256(canonical.encode("ascii")).hexdigest()


#: A session without open cursors.
NO_CURSORS = SessionCursors()


@dataclass(frozen=True)
class SessionValues:
    """What session-dependent functions answer."""

    user: str
    database: str
    version: str
    settings: Mapping[str, str]
    #: pg_settings.parameters_key(settings), what identifies them in cache keys; "": not
    #: given (remembered_translation computes it).
    settings_key: str = ""
    #: The rows of pg_cursors: only the asking session's own cursors.
    cursors: SessionCursors = field(default=NO_CURSORS)
