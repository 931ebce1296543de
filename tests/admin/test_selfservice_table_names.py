"""dpproxy.my_budget and dpproxy.my_queries are refused wherever a statement reads them
other than whole, and only there: the same words in a string or a comment name nothing.

pandas' ``read_sql(sql, engine)`` first asks SQLAlchemy whether ``sql`` is a table's name:
a pg_class query with the whole text of ``sql`` as a string. dpproxy refused it, the
transaction was aborted, and the query itself then failed with InFailedSqlTransaction.
"""

from __future__ import annotations

import asyncio

import pytest

from proxy.asker import Asker
from proxy.responders import SessionContext
from proxy.seam import QueryError
from proxy.selfservice import SelfServiceResponder
from tests.admin.test_selfservice import BUDGET

#: SQLAlchemy 2's has_table, the name bound in the text as psycopg2 (or dpproxy's
#: stand-ins for $1) put it.
HAS_TABLE = (
    "SELECT pg_catalog.pg_class.relname FROM pg_catalog.pg_class JOIN pg_catalog.pg_namespace "
    "ON pg_catalog.pg_namespace.oid = pg_catalog.pg_class.relnamespace WHERE "
    "pg_catalog.pg_class.relname IN ('{}'::VARCHAR) AND pg_catalog.pg_class.relkind = ANY "
    "(ARRAY['r'::VARCHAR, 'p'::VARCHAR, 'f'::VARCHAR, 'v'::VARCHAR, 'm'::VARCHAR]) AND "
    "pg_catalog.pg_table_is_visible(pg_catalog.pg_class.oid) AND "
    "pg_catalog.pg_namespace.nspname != 'pg_catalog'::VARCHAR"
)

NOT_READING_THEM = [
    HAS_TABLE.format("SELECT * FROM dpproxy.my_budget"),
    HAS_TABLE.format("SELECT * FROM dpproxy.my_queries LIMIT 3"),
    "SELECT COUNT(*) FROM visits WHERE diagnosis <> 'dpproxy.my_queries'",
    "/* see dpproxy.my_budget */ SELECT COUNT(*) FROM patients",
    "SELECT COUNT(*) FROM patients -- not dpproxy.my_queries",
    "SELECT COUNT(*) FROM visits WHERE diagnosis = $$dpproxy.my_budget$$",
    "SELECT COUNT(*) FROM visits WHERE diagnosis = E'dpproxy.\\'my_budget'",
    'SELECT COUNT(*) FROM "dpproxy.my_budget"',  # one name, with a dot in it
    "EXPLAIN SELECT 'dpproxy.my_budget'",
    "SELECT COUNT(*) FROM visits WHERE diagnosis = 'dpproxy.my_budget' AND (",  # no parse
    "SELECT COUNT(*) FROM dpproxy_my_budget",
]

READING_THEM = [
    "SELECT sql FROM dpproxy.my_queries WHERE analyst = 'eve'",
    "SELECT COUNT(*) FROM dpproxy.my_budget",
    'SELECT * FROM "dpproxy"."my_queries" WHERE true',
    "SELECT * FROM DPPROXY.MY_BUDGET b JOIN visits v ON true",
    "SELECT COUNT(*) FROM visits v, dpproxy.my_budget b WHERE v.cost > 0",
    "SELECT COUNT(*) FROM visits WHERE diagnosis IN (SELECT sql FROM dpproxy.my_queries)",
    "WITH q AS (SELECT * FROM dpproxy.my_queries) SELECT COUNT(*) FROM q",
    "SELECT (SELECT epsilon_spent FROM dpproxy.my_budget)",
    "SELECT * FROM demo.dpproxy.my_budget",
    "SELECT dpproxy.my_budget.analyst FROM visits",
    "TABLE dpproxy.my_queries",
    "SELECT * FROM dpproxy . /* here */ my_budget LIMIT 1",
    "SELECT * FROM dpproxy.my_queries -- all of them",
    "/* mine */ SELECT * FROM dpproxy.my_budget",
    "SELECT * FROM dpproxy.my_queries; SELECT 1",
    "COPY (SELECT * FROM dpproxy.my_queries) TO STDOUT",
    "EXPLAIN SELECT * FROM dpproxy.my_budget",
    "DECLARE c CURSOR FOR SELECT * FROM dpproxy.my_queries",
    "PREPARE p AS SELECT * FROM dpproxy.my_budget",
    "SELECT * FROM dpproxy.my_queries WHERE (",  # sqlglot cannot read it: its words
    "SELECT * FROM dpproxy.my_queries WHERE x = 'unclosed",  # nor split it into words
]


def answer(sql: str) -> object:
    asker = Asker(analyst="bob", budget=BUDGET, address="127.0.0.1")
    context = SessionContext(asker, "demo", {}, catalog=None, ledger=None)  # type: ignore[arg-type]
    return asyncio.run(SelfServiceResponder().answer(sql, context))


@pytest.mark.parametrize("sql", NOT_READING_THEM)
def test_words_in_strings_and_comments_name_nothing(sql: str) -> None:
    assert answer(sql) is None  # for the catalog or the rewriter, as any other query


@pytest.mark.parametrize("sql", READING_THEM)
def test_reading_them_other_than_whole_is_refused(sql: str) -> None:
    with pytest.raises(QueryError, match="can only be read whole"):
        answer(sql)
