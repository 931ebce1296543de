"""The order of text in post-processing: PostgreSQL's collation, as a DuckDB collation.

PostgreSQL orders and compares text (ORDER BY, ``<``, ``min``/``max``, ``greatest``) under
a collation: a column's, else the database's default. Post-processing runs in DuckDB over
the released rows (proxy.postprocess), whose own order is bytes. So when dpproxy starts
on PostgreSQL it reads the collation the exposed text columns sort under (pg_database, or
pg_collation when every exposed text column declares one other collation) and maps it to
one of DuckDB's ICU collations (``pragma_collations()``), which proxy.collated_runs puts
on the post-processing connection:

- "C", "POSIX", "C.UTF-8" (libc and the builtin provider), "ucs_basic", and the builtin
  provider's other locales order code points, that is UTF-8 bytes: DuckDB's own order;
- an ICU locale (``en-US``, ``de``, ``und``, ``zh-Hans-CN``) maps to the ICU collation of
  its language and region (``en_us``), else of its language (``en-GB``: ``en``, as ICU
  itself falls back), ``und`` (ICU's root order) to ``en``, which has no tailoring;
- a libc locale (``en_US.UTF-8``, ``de_DE.utf8``, ``sv_SE.UTF-8@euro``) maps the same
  way: glibc's order of letters and digits is ICU's, but glibc ignores spaces and
  punctuation at first (ICU's "alternate shifted", which DuckDB's collations lack): see
  docs/sql.md for the measured differences.

Anything else cannot be mapped: a locale with ICU keywords (``en-u-kn``) or custom rules,
a nondeterministic collation, a script other than Chinese's, a language DuckDB has no
collation for, a collation whose columns are mixed with the default's. Then text keeps
byte order in post-processing and dpproxy logs a warning once at start.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import cache

import duckdb

from proxy.backends import Schema, column_type
from proxy.backends.pg_collation import BUILTIN, DEFAULT, ICU, LIBC, PgCollation
from proxy.backends.postgres import PostgresBackend
from rewriter import ColumnType
from rewriter.policy import TablePolicy


@dataclass(frozen=True)
class TextOrder:
    """How post-processing orders text: under a DuckDB collation, or by bytes (None)."""

    collation: str | None
    #: For the log: what PostgreSQL orders by, and what post-processing does.
    note: str
    #: Set when PostgreSQL's order cannot be reproduced (logged as a warning at start).
    warning: str | None = None


BYTES = TextOrder(None, "post-processing orders text by bytes, as DuckDB does")

#: Byte-wise (code point) orders: libc's C and POSIX, C.UTF-8 in its spellings.
_BYTEWISE_LIBC = re.compile(r"(?i)(c|posix|c\.utf-?8)")
#: A libc locale: language, territory, codeset, modifier (``sv_SE.UTF-8@euro``).
_LIBC_LOCALE = re.compile(
    r"(?P<language>[a-z]{2,3})(?:_(?P<region>[a-z]{2}|\d{3}))?"
    r"(?:\.[a-z0-9-]+)?(?:@(?P<modifier>[a-z]+))?",
    re.IGNORECASE,
)
#: An ICU locale without keywords: language, script, region (``zh-Hans-CN``, ``en_US``).
_ICU_LOCALE = re.compile(
    r"(?P<language>[a-z]{2,3})(?:[-_](?P<script>[a-z]{4}))?(?:[-_](?P<region>[a-z]{2}|\d{3}))?",
    re.IGNORECASE,
)
#: ICU's root order (``und``, as PostgreSQL names it): DuckDB's ``en`` has no tailoring.
_ROOT = frozenset({"", "und", "root"})
_ROOT_COLLATION = "en"


@cache
def duckdb_collations() -> frozenset[str]:
    """The collations of DuckDB's ICU extension (built into the Python package)."""
    with duckdb.connect(":memory:", config={"enable_external_access": False}) as connection:
        rows = connection.execute("SELECT collname FROM pragma_collations()").fetchall()
    return frozenset(str(row[0]) for row in rows)


def text_order(collation: PgCollation, available: Collection[str]) -> TextOrder:
    """The order of ``collation`` in post-processing; ``available``: DuckDB's collations."""
    if collation.provider == BUILTIN or (
        collation.provider == LIBC and _BYTEWISE_LIBC.fullmatch(collation.locale)
    ):
        return TextOrder(None, f"PostgreSQL orders text under {collation.described}: by bytes")
    mapped = _mapped(collation, available)
    if mapped is None:
        return _unmapped(collation, "")
    if isinstance(mapped, _Refused):
        return _unmapped(collation, mapped.why)
    return TextOrder(
        mapped,
        f"PostgreSQL orders text under {collation.described}: post-processing orders it "
        f"under DuckDB's ICU collation {mapped}",
    )


@dataclass(frozen=True)
class _Refused:
    why: str


def _mapped(collation: PgCollation, available: Collection[str]) -> str | _Refused | None:
    if not collation.deterministic:
        return _Refused(" (a nondeterministic collation, whose equal texts have no order)")
    if collation.provider == ICU:
        if collation.rules:
            return _Refused(" (custom ICU rules)")
        if collation.locale.lower() in _ROOT:
            return _ROOT_COLLATION if _ROOT_COLLATION in available else None
        found = _ICU_LOCALE.fullmatch(collation.locale)
        if found is None:
            return _Refused(" (ICU keywords or variants)")
        language, script, region = found.group("language", "script", "region")
        if script is not None and language.lower() != "zh":
            return _Refused(f" (the {script} script)")
        if script is not None and region is None:
            return None
        return _language_region(language, region, available)
    if collation.provider == LIBC:
        found = _LIBC_LOCALE.fullmatch(collation.locale)
        if found is None:
            return None
        language, region, modifier = found.group("language", "region", "modifier")
        if modifier is not None and modifier.lower() != "euro":  # @euro: the currency only
            return _Refused(f" (the @{modifier} variant)")
        return _language_region(language, region, available)
    return None


def _language_region(language: str, region: str | None, available: Collection[str]) -> str | None:
    """DuckDB's collation for the language and region, else the language (as ICU falls
    back to the language's order for a region without its own)."""
    if region is not None and f"{language}_{region}".lower() in available:
        return f"{language}_{region}".lower()
    return language.lower() if language.lower() in available else None


def _unmapped(collation: PgCollation, why: str) -> TextOrder:
    return TextOrder(
        None,
        "post-processing orders text by bytes",
        f"PostgreSQL orders text under {collation.described}{why}, which DuckDB's "
        "collations cannot reproduce: post-processing (ORDER BY, comparisons, min and max "
        'over the released values) orders text by bytes instead, as COLLATE "C" does '
        "(docs/sql.md, Text order)",
    )


async def read_text_order(
    backend: object, declared: Schema, policies: Mapping[str, TablePolicy]
) -> TextOrder:
    """The order of text in post-processing for ``backend``: by bytes on DuckDB (its own
    order), else PostgreSQL's collation of the configured tables' text columns: the one
    collation they all declare, else the database's default (a warning names the columns
    of another collation, which post-processing orders under the default too)."""
    if not isinstance(backend, PostgresBackend):
        return BYTES
    available = duckdb_collations()
    default = await backend.database_collation()
    columns = _text_columns(declared, policies)
    declared_collations = {collation for _, _, collation in columns}
    if len(declared_collations) == 1 and None not in declared_collations:
        name = next(iter(declared_collations))
        if name is not None:
            found = await backend.collation(name)
            if found is not None and found.provider != DEFAULT:
                return text_order(found, available)
    order = text_order(default, available)
    other = [f"{table}.{column}" for table, column, collation in columns if collation is not None]
    if not other or order.warning is not None:
        return order
    shown = ", ".join(other[:5]) + (f" and {len(other) - 5} more" if len(other) > 5 else "")
    return TextOrder(
        order.collation,
        order.note,
        f"the text columns {shown} declare a collation other than the database's default, "
        f"which PostgreSQL orders them under; post-processing orders all text under "
        f"{default.described} (docs/sql.md, Text order)",
    )


def _text_columns(
    declared: Schema, policies: Mapping[str, TablePolicy]
) -> list[tuple[str, str, str | None]]:
    """(table, column, declared collation or None) of the configured tables' text
    columns (all their columns are visible)."""
    configured = {name.lower() for name in policies}
    return [
        (table, column, found.collation)
        for table, columns in declared.items()
        if table.lower() in configured
        for column, found in columns.items()
        if column_type(found.name) is ColumnType.TEXT
    ]
