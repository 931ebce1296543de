"""What a catalog query's translation takes from the session.

Session-dependent functions (current_user, version(), current_setting(), now() in the
session's TimeZone) and the session relations (pg_settings, pg_roles...) are answered
from these values, put into the translated query as literals of its syntax tree, never
pasted into text. They are also part of what a translation is remembered by
(proxy.catalog.cache_keys), so nothing else of the session may change a translation.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


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
