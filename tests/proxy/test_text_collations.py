"""On PostgreSQL, two columns of different non-default collations cannot be compared, and
the error comes only when a row reaches the comparison: after the charge of
``SELECT COUNT(*) FROM t WHERE CASE WHEN stay = 7 THEN code = other END`` it told whether a
row with stay = 7 exists. dpproxy refuses to start over such a schema (proxy.text_collations)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from proxy.backends import DeclaredType, Schema
from proxy.demo_data import DemoSize, generate, load_postgres
from proxy.text_collations import check_text_collations
from proxy.unit_columns import inexact_equality
from rewriter import PolicyError, TablePolicy
from tests.integration.server import dpproxy, start, write_config
from tests.proxy.test_unit_columns import _postgres_schema

POLICIES = {
    "visits": TablePolicy(privacy_unit="patient_id"),
    "departments": TablePolicy(public=True),
}
TEXT = DeclaredType("text")


def _schema(visits: str | None, departments: str | None, other: str | None = None) -> Schema:
    return {
        "visits": {
            "patient_id": DeclaredType("bigint"),
            "code": TEXT,
            "diagnosis": DeclaredType("character varying", 20, collation=visits),
        },
        "Departments": {"building": DeclaredType("text", collation=departments)},
        "unconfigured": {"name": DeclaredType("text", collation=other)},
    }


@pytest.mark.parametrize(
    ("visits", "departments"),
    [("en-x-icu", "C"), ("C", "POSIX"), ("C", "c"), ("default", "C")],
)
def test_two_different_collations_are_refused(visits: str, departments: str) -> None:
    with pytest.raises(PolicyError) as caught:
        check_text_collations(_schema(visits, departments), POLICIES)
    message = str(caught.value)
    assert f'"{visits}": visits.diagnosis' in message
    assert f'"{departments}": Departments.building' in message
    assert "ALTER TABLE" in message and 'COLLATE "default"' in message
    assert "[tables.NAME]" in message


@pytest.mark.parametrize(
    ("visits", "departments", "other"),
    [
        (None, None, None),
        ("en-x-icu", None, None),
        ("C", "C", None),
        (None, "POSIX", "C"),  # the other collation is on a table analysts do not see
    ],
)
def test_one_collation_besides_the_default_is_accepted(
    visits: str | None, departments: str | None, other: str | None
) -> None:
    check_text_collations(_schema(visits, departments, other), POLICIES)


def test_the_message_names_a_few_columns_of_each_collation() -> None:
    many = {f"c{i}": DeclaredType("text", collation="C") for i in range(8)}
    declared: Schema = {"visits": {**many, "x": DeclaredType("text", collation="POSIX")}}
    with pytest.raises(PolicyError, match=r'"C": visits.c0, .*visits.c4 and 3 more; "POSIX"'):
        check_text_collations(declared, POLICIES)


def _fails_when_a_row_reaches(conn: psycopg.Connection, left: str, right: str) -> list[bool]:
    """Whether ``CASE WHEN x = 1 THEN left = right END`` fails without, then with a row
    where x = 1."""
    failed = []
    for x in (2, 1):
        conn.execute("DELETE FROM t")
        conn.execute("INSERT INTO t VALUES (%s, 'a', 'a', 'a', 'a', 'a')", (x,))
        try:
            with conn.transaction():
                conn.execute(
                    f"SELECT COUNT(*) FROM t WHERE CASE WHEN x = 1 THEN {left} = {right} END"
                )
            failed.append(False)
        except psycopg.errors.IndeterminateCollation as error:
            assert "could not determine which collation" in str(error)
            failed.append(True)
    return failed


def test_postgres_fails_only_on_a_row_for_two_non_default_collations(
    pg_dsn: str, pg_schema: str
) -> None:
    ddl = [
        f"CREATE COLLATION \"{pg_schema}\".ci (provider = icu, locale = 'und-u-ks-level2')",
        'CREATE TABLE t (x int, d text, c text COLLATE "C", p text COLLATE "POSIX", '
        f'i text COLLATE "{pg_schema}".ci, dd text COLLATE "default")',
    ]
    declared = _postgres_schema(pg_dsn, pg_schema, ddl)
    assert {c: d.collation for c, d in declared["t"].items()} == {
        "x": None,
        "d": None,
        "c": "C",
        "p": "POSIX",
        "i": f"{pg_schema}.ci",  # named with its schema: not pg_catalog's
        "dd": None,
    }
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path = "{pg_schema}"')
        for left, right in (("c", "i"), ("c", "p"), ("p", "i")):
            assert _fails_when_a_row_reaches(conn, left, right) == [False, True]
            only = {"t": {k: v for k, v in declared["t"].items() if k in (left, right, "x")}}
            with pytest.raises(PolicyError):
                check_text_collations(only, {"t": TablePolicy(public=True)})
        for left, right in (("d", "c"), ("d", "i"), ("dd", "p"), ("d", "dd"), ("i", "i")):
            assert _fails_when_a_row_reaches(conn, left, right) == [False, False]
            only = {"t": {k: v for k, v in declared["t"].items() if k in (left, right, "x")}}
            check_text_collations(only, {"t": TablePolicy(public=True)})


def test_collations_of_one_name_in_two_schemas_are_two(pg_dsn: str, pg_schema: str) -> None:
    """s_a.ci and s_b.ci (both nondeterministic) are two collations to PostgreSQL, and a
    user's s."C" is not pg_catalog's byte-wise "C": information_schema names them alike,
    so dpproxy reads the collation's schema too (the check passed, and the comparison
    failed only on the rows reaching it)."""
    other = f"{pg_schema}_b"
    ddl = [
        f'CREATE SCHEMA "{other}"',
        f'CREATE COLLATION "{pg_schema}".ci '
        "(provider = icu, locale = 'und-u-ks-level2', deterministic = false)",
        f'CREATE COLLATION "{other}".ci '
        "(provider = icu, locale = 'und-u-ks-level2', deterministic = false)",
        f'CREATE COLLATION "{other}"."C" '
        "(provider = icu, locale = 'und-u-ks-level2', deterministic = false)",
        f'CREATE TABLE t (x int, a text COLLATE "{pg_schema}".ci, b text COLLATE "{other}".ci, '
        f'u text COLLATE "{other}"."C", d1 text, d2 text)',  # six: _fails_when_a_row_reaches
    ]
    try:
        declared = _postgres_schema(pg_dsn, pg_schema, ddl)
        assert declared["t"]["a"].collation != declared["t"]["b"].collation
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'SET search_path = "{pg_schema}"')
            assert _fails_when_a_row_reaches(conn, "a", "b") == [False, True]
        with pytest.raises(PolicyError, match=r"2 different collations"):
            check_text_collations(
                {"t": {k: declared["t"][k] for k in ("x", "a", "b")}},
                {"t": TablePolicy(public=True)},
            )
        # A case-insensitive collation named "C" is no byte-wise "C" for a unit column.
        assert declared["t"]["u"].collation == f"{other}.C"
        assert inexact_equality(declared["t"]["u"]) is not None
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{other}" CASCADE')


@pytest.fixture
def demo_schema(pg_dsn: str) -> Iterator[str]:
    schema = f"dpproxy_coll_{uuid.uuid4().hex[:8]}"
    load_postgres(generate(DemoSize(patients=50)), pg_dsn, schema=schema)
    try:
        yield schema
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.mark.integration
def test_dpproxy_serve_refuses_two_collations_on_postgres(
    pg_dsn: str, demo_schema: str, tmp_path: Path
) -> None:
    backend = f'engine = "postgres"\ndsn = "{pg_dsn}"\nschema = "{demo_schema}"\n#'
    config = write_config(tmp_path, backend=backend)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            f'ALTER TABLE "{demo_schema}".patients ALTER COLUMN zip3 TYPE text COLLATE "C"'
        )
        conn.execute(
            f'ALTER TABLE "{demo_schema}".visits ALTER COLUMN diagnosis TYPE text COLLATE "POSIX"'
        )
    refused = dpproxy("serve", "--config", str(config))
    assert refused.returncode != 0
    assert '"C": patients.zip3; "POSIX": visits.diagnosis' in refused.stderr
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            f'ALTER TABLE "{demo_schema}".visits ALTER COLUMN diagnosis TYPE text COLLATE "C"'
        )
    running = start(config)  # one collation besides the default: dpproxy starts
    try:
        with psycopg.connect(running.dsn("alice"), autocommit=True) as conn:
            row = conn.execute(
                "SELECT COUNT(*) FROM visits WHERE CASE WHEN length_of_stay = 7 "
                "THEN department = diagnosis END"
            ).fetchone()
            assert row is not None
    finally:
        running.stop()
