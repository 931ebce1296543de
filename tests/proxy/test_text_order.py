"""PostgreSQL's collation, read from its catalog and mapped to a DuckDB collation for the
order of text in post-processing (proxy.text_order, proxy.backends.pg_collation)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import duckdb
import psycopg
import pytest

from proxy.backends import DeclaredType
from proxy.backends.duckdb import DuckDBBackend
from proxy.backends.pg_collation import PgCollation, database_collation, named_collation
from proxy.backends.postgres import PostgresBackend
from proxy.text_order import BYTES, duckdb_collations, read_text_order, text_order
from rewriter import TablePolicy
from tests.collated_database import icu_database

AVAILABLE = duckdb_collations()


def libc(locale: str) -> PgCollation:
    return PgCollation(f'"{locale}"', "c", locale)


def icu(locale: str, rules: str = "") -> PgCollation:
    return PgCollation(f'"{locale}"', "i", locale, rules)


@pytest.mark.parametrize(
    "collation",
    [
        libc("C"),
        libc("POSIX"),
        libc("C.UTF-8"),
        libc("C.utf8"),
        libc("c.UTF8"),
        PgCollation('"C.UTF-8"', "b", "C.UTF-8"),  # PostgreSQL 17's builtin provider
        PgCollation('"C"', "b", "C"),
        PgCollation('"PG_UNICODE_FAST"', "b", "PG_UNICODE_FAST"),  # 18: code points
    ],
)
def test_byte_orders_stay_bytes(collation: PgCollation) -> None:
    order = text_order(collation, AVAILABLE)
    assert order.collation is None and order.warning is None


@pytest.mark.parametrize(
    ("collation", "mapped"),
    [
        (libc("en_US.UTF-8"), "en_us"),
        (libc("en_US.utf8"), "en_us"),
        (libc("en_US"), "en_us"),
        (libc("en_GB.UTF-8"), "en"),  # no en_gb: English's own order, as ICU falls back
        (libc("de_DE.UTF-8"), "de"),
        (libc("de_AT.UTF-8"), "de_at"),
        (libc("sv_SE.ISO-8859-1"), "sv"),
        (libc("fr_FR.UTF-8@euro"), "fr"),
        (libc("fr_CA.UTF-8"), "fr_ca"),
        (libc("nb_NO.UTF-8"), "nb_no"),
        (icu("en-US"), "en_us"),
        (icu("en_US"), "en_us"),  # ICU's own spelling (PostgreSQL 15 keeps it as given)
        (icu("en"), "en"),
        (icu("EN-us"), "en_us"),
        (icu("und"), "en"),  # ICU's root order: DuckDB's en has no tailoring
        (icu("root"), "en"),
        (icu(""), "en"),
        (icu("tr-TR"), "tr"),
        (icu("zh-Hans-CN"), "zh_cn"),
        (icu("zh-Hant-TW"), "zh_tw"),
        (icu("is"), "is"),
    ],
)
def test_locales_map_to_icu_collations(collation: PgCollation, mapped: str) -> None:
    order = text_order(collation, AVAILABLE)
    assert (order.collation, order.warning) == (mapped, None)
    assert mapped in order.note


@pytest.mark.parametrize(
    ("collation", "why"),
    [
        (icu("en-US-u-kn-true"), "ICU keywords"),  # numbers in numeric order
        (icu("en-US-u-kf-upper"), "ICU keywords"),  # upper case first
        (icu("de@collation=phonebook"), "ICU keywords"),
        (icu("en-US", rules="&a < g"), "custom ICU rules"),
        (icu("sr-Latn-RS"), "Latn script"),
        (icu("zh-Hant"), ""),
        (icu("xx-YY"), ""),  # no DuckDB collation for the language
        (libc("sr_RS.UTF-8@latin"), "@latin"),
        (libc("English_United States.1252"), ""),  # Windows
        (libc("xx_YY.UTF-8"), ""),
        (PgCollation('"ci"', "i", "und-u-ks-level2", deterministic=False), "nondeterministic"),
        (PgCollation('"x"', "unknown", "x"), ""),
    ],
)
def test_what_cannot_be_mapped_keeps_bytes_and_warns(collation: PgCollation, why: str) -> None:
    order = text_order(collation, AVAILABLE)
    assert order.collation is None
    assert order.warning is not None
    assert why in order.warning
    assert "orders text by bytes instead" in order.warning
    assert collation.described in order.warning


def test_the_database_row_of_each_version() -> None:
    # PostgreSQL 12 to 14: libc only, no provider column.
    old = database_collation({"datname": "d", "datcollate": "en_US.UTF-8"})
    assert (old.provider, old.locale) == ("c", "en_US.UTF-8")
    # 15 and 16: an ICU locale in daticulocale (16: and its rules).
    v15 = database_collation(
        {"datlocprovider": "i", "datcollate": "C.UTF-8", "daticulocale": "en-US"}
    )
    assert (v15.provider, v15.locale, v15.rules) == ("i", "en-US", "")
    v16 = database_collation(
        {"datlocprovider": "i", "datcollate": "C", "daticulocale": "de", "daticurules": "&a<b"}
    )
    assert (v16.locale, v16.rules) == ("de", "&a<b")
    # 17: datlocale, for ICU and the builtin provider.
    v17 = database_collation({"datlocprovider": "i", "datcollate": "C", "datlocale": "sv"})
    assert (v17.provider, v17.locale) == ("i", "sv")
    builtin = database_collation({"datlocprovider": "b", "datcollate": "C", "datlocale": "C"})
    assert text_order(builtin, AVAILABLE).collation is None
    libc15 = database_collation(
        {"datlocprovider": "c", "datcollate": "fr_FR.UTF-8", "daticulocale": None}
    )
    assert text_order(libc15, AVAILABLE).collation == "fr"
    # An ICU database whose locale is not where any version keeps it: bytes, and a warning.
    lost = text_order(database_collation({"datlocprovider": "i", "datcollate": "C"}), AVAILABLE)
    assert lost.collation is None and lost.warning is not None


def test_the_collation_row_of_each_version() -> None:
    old_icu = named_collation("en-x-icu", {"collprovider": "i", "collcollate": "en"})
    assert text_order(old_icu, AVAILABLE).collation == "en"  # PostgreSQL 12 to 14
    v15 = named_collation(
        "en-US-x-icu", {"collprovider": "i", "collcollate": None, "colliculocale": "en-US"}
    )
    assert text_order(v15, AVAILABLE).collation == "en_us"
    v17 = named_collation("de-x-icu", {"collprovider": "i", "colllocale": "de"})
    assert text_order(v17, AVAILABLE).collation == "de"
    c = named_collation("C", {"collprovider": "c", "collcollate": "C"})
    assert text_order(c, AVAILABLE).collation is None
    ci = named_collation(
        "ci",
        {"collprovider": "i", "colliculocale": "und-u-ks-level2", "collisdeterministic": False},
    )
    assert text_order(ci, AVAILABLE).warning is not None


def test_duckdb_orders_by_bytes(tmp_path: Path) -> None:
    path = tmp_path / "t.duckdb"
    duckdb.connect(str(path)).close()
    backend = DuckDBBackend(path, timeout_seconds=5)
    try:
        assert asyncio.run(read_text_order(backend, {}, {})) is BYTES
    finally:
        asyncio.run(backend.close())


POLICIES = {"t": TablePolicy(privacy_unit="id", max_rows_per_unit=1)}


def _read(dsn: str, declared: dict[str, dict[str, DeclaredType]]) -> tuple[str | None, str | None]:
    async def read() -> tuple[str | None, str | None]:
        backend = PostgresBackend(dsn, pool_size=1, timeout_seconds=5)
        try:
            order = await read_text_order(backend, declared, POLICIES)
        finally:
            await backend.close()
        return order.collation, order.warning

    return asyncio.run(read())


def test_postgres_databases_and_columns(pg_dsn: str) -> None:
    text = DeclaredType("text")
    # The test server's database: C.UTF-8, byte order.
    assert _read(pg_dsn, {"t": {"k": text}}) == (None, None)
    with icu_database(pg_dsn) as dsn:
        assert _read(dsn, {"t": {"k": text, "id": DeclaredType("bigint")}}) == ("en_us", None)
        # Every exposed text column declares "C": PostgreSQL orders them by bytes.
        c_text = DeclaredType("text", collation="C")
        assert _read(dsn, {"t": {"k": c_text, "j": c_text}}) == (None, None)
        # Or another ICU collation.
        de = DeclaredType("character varying", collation="de-x-icu")
        assert _read(dsn, {"t": {"k": de}}) == ("de", None)
        # A schema's own collation, named with its schema.
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE SCHEMA s")
            conn.execute("CREATE COLLATION s.sv (provider = icu, locale = 'sv-SE')")
        assert _read(dsn, {"t": {"k": DeclaredType("text", collation="s.sv")}}) == ("sv", None)
        # Columns of the default and of another collation: the default's, with a warning.
        collation, warning = _read(dsn, {"t": {"k": text, "j": c_text}})
        assert collation == "en_us"
        assert warning is not None and "t.j" in warning and "t.k" not in warning
        # Columns of tables that are not configured do not count.
        assert _read(dsn, {"t": {"k": text}, "other": {"j": c_text}}) == ("en_us", None)
        # A collation pg_collation does not have: the default's, with a warning.
        collation, warning = _read(dsn, {"t": {"k": DeclaredType("text", collation="gone")}})
        assert collation == "en_us" and warning is not None


def test_duckdb_has_the_collations_mapped() -> None:
    assert {"en", "en_us", "de", "sv", "fr_ca", "zh_cn", "is"} <= AVAILABLE
