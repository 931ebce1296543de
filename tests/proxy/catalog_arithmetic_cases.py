"""Arithmetic in catalog queries, compared with the real PostgreSQL: the cases, and what
each side answers (the value's text, the column's type OID, the error's SQLSTATE and
message).

Run it to see how many cases dpproxy's catalog answers as PostgreSQL does:

    /work/venv/bin/python -m tests.proxy.catalog_arithmetic_cases [-v]

(PostgreSQL at DPPROXY_TEST_PG_DSN, by default postgres@127.0.0.1:5432). The catalog side
is the real CatalogResponder, with its CatalogDatabase and catalog engine process.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import psycopg
from psycopg.pq import ExecStatus

from accountant import AnalystBudget, Epsilon
from proxy.asker import Asker
from proxy.catalog import CatalogResponder
from proxy.ledger import AsyncLedger
from proxy.responders import SessionContext
from proxy.seam import QueryError
from rewriter import Catalog, ColumnType, TablePolicy, build_catalog

DEFAULT_PG_DSN = "postgresql://postgres@127.0.0.1:5432/postgres"
NUMERIC_OID = 1700

# One operand of each type: left values negative (rounding toward zero), right positive.
LEFT = {
    "int2": "(-7)::int2",
    "int4": "-7",
    "int8": "(-7)::int8",
    "numeric": "-7.5",
    "float4": "(-7.5)::float4",
    "float8": "(-7.5)::float8",
}
RIGHT = {
    "int2": "2::int2",
    "int4": "2",
    "int8": "2::int8",
    "numeric": "2.0",
    "float4": "2::float4",
    "float8": "2::float8",
}
ZERO = {
    "int2": "0::int2",
    "int4": "0",
    "int8": "0::int8",
    "numeric": "0.0",
    "float4": "0::float4",
    "float8": "0::float8",
}
OPERATORS = ["/", "%", "+", "-", "*", "^"]


def grid() -> list[str]:
    """Every operator over every pair of operand types (216 expressions)."""
    return [f"{LEFT[a]} {op} {RIGHT[b]}" for op in OPERATORS for a in LEFT for b in RIGHT]


SPECIAL = [
    # Integer division truncates toward zero.
    "7/2",
    "-7/2",
    "7/-2",
    "-7/-2",
    "1/3",
    "2147483647/2",
    "9223372036854775807/2",
    "7::int2/2::int2",
    "7::int2/2",
    "7/2::int8",
    "(-7)::int8/2::int2",
    "oid_like / 2",
    # Numeric and float division.
    "7.0/2",
    "1.0/3",
    "2.0/3",
    "10.0/3",
    "-7.0/2",
    "7/2.0",
    "100.0/7",
    "1/8.0",
    "0.5/4",
    "7::numeric/2",
    "7::float8/2",
    "1/3::float8",
    "7::float4/2",
    "7.5::float4/2::float4",
    "1e5/3",
    "1.5e3/7",
    # Division and modulo by zero.
    "1/0",
    "-1/0",
    "0/0",
    "1.0/0",
    "1/0.0",
    "1.0::float8/0",
    "1::float4/0",
    "'Infinity'::float8/0",
    "5 % 0",
    "5::int2 % 0::int2",
    "5::int8 % 0",
    "5.5 % 0",
    "div(7, 0)",
    "mod(7, 0)",
    "mod(7.5, 0.0)",
    # Modulo signs and mixed types.
    "-7 % 3",
    "7 % -3",
    "-7 % -3",
    "-7.5 % 2",
    "5.5 % 2.25",
    "(-2147483647-1) % -1",
    "(-9223372036854775807-1) % -1",
    # Integer overflow.
    "2147483647 + 1",
    "-2147483647 - 2",
    "2147483647 * 2",
    "9223372036854775807 + 1",
    "(-9223372036854775807-1) - 1",
    "9223372036854775807 * 2",
    "32767::int2 + 1::int2",
    "32767::int2 * 2::int2",
    "(-32767)::int2 - 2::int2",
    "32767::int2 + 1",
    "(-2147483647-1) / -1",
    "(-9223372036854775807-1) / -1",
    "(-32767-1)::int2 / (-1)::int2",
    "-(-2147483647-1)",
    "-((-2147483647-1)::int4)",
    "-((-32767-1)::int2)",
    "-((-9223372036854775807-1)::int8)",
    "abs((-2147483647-1)::int4)",
    "abs((-32767-1)::int2)",
    "abs((-9223372036854775807-1)::int8)",
    "2147483648",
    "9223372036854775808",
    "9223372036854775808 + 1",
    "9223372036854775808 / 2",
    "-9223372036854775808",
    # Casts that overflow or do not parse.
    "40000::smallint",
    "(-40000)::int2",
    "2147483648::int",
    "9223372036854775808::int8",
    "1e10::int",
    "3.5e9::int4",
    "1e20::int8",
    "32767.5::int2",
    "'40000'::int2",
    "'abc'::int",
    "'1.5'::int",
    "''::int",
    "'abc'::numeric",
    "'abc'::float8",
    "12345.678::numeric(5,2)",
    "1234.5::numeric(5,2)",
    "1e300::float4",
    "1e400::float8",
    # Casts that round.
    "2.5::int",
    "-2.5::int",
    "3.5::int",
    "2.5::float8::int",
    "3.5::float8::int",
    "(-2.5)::float8::int",
    "2.5::float4::int2",
    "1.23456::numeric",
    "1.23456::numeric(10,2)",
    "7::numeric",
    "0.1::float8::numeric",
    # Float overflow.
    "1e308::float8 * 10",
    "1e38::float4 * 10::float4",
    "1e-308::float8 * 1e-308::float8",
    "1e-308::float8 * 1e-308",
    "1e400 * 1",
    "1e-50 * 2::float4",
    "'Infinity'::float8 * 2",
    "'NaN'::float8 / 2",
    # Functions.
    "abs(-7)",
    "abs(-7::int2)",
    "abs(-7.5)",
    "abs(-7.5::float8)",
    "abs(-7.5::float4)",
    "div(7, 2)",
    "div(-7, 2)",
    "div(7.5, 2)",
    "div(-7.5, 2.25)",
    "mod(7, 2)",
    "mod(-7, 2)",
    "mod(7::int2, 2::int2)",
    "mod(7::int8, 2)",
    "mod(7.5, 2)",
    "mod(-7.5, 2.25)",
    "round(2.5)",
    "round(-2.5)",
    "round(2.5::float8)",
    "round(3.5::float8)",
    "round(-2.5::float8)",
    "round(7)",
    "round(2.567, 2)",
    "round(-2.565, 2)",
    "round(1234.5, -2)",
    "round(2.5::float4)",
    "trunc(2.7)",
    "trunc(-2.7)",
    "trunc(2.567, 2)",
    "trunc(-2.7::float8)",
    "trunc(7)",
    "ceil(2.1)",
    "floor(-2.1)",
    "ceil(2.1::float8)",
    "power(2, 10)",
    "2 ^ 0.5",
    "2.0 ^ 10",
    "sqrt(2)",
    "sqrt(2.0)",
    "(-8) ^ (1.0/3)",
    "0 ^ -1",
    "0.0 ^ -1",
    # NULLs.
    "NULL / 2",
    "2 / NULL",
    "NULL::int / 2",
    "NULL::int2 / NULL::int2",
    "NULL::numeric / 2",
    "2 / NULL::numeric",
    "NULL::float8 / 0",
    "NULL::int / 0",
    "1 / NULL::int",
    "NULL % 2",
    "NULL::int8 % 0",
    "NULL::int + 1",
    "-NULL::int",
    "abs(NULL::int)",
    "div(NULL, 2)",
    "mod(NULL::int, 2)",
    "round(NULL::numeric, 2)",
    # Expressions that combine.
    "(7/2)*2",
    "7/2*2.0",
    "(7.0/2)*2",
    "1 + 7/2",
    "7/2 + 0.5",
    "7 % 3 / 2",
    "(2147483647/2)*2 + 1",
    "7/2::float8",
    "(7/2)::float8",
    "-(7/2)",
    "7 / (2 - 2)",
    "coalesce(7/2, 0)",
    "CASE WHEN 1 = 1 THEN 7/2 ELSE 0 END",
    "greatest(7/2, 1)",
    "7/2 = 3",
    "(7.0/2)::int",
    "(1.0/3)::float8",
    "'7'::int / 2",
    "7 / 2 / 2 / 2",
    "32767::int2 + (1)",
    "(7) / (2)",
    "((-7)) / 2",
    "10 % 3 * 2",
    "2 + 3 * 4 ^ 2",
    "'7' / 2",
    "'1.5' + 1",
    "NULL / NULL",
    "-'7'",
    "abs('-7')",
    "7::numeric(5,2) / 2",
    "1::numeric / 3e-30",
    "round(2.5, 3)",
    "round(7, 2)",
    "trunc(2.5, 3)",
    "ceil(7)",
    "floor(7::int8)",
    "ceil(-2.5::float4)",
    "sqrt(-1)",
    "sqrt(-1.0)",
    "sqrt(2::float4)",
    "sqrt(100::numeric)",
    "sqrt(12345678.9)",
    "round(2.567::float8, 2)",
    "div(7.5::float8, 2)",
    "2 ^ 100.5",
    "1.1 ^ 100",
    "0.5 ^ 100",
    "2.0 ^ -2",
    "(-2.0) ^ 3",
    "0 ^ 0.5",
    "(-2)::float8 ^ 0.5",
    "0::float8 ^ -1",
    "2::float8 ^ 1024",
    "2::float8 ^ -1080",
    "'NaN'::float8 ^ 0",
    "1e308::float8 + 1e308::float8",
    "(-1e308)::float8 - 1e308::float8",
    "1e-300::float8 / 1e300::float8",
    "'Infinity'::float8 + 1",
    "'NaN'::float8 / 0",
    "0::float8 / 0",
    "1.5::float4 + 1.5::float4",
    "0.1::float4 * 3",
    "3e38::float4 + 3e38::float4",
    "1e300::float8::float4",
    "-32768::int2",
    "(-32768)::int2 / (-1)::int2",
    "(-32768)::int2 % (-1)::int2",
    "'abc'::int2",
    "' 12 '::int",
    "'+7'::int",
    "'1e3'::int",
    "'1e3'::numeric",
    "' 1.50 '::numeric",
    "'-0.000'::numeric",
    "'Infinity'::float8",
    "'1e400'::float8",
    "1e-400::float8",
    "1e-50::float4",
    "0.1::float8::numeric",
    "(1/3::float8)::numeric",
    "7::int2::numeric / 2",
    "(7.0/2)::numeric(10,3)",
    "(7.0/3)::float4",
    "1.0/3 + 1.0/3",
    "(1.0/3) * 3",
    "-(1.0/3)",
    "abs(-7.0/2)",
    "div(1.0/3, 0.1)",
    "mod(-7, 0)",
    "mod(2147483647, -1)",
]


def cases() -> list[str]:
    """The statements compared: the grid, the special cases, and queries of the catalog."""
    statements = [f"SELECT {e}" for e in grid()]
    statements += [f"SELECT {e}" for e in SPECIAL if "oid_like" not in e]
    statements += [
        "SELECT typlen / 3 FROM pg_type WHERE typname = 'int8'",
        "SELECT oid / 2 FROM pg_type WHERE typname = 'int4'",
        "SELECT -oid / 5 FROM pg_type WHERE typname = 'text'",
        "SELECT oid % 7 FROM pg_type WHERE typname = 'int4'",
        "SELECT typlen / 0 FROM pg_type WHERE typname = 'int8'",
        "SELECT oid / 0 FROM pg_type WHERE typname = 'int4'",
        "SELECT typlen * 10000 FROM pg_type WHERE typname = 'int8'",
        "SELECT x / 2 FROM (SELECT 7 AS x) t",
        "SELECT x / 2 FROM (SELECT 7.0 AS x) t",
        "SELECT x / 2 FROM (SELECT 7::float8 AS x) t",
        "SELECT x / y FROM (VALUES (7, 2), (-7, 2)) v(x, y) ORDER BY 1",
        "SELECT x / y FROM (VALUES (7, 0)) v(x, y)",
        "SELECT sum(x) / 2 FROM (VALUES (7), (8)) v(x)",
        "SELECT max(x) / 2 FROM (VALUES (7.5), (8.5)) v(x)",
        "SELECT count(*) / 2 FROM pg_type WHERE typname IN ('int2', 'int4', 'int8')",
        "SELECT 100.0 * count(*) / 7 FROM pg_type WHERE typname IN ('int2', 'int4', 'int8')",
        "SELECT count(*) / 2.0 FROM pg_type WHERE typname IN ('int2', 'int4', 'int8')",
        "SELECT reltuples / 2 FROM pg_class WHERE false",
        "SELECT x / 2 FROM (SELECT 7::float4 AS x) t",
        "SELECT x / y FROM (SELECT 7::int2 AS x, 2::int2 AS y) t",
        "SELECT x / y FROM (SELECT 7.5 AS x, 0 AS y) t",
        "SELECT x % 2 FROM (SELECT -7 AS x) t",
        "SELECT -x FROM (SELECT (-2147483647 - 1) AS x) t",
        "SELECT x * 2 FROM (SELECT 2147483647 AS x) t",
        "SELECT x + 1 FROM (SELECT 32767::int2 AS x) t",
        "SELECT x::numeric FROM (SELECT 7 AS x) t",
        "SELECT x::numeric / 2 FROM (SELECT 7 AS x) t",
        "SELECT x FROM (VALUES (7), (-7), (3)) v(x) ORDER BY x / 2, x",
        "SELECT x / 2 AS h, count(*) FROM (VALUES (7), (6), (3)) v(x) GROUP BY 1 ORDER BY 1",
    ]
    return statements


@dataclass(frozen=True)
class Answer:
    """What a statement gave: its first row's first value and the column's type OID, or
    the error's SQLSTATE and message."""

    value: str | None = None
    type_oid: int | None = None
    sqlstate: str | None = None
    message: str | None = None

    def same(self, other: Answer) -> bool:
        """The same value and type, or the same error (SQLSTATE and message)."""
        return (self.value, self.type_oid, self.sqlstate, self.message) == (
            other.value,
            other.type_oid,
            other.sqlstate,
            other.message,
        )

    def shown(self) -> str:
        if self.sqlstate is not None:
            return f"ERROR {self.sqlstate} {self.message}"
        return f"{self.value!r}::{self.type_oid}"


def postgres_answer(conn: psycopg.Connection[tuple[object, ...]], sql: str) -> Answer:
    result = conn.pgconn.exec_params(sql.encode(), [], result_format=0)
    if result.status != ExecStatus.TUPLES_OK:
        state = result.error_field(psycopg.pq.DiagnosticField.SQLSTATE)
        message = result.error_field(psycopg.pq.DiagnosticField.MESSAGE_PRIMARY)
        return Answer(
            sqlstate=None if state is None else state.decode(),
            message=None if message is None else message.decode(),
        )
    raw = result.get_value(0, 0) if result.ntuples else None
    return Answer(value=None if raw is None else raw.decode(), type_oid=result.ftype(0))


def small_catalog() -> Catalog:
    columns = {"visits": {"visit_id": ColumnType.INTEGER, "cost": ColumnType.FLOAT}}
    policies = {"visits": TablePolicy(privacy_unit="visit_id")}
    return build_catalog(columns, policies, schema="main")


@contextmanager
def catalog_session() -> Iterator[tuple[CatalogResponder, SessionContext]]:
    """A catalog responder and a session context to ask it with."""
    catalog = small_catalog()
    responder = CatalogResponder(catalog)
    with tempfile.TemporaryDirectory() as directory:
        ledger = AsyncLedger(Path(directory) / "state.sqlite")
        budget = AnalystBudget(total=Epsilon(3), default_per_query=Epsilon("0.5"))
        asker = Asker(analyst="alice", budget=budget, address="127.0.0.1")
        context = SessionContext(asker, "demo", {}, catalog=catalog, ledger=ledger)
        try:
            yield responder, context
        finally:
            responder.close()
            ledger.close()


def catalog_answer(responder: CatalogResponder, context: SessionContext, sql: str) -> Answer:
    try:
        result = asyncio.run(responder.answer(sql, context))
    except QueryError as error:
        return Answer(sqlstate=error.sqlstate, message=error.message)
    if result is None:
        return Answer(sqlstate="<not a catalog query>")
    value = result.rows[0][0] if result.rows else None
    columns = result.columns or ()
    return Answer(value=value, type_oid=columns[0].type_oid if columns else None)


def compare(statements: Sequence[str], dsn: str) -> list[tuple[str, Answer, Answer]]:
    """(statement, PostgreSQL's answer, dpproxy's) for each statement."""
    compared = []
    with psycopg.connect(dsn, autocommit=True) as conn, catalog_session() as (responder, ctx):
        for sql in statements:
            compared.append((sql, postgres_answer(conn, sql), catalog_answer(responder, ctx, sql)))
    return compared


def same_value(theirs: Answer, ours: Answer) -> bool:
    """The same error (SQLSTATE), or the same type and value: a numeric's value compared as
    a number (3.5000000000000000 and 3.50000000000000000000 are the same value)."""
    if theirs.sqlstate is not None or ours.sqlstate is not None:
        return theirs.sqlstate == ours.sqlstate
    if theirs.type_oid != ours.type_oid:
        return False
    if theirs.type_oid == NUMERIC_OID and theirs.value is not None and ours.value is not None:
        return Decimal(theirs.value) == Decimal(ours.value)
    return theirs.value == ours.value


def main(arguments: Sequence[str]) -> int:
    dsn = os.environ.get("DPPROXY_TEST_PG_DSN", DEFAULT_PG_DSN)
    compared = compare(cases(), dsn)
    for sql, theirs, ours in compared:
        if "-v" in arguments or not theirs.same(ours):
            mark = "  " if theirs.same(ours) else ("~=" if same_value(theirs, ours) else "!=")
            print(
                f"{mark} {sql}\n     PostgreSQL: {theirs.shown()}\n     dpproxy:    {ours.shown()}"
            )
    total = len(compared)
    same = sum(theirs.same(ours) for _, theirs, ours in compared)
    valued = sum(same_value(theirs, ours) for _, theirs, ours in compared)
    print(
        f"{total} statements: {same} answered exactly as PostgreSQL ({100 * same / total:.1f}%: "
        f"value's text, type OID, SQLSTATE and message); {valued} with the same value, type "
        f"and SQLSTATE ({100 * valued / total:.1f}%)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
