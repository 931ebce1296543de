"""The pieces asyncpg's pool, cursors and copy_from_query need, without a server: UNLISTEN
read as a session statement, advisory lock functions, quote_literal, pg_catalog-qualified
types, the moves of a bound portal, and DuckDB's words about extensions replaced
(tests/integration/test_asyncpg_pool_end_to_end.py runs them through a server)."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from proxy.catalog.engine_errors import postgres_error
from proxy.catalog.qualified_types import unqualified_type
from proxy.catalog.refusal import CatalogRefused
from proxy.catalog.translate import SessionValues, translate
from proxy.cursor_statements import FETCH_ALL, Direction, Fetch
from proxy.parameter_type_rules import cast_oid
from proxy.portal_moves import move_portal
from proxy.protocol import values as v
from proxy.seam import ColumnDescription, QueryError, StatementResult
from proxy.statements import Kind, SessionStatement, StatementSyntaxError, recognize

SESSION = SessionValues("alice", "demo", "PostgreSQL 15.0 (dpproxy)", settings={})


@pytest.mark.parametrize(
    ("sql", "channel"),
    [
        ("UNLISTEN *", None),
        ("unlisten  * ;", None),
        ("UNLISTEN /* all */ *", None),
        ("UNLISTEN some_channel", "some_channel"),
        ('UNLISTEN "Some Channel"', "some channel"),
    ],
)
def test_unlisten_is_a_session_statement(sql: str, channel: str | None) -> None:
    assert recognize(sql) == SessionStatement(Kind.UNLISTEN, channel)


@pytest.mark.parametrize(
    ("sql", "near"),
    [
        ("UNLISTEN", "syntax error at end of input"),
        ("UNLISTEN a.b", 'syntax error at or near "."'),
        ("UNLISTEN 'x'", "syntax error at or near \"'x'\""),
        ("UNLISTEN a b", 'syntax error at or near "b"'),
        ("UNLISTEN * x", 'syntax error at or near "x"'),
    ],
)
def test_unlisten_syntax_errors_as_postgresql(sql: str, near: str) -> None:
    with pytest.raises(StatementSyntaxError, match=near):
        recognize(sql)


def _translated(sql: str) -> str:
    translation = translate(sql, SESSION)
    assert translation is not None
    return translation.sql


def test_advisory_unlock_all_releases_nothing_and_locks_are_refused() -> None:
    assert _translated("SELECT pg_advisory_unlock_all()") == (
        "SELECT '' AS \"pg_advisory_unlock_all\""
    )
    assert "pg_advisory_unlock(" not in _translated("SELECT pg_advisory_unlock(1)")
    for function in ("pg_advisory_lock(1)", "pg_try_advisory_lock_shared(1, 2)"):
        with pytest.raises(CatalogRefused, match="does not take advisory locks"):
            translate(f"SELECT {function}", SESSION)


def test_version_is_named_version() -> None:
    translation = translate("SELECT version()", SESSION)
    assert translation is not None and translation.column_names == ("version",)


@pytest.mark.parametrize(
    ("qualified", "plain"),
    [
        ('"pg_catalog"."int4"', "int4"),
        ("pg_catalog.int8", "int8"),
        ("pg_catalog.varchar(3)", "varchar(3)"),
        ('pg_catalog."char"', '"char"'),
        ("pg_catalog.char", '"char"'),  # "char", not char(1), as in PostgreSQL
        ("pg_catalog.timestamptz", "timestamptz"),
    ],
)
def test_pg_catalog_types_are_the_types_they_name(qualified: str, plain: str) -> None:
    def to(sql: str) -> exp.DataType:
        cast = sqlglot.parse_one(f"SELECT 1::{sql}", read="postgres").find(exp.Cast)
        assert cast is not None
        return cast.args["to"]

    assert unqualified_type(to(qualified)) == to(plain)


def test_other_schemas_and_cased_names_stay_user_defined() -> None:
    for sql in ('public."int4"', 'pg_catalog."Int4"'):
        cast = sqlglot.parse_one(f"SELECT 1::{sql}", read="postgres").find(exp.Cast)
        assert cast is not None
        to = cast.args["to"]
        assert unqualified_type(to) is to


def test_a_qualified_cast_types_its_parameter() -> None:
    cast = sqlglot.parse_one('SELECT $1::"pg_catalog"."int4"', read="postgres").find(exp.Cast)
    assert cast is not None and cast_oid(cast.args["to"]) == v.INT4


def test_extension_errors_name_the_type() -> None:
    install = "An error occurred while trying to automatically install the required extension"
    for text, name in (
        (f"{install} 'inet:", "inet"),
        ("Catalog Error: Type with name MONEY does not exist!", "money"),
    ):
        error = postgres_error(text)
        assert error is not None
        assert error.message == f"dpproxy's catalog does not support the type {name}"
        assert "extension" not in (error.hint or "")


ANSWER = StatementResult(
    tag="SELECT 5",
    columns=(ColumnDescription("n", v.INT4),),
    rows=tuple((str(i),) for i in range(1, 6)),
)


def _fetch(direction: Direction, count: int, *, move: bool = False) -> Fetch:
    return Fetch("p", direction, count, move)


def test_a_bound_portal_moves_forward_from_where_execute_left_it() -> None:
    moved = move_portal(_fetch(Direction.FORWARD, 2, move=True), ANSWER, 1, at_end=False)
    assert (moved.result.tag, moved.sent_rows, moved.at_end) == ("MOVE 2", 3, False)
    fetched = move_portal(_fetch(Direction.FORWARD, FETCH_ALL), ANSWER, 3, at_end=False)
    assert fetched.result.rows == (("4",), ("5",))
    assert (fetched.result.tag, fetched.sent_rows, fetched.at_end) == ("FETCH 2", 5, True)
    again = move_portal(_fetch(Direction.FORWARD, 1), ANSWER, 5, at_end=True)
    assert (again.result.tag, again.result.rows) == ("FETCH 0", ())


def test_a_bound_portal_cannot_move_backward() -> None:
    with pytest.raises(QueryError, match="cursor can only scan forward"):
        move_portal(_fetch(Direction.BACKWARD, 1), ANSWER, 2, at_end=False)
