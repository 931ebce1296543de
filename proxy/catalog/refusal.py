"""The refusal of a catalog query dpproxy recognizes but cannot answer.

Its own module because every step of the translation (classifying, rewriting functions,
casts, operators, relations) may refuse, and the responder turns the refusal into the
error PostgreSQL would send: the message, a hint of what to write instead, a SQLSTATE.
"""

from __future__ import annotations


class CatalogRefused(Exception):
    """A catalog query dpproxy cannot answer; the message says what instead."""

    def __init__(self, message: str, hint: str | None = None, sqlstate: str = "0A000") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.sqlstate = sqlstate  # feature_not_supported, unless said otherwise
