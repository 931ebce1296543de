"""A function read with FROM LATERAL in a catalog query: the same table functions as in
FROM (sqlglot does not wrap it in a table, so it was let through to the catalog's engine,
where only DuckDB's disabled file access stopped ``read_csv``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from proxy.catalog.database import CatalogDatabase
from proxy.catalog.translate import CatalogRefused, translate
from tests.proxy.test_catalog_translate import SESSION, ask, demo_catalog


@pytest.fixture(scope="module")
def database() -> Iterator[CatalogDatabase]:
    db = CatalogDatabase(demo_catalog())
    yield db
    db.close()


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM LATERAL read_csv('/etc/passwd')",
        "SELECT * FROM pg_class c, LATERAL read_text('/etc/hostname') t",
        "SELECT * FROM pg_class c CROSS JOIN LATERAL read_parquet('/tmp/x.parquet') p",
        "SELECT * FROM pg_class c JOIN LATERAL read_json_auto('/etc/x.json') j ON true",
        "SELECT * FROM pg_class c, LATERAL pg_ls_dir('.') d",
    ],
)
def test_a_lateral_function_is_refused_as_in_from(sql: str) -> None:
    with pytest.raises(CatalogRefused, match=r"does not support the function \w+\(\) in FROM"):
        translate(sql, SESSION)


def test_a_lateral_table_function_of_the_catalog_is_answered(database: CatalogDatabase) -> None:
    _, rows = ask(
        database,
        "SELECT c.relname, g FROM pg_class c, LATERAL generate_series(1, 2) g "
        "WHERE c.relname = 'visits' ORDER BY g",
    )
    assert rows == [("visits", 1), ("visits", 2)]


def test_a_lateral_subquery_is_checked_as_any(database: CatalogDatabase) -> None:
    _, rows = ask(
        database,
        "SELECT t.n FROM pg_class c, LATERAL (SELECT c.relname AS n) t WHERE c.relname = 'visits'",
    )
    assert rows == [("visits",)]
    with pytest.raises(CatalogRefused, match=r"read_csv\(\) in FROM"):
        translate("SELECT * FROM pg_class c, LATERAL (SELECT * FROM read_csv('/x')) t", SESSION)


def test_rows_from_is_refused_cleanly() -> None:
    """ROWS FROM (f(…)): a table without a name of its own (an internal error before)."""
    with pytest.raises(CatalogRefused, match=r"ROWS FROM"):
        translate("SELECT * FROM ROWS FROM (read_csv('/etc/passwd')) x", SESSION)
    with pytest.raises(CatalogRefused, match=r"ROWS FROM"):
        translate("SELECT * FROM ROWS FROM (generate_series(1, 2)) x", SESSION)


def test_a_function_of_one_value_under_lateral_is_refused() -> None:
    """string_to_array is read as a table in FROM only (proxy.catalog.scalar_from); under
    LATERAL the catalog's engine would fail on it."""
    with pytest.raises(CatalogRefused, match=r"string_to_array\(\) in FROM"):
        translate("SELECT * FROM LATERAL string_to_array('a', ',') s", SESSION)
