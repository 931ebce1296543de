"""What dataframe libraries send, through a real `dpproxy serve`, with psycopg.

- pandas' ``read_sql(sql, engine)`` asks SQLAlchemy's ``has_table(sql)`` first (a pg_class
  query with the text of ``sql`` as a parameter), then runs ``sql`` in the same
  transaction: dpproxy refused the first when the text named ``dpproxy.my_budget``, and
  the second then failed with InFailedSqlTransaction.
- ADBC's PostgreSQL driver (polars' ``engine="adbc"``) reads pg_type's types with a
  binary receive function on connecting: it failed with 22P02 (``typreceive != 0`` of
  ``-``).
- connectorx (polars' ``read_database_uri``) and ADBC read answers with a binary COPY,
  which dpproxy refuses: the hint says how to ask otherwise.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from proxy.catalog.pgtypes import TYPES
from tests.integration.server import RunningServer, fresh_demo_server
from tests.proxy.test_catalog_regproc import ADBC_TYPE_QUERY

pytestmark = pytest.mark.integration

#: SQLAlchemy 2's has_table as psycopg 3 sends it (the values as parameters).
HAS_TABLE = (
    "SELECT pg_catalog.pg_class.relname FROM pg_catalog.pg_class JOIN pg_catalog.pg_namespace "
    "ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace WHERE "
    "pg_catalog.pg_class.relname IN (%(table_names_1)s::VARCHAR) AND "
    "pg_catalog.pg_class.relkind = ANY (ARRAY[%(param_1)s::VARCHAR, %(param_2)s::VARCHAR, "
    "%(param_3)s::VARCHAR, %(param_4)s::VARCHAR, %(param_5)s::VARCHAR]) AND "
    "pg_catalog.pg_table_is_visible(pg_catalog.pg_class.oid) AND "
    "pg_catalog.pg_namespace.nspname != %(nspname_1)s::VARCHAR"
)
KINDS = {"param_1": "r", "param_2": "p", "param_3": "f", "param_4": "v", "param_5": "m"}
READ_SQL = [
    "SELECT * FROM dpproxy.my_budget",
    "SELECT * FROM dpproxy.my_queries LIMIT 3",
    "SELECT COUNT(*) FROM visits WHERE diagnosis <> 'dpproxy.my_queries'",
    "/* see dpproxy.my_budget */ SELECT COUNT(*) FROM patients",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with fresh_demo_server(tmp_path_factory, "dataframe-clients", patients=200) as running:
        yield running


def read_sql(conn: psycopg.Connection[tuple[object, ...]], sql: str) -> list[tuple[object, ...]]:
    """What pandas' read_sql does over SQLAlchemy: has_table(sql), then sql."""
    cursor = conn.cursor()
    cursor.execute(HAS_TABLE, {"table_names_1": sql, "nspname_1": "pg_catalog", **KINDS})
    assert cursor.fetchall() == []
    return cursor.execute(sql).fetchall()


@pytest.mark.parametrize("client_side", [False, True], ids=["psycopg", "psycopg2-like"])
def test_pandas_read_sql(server: RunningServer, client_side: bool) -> None:
    cursor_factory = psycopg.ClientCursor if client_side else psycopg.Cursor
    with psycopg.connect(server.dsn("alice"), cursor_factory=cursor_factory) as conn:
        budget, queries, visits, patients = (read_sql(conn, sql) for sql in READ_SQL)
        conn.rollback()  # as SQLAlchemy's connection at its end
    assert [len(budget), len(visits), len(patients)] == [1, 1, 1]
    assert budget[0][0] == "alice"
    assert len(queries) <= 3


def test_reading_them_in_a_query_is_still_refused(server: RunningServer) -> None:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        for sql in (
            "SELECT COUNT(*) FROM visits v JOIN dpproxy.my_budget b ON true",
            "WITH q AS (SELECT * FROM dpproxy.my_queries) SELECT COUNT(*) FROM q",
        ):
            with pytest.raises(psycopg.errors.FeatureNotSupported, match="read whole"):
                conn.execute(sql)


def test_adbc_type_query(server: RunningServer, pg_dsn: str) -> None:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        ours = conn.execute(f"{ADBC_TYPE_QUERY} ORDER BY oid").fetchall()
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        theirs = conn.execute(
            "SELECT oid::int, typname::text, typreceive::text, typbasetype::int, "
            f"typrelid::int, typarray::int FROM ({ADBC_TYPE_QUERY}) t WHERE oid = ANY(%s) "
            "ORDER BY oid",
            [list(TYPES)],
        ).fetchall()
    assert ours == theirs
    assert (23, "int4", "int4recv", 0, 0, 1007) in ours


@pytest.mark.parametrize(
    "copy",
    [
        "COPY (SELECT COUNT(*) FROM visits) TO STDOUT (FORMAT binary)",  # ADBC's
        "COPY (SELECT COUNT(*) FROM visits) TO STDOUT WITH BINARY",  # connectorx's
    ],
)
def test_binary_copy_hint_says_how_to_ask_otherwise(server: RunningServer, copy: str) -> None:
    with (
        psycopg.connect(server.dsn("alice"), autocommit=True) as conn,
        pytest.raises(psycopg.errors.FeatureNotSupported) as raised,
        conn.cursor().copy(copy) as reading,
    ):
        reading.read()
    error = raised.value.diag
    assert error.message_primary == "dpproxy does not write COPY's binary format"
    hint = error.message_hint or ""
    assert 'protocol="cursor" or "csv"' in hint
    assert '"adbc.postgresql.use_copy": "false"' in hint
    assert "FORMAT csv" in hint
