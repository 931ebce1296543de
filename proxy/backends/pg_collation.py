"""A PostgreSQL collation as its catalog describes it: the database's default collation
(pg_database) or a named one (pg_collation), read once when dpproxy starts, for the order
of text in post-processing (proxy.text_order).

The catalog's columns differ by version, so each row is read whole, as JSON
(``to_jsonb``), and the columns the version has are used:

- pg_database: ``datcollate`` (libc, every version); from PostgreSQL 15
  ``datlocprovider`` ('c' libc, 'i' ICU; 17: 'b' builtin) and the ICU locale in
  ``daticulocale`` (15, 16) or ``datlocale`` (17 on); ``daticurules`` from 16;
- pg_collation: ``collprovider`` ('d' the database default, 'c', 'i', 'b'),
  ``collcollate`` (libc; an ICU collation's locale before 15), ``colliculocale`` (15,
  16) or ``colllocale`` (17 on), ``collicurules`` (16 on), ``collisdeterministic`` (12 on).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

LIBC = "c"
ICU = "i"
BUILTIN = "b"
#: pg_collation's provider of the "default" collation: the database's own.
DEFAULT = "d"

#: The database's default collation, one JSON object.
DATABASE_QUERY = (
    "SELECT pg_catalog.to_jsonb(d) FROM pg_catalog.pg_database d "
    "WHERE d.datname = pg_catalog.current_database()"
)
#: A collation as ``proxy.backends.group_declared`` names it (twice): one of pg_catalog by
#: its name alone ("C", "en_US.utf8"), another as ``schema.name``; of the database's
#: encoding or of any (-1); one JSON object.
COLLATION_QUERY = (
    "SELECT pg_catalog.to_jsonb(c) FROM pg_catalog.pg_collation c "
    "JOIN pg_catalog.pg_namespace n ON n.oid = c.collnamespace "
    "WHERE ((n.nspname = 'pg_catalog' AND c.collname = %s) "
    "OR n.nspname || '.' || c.collname = %s) "
    "AND c.collencoding IN (-1, (SELECT d.encoding FROM pg_catalog.pg_database d "
    "WHERE d.datname = pg_catalog.current_database())) "
    "ORDER BY n.nspname = 'pg_catalog' DESC, c.collencoding DESC LIMIT 1"
)


@dataclass(frozen=True)
class PgCollation:
    """What orders text under a collation: its provider, locale and ICU rules."""

    described: str  # for messages: 'the database\'s default collation "en_US.UTF-8"'
    provider: str  # LIBC, ICU, BUILTIN or DEFAULT
    locale: str  # libc: LC_COLLATE; ICU: the ICU locale; builtin: "C", "C.UTF-8", ...
    rules: str = ""  # PostgreSQL 16's ICU tailoring rules
    deterministic: bool = True


def database_collation(row: Mapping[str, object]) -> PgCollation:
    """The default collation of the database whose pg_database row (as JSON) is ``row``."""
    provider = _text(row.get("datlocprovider")) or LIBC
    if provider == LIBC:
        locale = _text(row.get("datcollate"))
    else:
        locale = _text(row.get("datlocale")) or _text(row.get("daticulocale"))
        if provider == ICU and not locale:  # not on any version: fail towards bytes
            provider = "unknown"
    shown = locale if provider != ICU else f"{locale} (ICU)"
    return PgCollation(
        f'the database\'s default collation "{shown}"',
        provider,
        locale,
        _text(row.get("daticurules")),
    )


def named_collation(name: str, row: Mapping[str, object]) -> PgCollation:
    """The collation called ``name`` whose pg_collation row (as JSON) is ``row``."""
    provider = _text(row.get("collprovider")) or "unknown"
    locale = _text(row.get("collcollate"))
    if provider in (ICU, BUILTIN):  # PostgreSQL 12 to 14 kept an ICU locale in collcollate
        locale = _text(row.get("colllocale")) or _text(row.get("colliculocale")) or locale
    return PgCollation(
        f'collation "{name}"',
        provider,
        locale,
        _text(row.get("collicurules")),
        row.get("collisdeterministic") is not False,
    )


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
