"""Clauses the rewriter does not carry into its SQL are refused, never dropped (issue #3).

Each pass rebuilds the query from the parts it understands (tables, joins, WHERE, the select
list, a GROUP BY on the person). A clause it dropped would get the analyst an answer to
another question than the SQL asks: a HAVING, LIMIT or TABLESAMPLE inside a subquery changes
which rows are counted, a column list in an alias renames columns. Most of the queries
below were answered as if the clause were not there before the fix; all must be refused
with a message naming the clause and a hint saying what to write instead. The checks
compare the arguments set on a node with an allowlist, so an argument a later sqlglot adds
is refused too (the last tests set one by hand).
"""

from __future__ import annotations

import pytest
from sqlglot import exp

from rewriter import PlanRequest, Rejected, plan
from rewriter.parse import parse_statement
from rewriter.passes.check_shape import check_shape, sources
from rewriter.passes.subqueries import expand_subqueries
from rewriter.passes.where_subqueries import WhereSubqueries
from tests.rewriter.tables import SAMPLE_ROWS, catalog, duckdb_with

CATALOG = catalog("main")


def rejected(sql: str) -> Rejected:
    with pytest.raises(Rejected) as caught:
        plan(sql, CATALOG, PlanRequest(1.0))
    return caught.value


# (query, words in the message, words in the hint)
DROPPED_BEFORE = [
    # HAVING inside a row-level FROM subquery or CTE: it was planned as if absent.
    (
        "SELECT COUNT(*) FROM (SELECT * FROM visits WHERE cost > 1 HAVING COUNT(*) > 1) s",
        "HAVING inside a subquery in FROM",
        "WHERE s.n",
    ),
    (
        "SELECT COUNT(*) FROM (SELECT 1 AS one FROM visits HAVING COUNT(*) > 100) s",
        "HAVING inside a subquery in FROM",
        "outer query",
    ),
    (
        "WITH s AS (SELECT * FROM visits HAVING visit_id > 1) SELECT COUNT(*) FROM s",
        "HAVING inside a subquery in FROM",
        "WHERE",
    ),
    (
        "SELECT COUNT(*) FROM visits WHERE patient_id IN "
        "(SELECT patient_id FROM (SELECT * FROM patients HAVING patient_id > 1) p)",
        "HAVING inside a subquery in FROM",
        "WHERE",
    ),
    # TABLESAMPLE: in a subquery in WHERE, in FROM, on a join, on a CTE or a subquery.
    (
        "SELECT COUNT(*) FROM visits WHERE patient_id IN "
        "(SELECT patient_id FROM visits TABLESAMPLE 10%)",
        'TABLESAMPLE on table "visits"',
        "all the rows",
    ),
    (
        "SELECT COUNT(*) FROM visits v WHERE EXISTS (SELECT 1 FROM patients p "
        "TABLESAMPLE SYSTEM (5) WHERE p.patient_id = v.patient_id)",
        'TABLESAMPLE on table "patients"',
        "all the rows",
    ),
    (
        "SELECT COUNT(*) FROM visits WHERE department IN (SELECT d.name FROM departments d "
        "JOIN departments e TABLESAMPLE SYSTEM (1) ON d.name = e.name)",
        'TABLESAMPLE on table "departments"',
        "all the rows",
    ),
    (
        "SELECT COUNT(*) FROM (SELECT * FROM visits TABLESAMPLE SYSTEM (10)) s",
        'TABLESAMPLE on table "visits"',
        "all the rows",
    ),
    (
        "SELECT COUNT(*) FROM (SELECT * FROM visits) s TABLESAMPLE SYSTEM (10)",
        'TABLESAMPLE on subquery "s"',
        "all the rows",
    ),
    (
        "WITH s AS (SELECT * FROM visits) SELECT COUNT(*) FROM s TABLESAMPLE SYSTEM (10)",
        'TABLESAMPLE on table "s"',
        "all the rows",
    ),
    (
        "SELECT COUNT(*) FROM visits TABLESAMPLE BERNOULLI (10)",
        'TABLESAMPLE on table "visits"',
        "all the rows",
    ),
    (
        "SELECT COUNT(*) FROM visits v JOIN patients p TABLESAMPLE SYSTEM (1) "
        "ON v.patient_id = p.patient_id",
        'TABLESAMPLE on table "patients"',
        "all the rows",
    ),
    # A column list in an alias renames columns by position: s(cost, patient_id) swaps them.
    (
        "SELECT SUM(s.cost) FROM (SELECT patient_id, cost FROM visits) s(cost, patient_id)",
        "the column list in s(cost, patient_id)",
        "AS x",
    ),
    (
        "WITH s(cost, patient_id) AS (SELECT patient_id, cost FROM visits) SELECT SUM(cost) FROM s",
        "the column list in s(cost, patient_id)",
        "AS x",
    ),
    (
        "WITH s AS (SELECT * FROM visits) SELECT COUNT(*) FROM s AS t(a, b)",
        "the column list in t(a, b)",
        "AS x",
    ),
    ("SELECT COUNT(*) FROM (SELECT * FROM visits v(a, b)) s", "the column list in v(a, b)", "AS"),
    ("SELECT COUNT(*) FROM visits v(a, b)", "the column list in v(a, b)", "AS"),
    (
        "SELECT COUNT(*) FROM visits WHERE patient_id IN (SELECT patient_id FROM patients p(a))",
        "the column list in p(a)",
        "AS",
    ),
    # Other clauses on a table.
    ("SELECT COUNT(*) FROM (SELECT * FROM ONLY visits) s", 'ONLY on table "visits"', "alone"),
    (
        "SELECT COUNT(*) FROM visits WHERE patient_id IN (SELECT patient_id FROM ONLY patients)",
        'ONLY on table "patients"',
        "alone",
    ),
    # * REPLACE / EXCLUDE change what a row-level subquery's star selects.
    (
        "SELECT SUM(cost) FROM (SELECT * REPLACE (cost / 2 AS cost) FROM visits) s",
        "* REPLACE in a subquery in FROM",
        "a subquery in FROM is SELECT",
    ),
    (
        "SELECT SUM(s.cost) FROM (SELECT v.* EXCLUDE (stay) FROM visits v) s",
        "* EXCEPT / EXCLUDE in a subquery in FROM",
        "a subquery in FROM is SELECT",
    ),
    # WITH ROLLUP adds a total row: the per-person subquery read its GROUP BY keys alone.
    (
        "SELECT AVG(n) FROM (SELECT patient_id, COUNT(*) AS n FROM visits "
        "GROUP BY patient_id WITH ROLLUP) s",
        "ROLLUP inside a subquery in FROM",
        "one query per grouping",
    ),
    # A per-person aggregate rebuilt from its first argument would lose the others.
    (
        "SELECT AVG(n) FROM (SELECT patient_id, MAX(cost, stay) AS n FROM visits "
        "GROUP BY patient_id) s",
        "MAX with more than one argument",
        "one argument",
    ),
    # Top level: FETCH and LIMIT … PERCENT were dropped, GROUP BY ALL too.
    (
        "SELECT department, COUNT(*) FROM visits GROUP BY department FETCH FIRST 1 ROWS ONLY",
        "FETCH FIRST … ROWS is not supported",
        "LIMIT n",
    ),
    (
        "SELECT department, COUNT(*) FROM visits GROUP BY department LIMIT 50 PERCENT",
        "LIMIT … PERCENT / WITH TIES is not supported",
        "LIMIT n",
    ),
    ("SELECT COUNT(*) FROM visits GROUP BY ALL", "GROUP BY ALL is not supported", "GROUP BY a"),
    (
        "SELECT department, COUNT(*) FROM visits GROUP BY ALL department",
        "GROUP BY ALL is not supported",
        "GROUP BY a",
    ),
    # A window function in a row-level subquery's column that the query does not use.
    (
        "SELECT COUNT(*) FROM (SELECT patient_id, ROW_NUMBER() OVER (PARTITION BY patient_id) "
        "AS r FROM visits) s",
        "window functions are not supported",
        "SELECT",
    ),
    # A semi or anti join filters rows: it was run as a LEFT JOIN.
    (
        "SELECT COUNT(*) FROM visits v LEFT SEMI JOIN departments d ON v.department = d.name",
        "LEFT SEMI JOIN is not supported",
        "IN (SELECT",
    ),
    (
        "SELECT COUNT(*) FROM visits v LEFT ANTI JOIN departments d ON v.department = d.name",
        "LEFT ANTI JOIN is not supported",
        "EXISTS",
    ),
]


@pytest.mark.parametrize(("sql", "words", "hint"), DROPPED_BEFORE)
def test_clauses_once_dropped_are_refused(sql: str, words: str, hint: str) -> None:
    error = rejected(sql)
    assert error.sqlstate == "0A000"
    assert words in error.message, error.message
    assert error.hint is not None and hint in error.hint, error.hint


# Refused before too; the message now names the clause and where it is.
NAMED = [
    ("(SELECT * FROM visits ORDER BY cost LIMIT 2)", "LIMIT", "keeps only some"),
    ("(SELECT * FROM visits ORDER BY cost)", "ORDER BY", "does not change"),
    ("(SELECT * FROM visits FETCH FIRST 2 ROWS ONLY)", "FETCH FIRST … ROWS", "some of its rows"),
    ("(SELECT * FROM visits OFFSET 2)", "OFFSET", "skips"),
    ("(SELECT DISTINCT patient_id FROM visits)", "SELECT DISTINCT", "COUNT(DISTINCT"),
    ("(SELECT DISTINCT ON (patient_id) * FROM visits)", "SELECT DISTINCT", "COUNT(DISTINCT"),
    ("(SELECT * FROM visits WINDOW w AS (ORDER BY cost))", "WINDOW", "window functions"),
    ("(SELECT * FROM visits QUALIFY ROW_NUMBER() OVER () = 1)", "QUALIFY", "window functions"),
    ("(SELECT * FROM visits FOR UPDATE)", "FOR UPDATE/SHARE", "a subquery in FROM is"),
    ("(SELECT * FROM visits USING SAMPLE 10%)", "USING SAMPLE", "all the rows"),
    (
        "(SELECT patient_id, COUNT(*) AS n FROM visits GROUP BY patient_id HAVING COUNT(*) > 1)",
        "HAVING",
        "WHERE s.n",
    ),
    (
        "(SELECT patient_id, COUNT(*) AS n FROM visits GROUP BY patient_id LIMIT 1)",
        "LIMIT",
        "keeps only some",
    ),
    ("(SELECT patient_id, COUNT(*) AS n FROM visits GROUP BY ALL)", "GROUP BY ALL", "GROUP BY a"),
]


@pytest.mark.parametrize(("subquery", "clause", "hint"), NAMED)
def test_clauses_inside_a_from_subquery_are_named(subquery: str, clause: str, hint: str) -> None:
    for sql in (
        f"SELECT COUNT(*) FROM {subquery} s",
        f"WITH s AS {subquery} SELECT COUNT(*) FROM s",
    ):
        error = rejected(sql)
        assert error.message == f"{clause} inside a subquery in FROM is not supported", sql
        assert error.hint is not None and hint in error.hint, error.hint


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        (
            "SELECT COUNT(*) FROM ((SELECT * FROM visits) LIMIT 5) s",
            "LIMIT on a parenthesized subquery in FROM",
        ),
        (
            "SELECT COUNT(*) FROM visits WHERE patient_id IN "
            "((SELECT patient_id FROM patients) LIMIT 1)",
            "LIMIT on a parenthesized subquery in WHERE",
        ),
        (
            "SELECT COUNT(*) FROM visits WHERE patient_id IN "
            "(SELECT patient_id FROM visits USING SAMPLE 10%)",
            "USING SAMPLE inside a subquery in WHERE",
        ),
        (
            "SELECT COUNT(*) FROM visits WHERE patient_id IN "
            "(SELECT patient_id FROM patients FETCH FIRST 1 ROWS ONLY)",
            "FETCH FIRST … ROWS inside a subquery in WHERE",
        ),
        (
            "SELECT COUNT(*) FROM visits WHERE patient_id IN "
            "(SELECT DISTINCT ON (patient_id) patient_id FROM patients)",
            "DISTINCT ON inside a subquery in WHERE",
        ),
        (
            "SELECT COUNT(*) FROM visits WHERE patient_id IN "
            "(SELECT patient_id FROM patients ORDER BY 1)",
            "ORDER BY inside a subquery in WHERE",
        ),
        ("SELECT COUNT(*) FROM visits USING SAMPLE 10%", "USING SAMPLE is not supported yet"),
        (
            "SELECT AVG(n) FROM (SELECT patient_id, COUNT(*) AS n FROM visits "
            "GROUP BY ROLLUP (patient_id)) s",
            "ROLLUP is not supported in GROUP BY",
        ),
        (
            "SELECT department, COUNT(*) FROM visits GROUP BY department WITH ROLLUP",
            "ROLLUP is not supported yet",
        ),
        (
            "SELECT COUNT(*) FROM visits v SEMI JOIN departments d ON v.department = d.name",
            "SEMI JOIN is not supported",
        ),
    ],
)
def test_other_places_name_the_clause(sql: str, words: str) -> None:
    error = rejected(sql)
    assert error.sqlstate == "0A000"
    assert words in error.message, error.message
    assert error.hint


@pytest.mark.parametrize(
    ("sql", "same_as"),
    [
        # Extra parentheses around a subquery change nothing.
        (
            "SELECT COUNT(*) FROM ((SELECT stay FROM visits WHERE cost > 1)) s",
            "SELECT COUNT(*) FROM (SELECT stay FROM visits WHERE cost > 1) s",
        ),
        (
            "SELECT COUNT(*) FROM visits WHERE patient_id IN ((SELECT patient_id FROM patients))",
            "SELECT COUNT(*) FROM visits WHERE patient_id IN (SELECT patient_id FROM patients)",
        ),
        # [NOT] MATERIALIZED is a plan hint: the rows are the same.
        (
            "WITH s AS MATERIALIZED (SELECT stay FROM visits) SELECT COUNT(*) FROM s",
            "WITH s AS (SELECT stay FROM visits) SELECT COUNT(*) FROM s",
        ),
        (
            "WITH s AS NOT MATERIALIZED (SELECT stay FROM visits) SELECT COUNT(*) FROM s",
            "WITH s AS (SELECT stay FROM visits) SELECT COUNT(*) FROM s",
        ),
        # DISTINCT changes neither what IN finds nor whether EXISTS finds a row.
        (
            "SELECT COUNT(*) FROM visits WHERE patient_id IN "
            "(SELECT DISTINCT patient_id FROM patients)",
            "SELECT COUNT(*) FROM visits WHERE patient_id IN (SELECT patient_id FROM patients)",
        ),
        # GROUP BY DISTINCT a is GROUP BY a; LEFT OUTER JOIN is LEFT JOIN.
        (
            "SELECT department, COUNT(*) FROM visits GROUP BY DISTINCT department",
            "SELECT department, COUNT(*) FROM visits GROUP BY department",
        ),
        (
            "SELECT COUNT(*) FROM visits v LEFT OUTER JOIN departments d ON v.department = d.name",
            "SELECT COUNT(*) FROM visits v LEFT JOIN departments d ON v.department = d.name",
        ),
    ],
)
def test_forms_without_effect_plan_as_their_plain_form(sql: str, same_as: str) -> None:
    assert plan(sql, CATALOG, PlanRequest(1.0)).sql == plan(same_as, CATALOG, PlanRequest(1.0)).sql


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*), AVG(days) FROM (SELECT stay AS days FROM visits WHERE cost > 0) s",
        "WITH s AS (SELECT v.patient_id, d.floor FROM visits v JOIN departments d "
        "ON v.department = d.name) SELECT COUNT(*) FROM s WHERE s.floor = 1",
        "SELECT AVG(n) FROM (SELECT patient_id, COUNT(*) AS n FROM visits "
        "WHERE cost > 1 GROUP BY patient_id) s WHERE s.n > 1",
        "SELECT COUNT(*) FROM visits v WHERE EXISTS (SELECT 1 FROM patients p "
        "WHERE p.patient_id = v.patient_id AND p.birth_year < 1990)",
        "SELECT department, COUNT(*) FROM visits GROUP BY department ORDER BY 2 DESC LIMIT 1 "
        "OFFSET 1",
    ],
)
def test_supported_forms_still_plan_and_run(sql: str) -> None:
    made = plan(sql, CATALOG, PlanRequest(1.0))
    assert duckdb_with(SAMPLE_ROWS).execute(made.sql).fetchall()


# Fail closed: an argument no pass knows (as a later sqlglot may add) is refused, not
# dropped. sqlglot's generator itself ignores an unknown argument, so it would vanish.
FUTURE = "future_clause"


def _with_unknown_arg(sql: str, pick: type[exp.Expr], index: int = 0) -> exp.Expr:
    tree = parse_statement(sql)
    node = list(tree.find_all(pick))[index]
    node.set(FUTURE, exp.Literal.number(1))
    assert FUTURE.upper() not in tree.sql().upper()  # dropped if nobody checked it
    return tree


@pytest.mark.parametrize(
    ("sql", "pick", "index"),
    [
        ("SELECT COUNT(*) FROM (SELECT stay FROM visits) s", exp.Select, 1),
        ("SELECT COUNT(*) FROM (SELECT stay FROM visits) s", exp.Subquery, 0),
        ("WITH s AS (SELECT stay FROM visits) SELECT COUNT(*) FROM s", exp.CTE, 0),
        ("SELECT COUNT(*) FROM (SELECT stay FROM visits) s", exp.Table, 0),
        ("SELECT COUNT(*) FROM (SELECT stay FROM visits WHERE cost > 1) s", exp.Where, 0),
        (
            "SELECT AVG(n) FROM (SELECT patient_id, COUNT(*) AS n FROM visits "
            "GROUP BY patient_id) s",
            exp.Group,
            0,
        ),
    ],
)
def test_unknown_arguments_of_from_subqueries_are_refused(
    sql: str, pick: type[exp.Expr], index: int
) -> None:
    tree = _with_unknown_arg(sql, pick, index)
    with pytest.raises(Rejected, match="FUTURE_CLAUSE"):
        expand_subqueries(tree, CATALOG)


@pytest.mark.parametrize(
    ("pick", "index"),
    [(exp.Select, 0), (exp.Table, 0), (exp.Join, 0), (exp.Group, 0), (exp.Limit, 0)],
)
def test_unknown_arguments_of_the_query_are_refused(pick: type[exp.Expr], index: int) -> None:
    tree = _with_unknown_arg(
        "SELECT department, COUNT(*) FROM visits v JOIN patients p "
        "ON v.patient_id = p.patient_id GROUP BY department LIMIT 2",
        pick,
        index,
    )
    with pytest.raises(Rejected, match="FUTURE_CLAUSE"):
        check_shape(tree, CATALOG)


@pytest.mark.parametrize(("pick", "index"), [(exp.Select, 1), (exp.Table, 1), (exp.In, 0)])
def test_unknown_arguments_of_where_subqueries_are_refused(
    pick: type[exp.Expr], index: int
) -> None:
    tree = _with_unknown_arg(
        "SELECT COUNT(*) FROM visits WHERE patient_id IN (SELECT patient_id FROM patients)",
        pick,
        index,
    )
    assert isinstance(tree, exp.Select)
    scope, _ = sources(tree, CATALOG)
    check = WhereSubqueries(CATALOG, expand_subqueries)
    node = tree.find(exp.In)
    assert node is not None
    with pytest.raises(Rejected, match="FUTURE_CLAUSE"):
        check(node, scope, "WHERE")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(visit_id, stay) FROM visits",
        "SELECT COUNT(*) FROM (SELECT patient_id, COUNT(visit_id, stay) AS n FROM visits "
        "GROUP BY patient_id) s",
    ],
)
def test_an_aggregate_with_a_second_argument_is_refused(sql: str) -> None:
    """COUNT(a, b) was answered as COUNT(a); PostgreSQL itself refuses it."""
    message = str(rejected(sql))
    assert "takes exactly one argument" in message or "more than one argument" in message
