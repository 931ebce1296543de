"""The catalog emulation without a server: which queries are catalog queries, how they are
translated for DuckDB, and what the emulated catalog answers (schema only, no statistics)."""

from __future__ import annotations

import pytest

from proxy.catalog.classify import _classify_cached
from proxy.catalog.database import CatalogDatabase
from proxy.catalog.text import pg_text
from proxy.catalog.translate import (
    CatalogRefused,
    SessionValues,
    catalog_tree,
    translate,
)
from rewriter import Catalog, ColumnType, TablePolicy, build_catalog

SESSION = SessionValues(
    user="alice",
    database="demo",
    version="PostgreSQL 15.0 (dpproxy test)",
    settings={"search_path": '"$user", public', "standard_conforming_strings": "on"},
)


def demo_catalog() -> Catalog:
    columns = {
        "visits": {
            "visit_id": ColumnType.INTEGER,
            "patient_id": ColumnType.INTEGER,
            "visit_date": ColumnType.DATE,
            "cost": ColumnType.FLOAT,
        },
        "patients": {"patient_id": ColumnType.INTEGER, "sex": ColumnType.TEXT},
        "secret": {"salary": ColumnType.INTEGER},  # no policy: never shown
    }
    policies = {
        "visits": TablePolicy(privacy_unit="patient_id"),
        "patients": TablePolicy(privacy_unit="patient_id"),
    }
    return build_catalog(columns, policies, schema="main")


@pytest.fixture(scope="module")
def database() -> CatalogDatabase:
    return CatalogDatabase(demo_catalog())


def ask(
    database: CatalogDatabase, sql: str, parameters: tuple[str | None, ...] = ()
) -> tuple[tuple[str, ...] | None, list[tuple[object, ...]]]:
    translation = translate(sql, SESSION, parameters)
    assert translation is not None, sql
    return translation.column_names, database.run_blocking(translation.sql).rows


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM visits",
        "SELECT COUNT(*) FROM public.visits v JOIN pg_class c ON true",
        "SELECT x FROM other_schema.t",
        "DELETE FROM pg_class",
        "not sql at all (",
    ],
)
def test_queries_on_data_or_not_select_are_not_catalog_queries(sql: str) -> None:
    assert translate(sql, SESSION) is None


def test_unemulated_relations_and_functions_are_refused_by_name() -> None:
    with pytest.raises(CatalogRefused, match="pg_catalog.pg_largeobject"):
        translate("SELECT * FROM pg_catalog.pg_largeobject", SESSION)
    with pytest.raises(CatalogRefused, match="read_csv"):
        translate("SELECT * FROM read_csv('/etc/passwd')", SESSION)
    with pytest.raises(CatalogRefused, match="getenv"):
        translate("SELECT getenv('HOME')", SESSION)


def test_no_table_queries_get_postgres_names(database: CatalogDatabase) -> None:
    assert ask(database, "SELECT 1") == (("?column?",), [(1,)])
    names, rows = ask(database, "select pg_catalog.version(), current_schema(), session_user")
    assert names == ("version", "current_schema", "session_user")
    assert rows == [("PostgreSQL 15.0 (dpproxy test)", "public", "alice")]
    assert ask(database, "SELECT current_database(), current_setting('search_path')")[1] == [
        ("demo", '"$user", public')
    ]


def test_psql_describe_lookup_with_operator_collate_and_regclass(
    database: CatalogDatabase,
) -> None:
    names, rows = ask(
        database,
        "SELECT c.oid, n.nspname, c.relname FROM pg_catalog.pg_class c "
        "LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relname OPERATOR(pg_catalog.~) '^(visits)$' COLLATE pg_catalog.default "
        "AND pg_catalog.pg_table_is_visible(c.oid) ORDER BY 2, 3",
    )
    assert names == ("oid", "nspname", "relname")
    assert [r[1:] for r in rows] == [("public", "visits")]
    oid = rows[0][0]
    _, columns = ask(
        database,
        "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod) "
        f"FROM pg_catalog.pg_attribute a WHERE a.attrelid = '{oid}' AND a.attnum > 0 "
        "ORDER BY a.attnum",
    )
    assert columns == [
        ("visit_id", "bigint"),
        ("patient_id", "bigint"),
        ("visit_date", "date"),
        ("cost", "double precision"),
    ]
    assert ask(database, "SELECT 'visits'::regclass::oid")[1] == [(oid,)]
    assert ask(database, f"SELECT c.oid::pg_catalog.regclass FROM pg_class c WHERE c.oid = {oid}")[
        1
    ] == [("visits",)]


def test_only_tables_with_a_policy_are_listed_and_without_statistics(
    database: CatalogDatabase,
) -> None:
    _, rows = ask(
        database,
        "SELECT relname, reltuples, relpages FROM pg_class WHERE relnamespace = 2200 ORDER BY 1",
    )
    assert rows == [("patients", 0.0, 0), ("visits", 0.0, 0)]
    assert (
        ask(database, "SELECT * FROM information_schema.tables WHERE table_name = 'secret'")[1]
        == []
    )
    assert ask(database, "SELECT count(*) FROM pg_catalog.pg_stats")[1] == [(0,)]
    assert ask(database, "SELECT count(*) FROM pg_statistic")[1] == [(0,)]


def test_type_lookups_with_parameters(database: CatalogDatabase) -> None:
    sql = (
        "SELECT typname, oid, typarray, oid::regtype::text, typdelim FROM pg_type "
        "WHERE oid = to_regtype($1)"
    )
    assert ask(database, sql, ("int4",))[1] == [("int4", 23, 1007, "integer", ",")]
    assert ask(database, sql, ("text[]",))[1][0][:2] == ("_text", 1009)
    with pytest.raises(CatalogRefused, match="parameter"):
        translate(sql, SESSION)


def test_reserved_words_as_labels_and_privileges(database: CatalogDatabase) -> None:
    names, rows = ask(
        database,
        "select t.tablename as table, has_table_privilege(current_user, t.tablename, 'SELECT') "
        "as select, has_table_privilege(t.tablename, 'UPDATE') as update "
        "from pg_tables t where t.schemaname = 'public' order by 1",
    )
    assert names == ("table", "select", "update")
    assert rows == [("patients", True, False), ("visits", True, False)]


def test_session_relations_and_keywords(database: CatalogDatabase) -> None:
    assert ask(database, "SELECT datname FROM pg_database")[1] == [("demo",)]
    assert ask(database, "SELECT rolname FROM pg_roles ORDER BY oid")[1] == [
        ("dpproxy",),
        ("alice",),
    ]
    assert ask(
        database, "select setting from pg_settings where name='standard_conforming_strings'"
    )[1] == [("on",)]
    _, keywords = ask(database, "SELECT word FROM pg_catalog.pg_get_keywords() WHERE catcode='R'")
    assert ("select",) in keywords


def test_text_format() -> None:
    assert pg_text(True) == "t"
    assert pg_text(["pg_catalog", "public"]) == "{pg_catalog,public}"
    assert pg_text(["a b", None, ""]) == '{"a b",NULL,""}'
    assert pg_text(1.0) == "1"
    assert pg_text(None) is None


def test_statements_are_remembered_for_each_analyst_apart() -> None:
    """A remembered statement is classified faster than a parsed one: across analysts,
    the time would tell one which statements another sent."""
    sql = "SELECT COUNT(*) FROM patients WHERE zip3 = '941' AND birth_year = 1961"
    before = _classify_cached.cache_info()
    assert catalog_tree(sql, "alice") is None
    assert catalog_tree(sql, "bob") is None
    assert catalog_tree(sql, "alice") is None
    after = _classify_cached.cache_info()
    assert (after.misses - before.misses, after.hits - before.hits) == (2, 1)
