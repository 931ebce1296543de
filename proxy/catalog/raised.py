"""PostgreSQL's errors raised by dpproxy's own code in a catalog query: by the translation
(a constant it computes: ``SELECT 1.0/0``) and inside the catalog engine, by its macros
(DuckDB's error()) and Python functions, whose text reaches the server in DuckDB's
message. There, the error is marked with its SQLSTATE, and read back by
proxy.catalog.engine_errors into the error PostgreSQL sends.
"""

from __future__ import annotations

import re

_MARKED = re.compile(
    r"\[pg (?P<state>[0-9A-Z]{5})\] (?P<message>.*?)(?: \[hint\] (?P<hint>.*?))? \[/pg\]"
)


class RaisedError(Exception):
    """An error PostgreSQL would raise: its SQLSTATE and message."""

    def __init__(self, sqlstate: str, message: str) -> None:
        super().__init__(marked(sqlstate, message))
        self.sqlstate = sqlstate
        self.message = message

    def __reduce__(self) -> tuple[type[RaisedError], tuple[str, str]]:
        return (RaisedError, (self.sqlstate, self.message))


def marked(sqlstate: str, message: str, hint: str | None = None) -> str:
    """The text of an error raised inside DuckDB, which ``unmarked`` reads back (with a
    hint: what to write instead, for a refusal)."""
    if hint is None:
        return f"[pg {sqlstate}] {message} [/pg]"
    return f"[pg {sqlstate}] {message} [hint] {hint} [/pg]"


def unmarked(text: str) -> tuple[str, str, str | None] | None:
    """(SQLSTATE, message, hint) of the first marked error in DuckDB's message ``text``."""
    found = _MARKED.search(text)
    return None if found is None else (found["state"], found["message"], found["hint"])
