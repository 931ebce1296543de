"""Where a PostgreSQL state store lives (:class:`PostgresState`) and the checks of its
connection string and schema name, apart from ``accountant.postgres`` (the connections),
which imports psycopg: reading a configuration, and opening a SQLite state store, need not
import it. psycopg is imported here only to read a connection string, when one is given.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from typing import Any

DEFAULT_SCHEMA = "dpproxy"
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_$]{0,62}")


@dataclass(frozen=True)
class PostgresState:
    """Where a PostgreSQL state store lives: a connection string and a schema name."""

    dsn: str = field(repr=False)
    schema: str = DEFAULT_SCHEMA

    def __post_init__(self) -> None:
        check_dsn(self.dsn)
        check_schema_name(self.schema)

    def __str__(self) -> str:
        """The server, database and schema, without the password (for messages)."""
        parts = _conninfo(self.dsn)
        user = f"{parts['user']}@" if parts.get("user") else ""
        port = f":{parts['port']}" if parts.get("port") else ""
        return (
            f"postgresql://{user}{parts.get('host', '')}{port}/{parts.get('dbname', '')}"
            f" (schema {self.schema})"
        )

    def __repr__(self) -> str:
        return f"PostgresState({str(self)!r})"

    @property
    def lock_key(self) -> int:
        """The second key of the write lock: the schema's (int4) checksum."""
        return zlib.crc32(self.schema.encode("utf-8")) - 2**31


def check_dsn(dsn: str) -> None:
    """Refuse a connection string that is not a ``postgresql://`` URL libpq can read."""
    if not dsn.startswith(("postgresql://", "postgres://")):
        raise ValueError(
            "must be a PostgreSQL URL like postgresql://dpproxy@db.internal:5432/ledger"
        )
    import psycopg  # noqa: PLC0415 - a tenth of a second, for PostgreSQL state stores only

    try:
        _conninfo(dsn)
    except psycopg.ProgrammingError as exc:
        raise ValueError(f"is not a valid PostgreSQL URL ({exc})") from None


def check_schema_name(schema: str) -> None:
    if not _SCHEMA_NAME.fullmatch(schema) or schema.startswith("pg_"):
        raise ValueError(
            f"{schema!r} is not a usable schema name: use lower-case letters, digits and _ "
            "(at most 63, not starting with a digit or pg_), e.g. dpproxy"
        )


def _conninfo(dsn: str) -> dict[str, Any]:
    from psycopg.conninfo import conninfo_to_dict  # noqa: PLC0415 - see check_dsn

    return conninfo_to_dict(dsn)
