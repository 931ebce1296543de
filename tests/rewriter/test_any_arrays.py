"""x op ANY / ALL (array of constants) (rewriter.passes.any_arrays): what psycopg 3 sends for
a Python list (``= ANY(%s)``, bound by dpproxy as ``'{A,B}'``) and psycopg2 writes
(``= ANY(ARRAY['A','B'])``), answered as PostgreSQL answers it, on both engines: in WHERE,
as a GROUP BY condition (true, false and NULL told apart), in FILTER and inside an
aggregate. The quoted array is read as PostgreSQL 15's array input reads it (compared
with PostgreSQL's own reading); forms dpproxy does not read are refused."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewriter import ColumnType, PlanRequest, Rejected, TablePolicy, build_catalog, plan
from rewriter.passes.any_arrays import parse_array
from tests.rewriter.driver_sql import Engines, catalog, engines


@pytest.fixture(scope="module")
def notes(pg_dsn: str) -> Iterator[Engines]:
    with engines(pg_dsn) as found:
        yield found


PREDICATES = [
    # A quoted array without a type (psycopg 3's list): read as an array of x's type.
    "code = ANY('{A,B}')",
    "code = ANY('{A,NULL}')",
    "code <> ALL('{A,B}')",
    "code <> ALL('{A,NULL}')",
    "code = ANY('{}')",
    "code <> ALL('{}')",
    'code = ANY(\'{"A", " B ", Ü}\')',
    "code = ANY(' { \"B\" , A } ')",
    "NOT code = ANY('{A}')",
    "stay = ANY('{1, 2}')",
    "stay >= ALL('{0,1}')",
    "stay < ANY('{ -4 , 0 }')",
    "name LIKE ALL('{%a%,%n%}')",
    "name ILIKE ANY('{j%,\"% \"}')",
    "name LIKE ANY('{}')",
    "day = ANY('{2024-01-02,2020-02-29}')",
    "flag = ANY('{t}')",
    # Typed arrays: ARRAY[…] and casts.
    "code = ANY(ARRAY['A', 'B'])",
    "code = SOME(ARRAY['A', NULL])",
    "code <> ALL(ARRAY['A', NULL])",
    "code <> ALL(ARRAY['A', 'B'])",
    "code = ANY(ARRAY[]::text[])",
    "code <> ALL(ARRAY[]::varchar[])",
    "code = ANY('{A,B}'::text[])",
    "code = ANY('{A,B}'::varchar[])",
    "code = ANY(ARRAY['A', 'B']::varchar[])",
    "code = ANY(ARRAY['A'::varchar, 'B'])",
    "stay = ANY(ARRAY[1, 2])",
    "stay = ANY(ARRAY[1, 2.5, -4])",
    "stay > ANY(ARRAY[1, 5])",
    "stay < ALL(ARRAY[3, NULL])",
    "stay = ANY('{1,2}'::int[])",
    "stay <> ALL('{0, 2}'::bigint[])",
    "stay = ALL(ARRAY[2, 2])",
    "cost = ANY(ARRAY[2.5, 0])",
    "name LIKE ANY(ARRAY['A%', '%r%'])",
    "name NOT LIKE ANY(ARRAY['A%', 'J%'])",
    "name NOT ILIKE ALL(ARRAY['a%', 'j%'])",
    "flag = ANY(ARRAY[TRUE])",
    "day = ANY('{2024-01-02}'::date[])",
    # An array cast to another array type (psycopg 3 binds a list of small integers as
    # '{…}'::int2[], and the query casts it: = ANY(%s::int[])): element by element.
    "stay = ANY('{1,2,3}'::smallint[]::int[])",
    "stay <> ALL(CAST(CAST('{1,NULL}' AS smallint[]) AS bigint[]))",
    "cost = ANY('{2.5,0}'::numeric[]::float8[])",
    "code = ANY('{A,B}'::varchar[]::text[])",
    "day = ANY(ARRAY['2024-01-02']::text[]::date[])",
    "stay = ANY(ARRAY[]::int[]::bigint[])",
    "stay = ANY(NULL::smallint[]::int[])",
    "(code = ANY('{A}')) = ANY(ARRAY[TRUE, NULL])",
    # A NULL array: NULL whatever x (no row in WHERE; NULL as a condition key).
    "stay = ANY(NULL)",
    "stay <> ALL(NULL)",
    "stay = ANY(NULL::int[])",
    "stay <> ALL(CAST(NULL AS bigint[]))",
    "code = SOME((NULL))",
    "name LIKE ANY(NULL)",
    "name NOT ILIKE ALL(NULL::text[])",
    "day > ANY(NULL)",
    "NOT (stay = ANY(NULL))",
    "(stay = ANY(NULL)) IS NULL",
]


@pytest.mark.parametrize("predicate", PREDICATES)
def test_where_is_what_postgresql_computes(predicate: str, notes: Engines) -> None:
    sql = f"SELECT COUNT(*) FROM notes WHERE {predicate}"
    on_duck, on_pg = notes.released(sql, delta=0.0)
    assert on_duck == on_pg == notes.native(sql)


@pytest.mark.parametrize("predicate", PREDICATES)
def test_a_condition_key_is_true_false_or_null_as_in_postgresql(
    predicate: str, notes: Engines
) -> None:
    sql = f"SELECT {predicate} AS k, COUNT(*) FROM notes GROUP BY 1"
    on_duck, on_pg = notes.released(sql, delta=0.0)  # a condition has a public domain
    assert on_duck == on_pg
    # The domain's empty cells are released too (a count of 0 without noise).
    assert {k: n for k, n in on_duck if n} == dict(notes.native(sql))


def test_in_filter_and_inside_aggregates(notes: Engines) -> None:
    sql = (
        "SELECT SUM(CASE WHEN code = ANY('{A,B}') THEN stay END), "
        "COUNT(*) FILTER (WHERE stay = ANY(ARRAY[1, 2])), "
        "COUNT(*) FILTER (WHERE name NOT LIKE ALL('{A%,J%}')) FROM notes"
    )
    on_duck, on_pg = notes.released(sql, delta=0.0)
    assert on_duck == on_pg == notes.native(sql)


def test_a_bound_list_is_the_in_list_written_by_hand() -> None:
    """The same SQL as x IN (…): the same question, answered from the cache when asked
    both ways."""
    made = plan(
        "SELECT COUNT(*) FROM notes WHERE code = ANY('{A,B}') AND stay <> ALL('{1,2}')",
        catalog("main"),
        PlanRequest(1.0),
    )
    written = plan(
        "SELECT COUNT(*) FROM notes WHERE code IN ('A', 'B') AND NOT stay IN ('1', '2')",
        catalog("main"),
        PlanRequest(1.0),
    )
    assert made.sql == written.sql


@pytest.mark.postgres
def test_a_char_column_compares_as_the_array_s_element_type(pg_dsn: str, pg_schema: str) -> None:
    """A char(3) column (the catalog's TEXT) compared with an array of text compares as
    text (trailing spaces count), with a quoted array without a type as char (they do
    not). ``IN`` of the same texts would compare as char: dpproxy writes an OR of
    comparisons instead."""
    table = build_catalog(
        {"chars": {"patient_id": ColumnType.INTEGER, "c": ColumnType.TEXT}},
        {"chars": TablePolicy(privacy_unit="patient_id", max_rows_per_unit=1)},
        schema=pg_schema,
    )
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'SET search_path = "{pg_schema}"')
        conn.execute("CREATE TABLE chars (patient_id BIGINT, c CHAR(3))")
        conn.execute("INSERT INTO chars VALUES (1, 'A'), (2, 'B'), (3, 'A  '), (4, NULL)")
        assert conn.execute(
            "SELECT COUNT(*) FROM chars WHERE c IN ('A '::text, 'B')"
        ).fetchone() == (3,)
        for predicate, expected in [
            ("c = ANY(ARRAY['A ', 'B'])", 1),
            ("c = ANY('{\"A \",B}')", 3),
            ("c = ANY(ARRAY['A ', 'B']::varchar[])", 3),
            ("c <> ALL(ARRAY['A '])", 3),
            ("c LIKE ANY(ARRAY['A  ', 'x%'])", 2),
        ]:
            sql = f"SELECT COUNT(*) FROM chars WHERE {predicate}"
            made = plan(sql, table, PlanRequest(1.0, "postgres"))
            assert conn.execute(sql).fetchone() == (expected,), predicate
            assert conn.execute(made.sql.encode()).fetchone() == (expected,), predicate


# ---------------------------------------------------------------------------------------
# The quoted array, read as PostgreSQL reads it

ARRAY_TEXTS = [
    "{}",
    " { } ",
    "{a}",
    "{a,b}",
    "{ a , b }",
    "{a b,c}",
    '{"a b",c}',
    '{"",x}',
    '{"a,b","c}d"}',
    '{"a\\"b","c\\\\d"}',
    "{a\\,b}",
    "{a\\ }",
    "{\\ a}",
    "{NULL}",
    "{null,NuLl}",
    '{"NULL"}',
    "{N\\ULL}",
    "{NULLx}",
    "{é,😀}",
    "{a\tb\n}",
    # Malformed, as for PostgreSQL: refused.
    "",
    "a",
    "{",
    "{a",
    "{a,}",
    "{,a}",
    "{a,,b}",
    '{a"b"}',
    '{"a"b}',
    "{a}x",
    "{a}}",
    '{"a}',
    "{a\\}",
    # Several dimensions, which dpproxy does not read.
    "{{a,b},{c,d}}",
    "[1:2]={a,b}",
    "{a{b}}",
]


def _postgres_reading(conn: psycopg.Connection[tuple[object, ...]], text: str) -> object:
    """PostgreSQL's elements of ``text`` as a text[], or None if it refuses it."""
    try:
        with conn.transaction():
            row = conn.execute("SELECT %s::text[]", (text,)).fetchone()
    except psycopg.errors.DataError:
        return None
    return None if row is None else row[0]


def _ours(text: str) -> list[str | None] | None:
    try:
        return parse_array(text)
    except Rejected as rejection:
        assert rejection.sqlstate == "22P02"
        return None


def _agrees(conn: psycopg.Connection[tuple[object, ...]], text: str) -> None:
    theirs = _postgres_reading(conn, text)
    ours = _ours(text)
    if ours is not None:
        assert ours == theirs, text
    else:
        # Refused: PostgreSQL refuses it too, or reads several dimensions.
        assert theirs is None or any(isinstance(e, list) for e in theirs) or "[" in text, text


@pytest.fixture(scope="module")
def reader(pg_dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(pg_dsn) as conn:
        yield conn


@pytest.mark.postgres
@pytest.mark.parametrize("text", ARRAY_TEXTS)
def test_array_texts_are_read_as_postgresql_reads_them(
    text: str, reader: psycopg.Connection[tuple[object, ...]]
) -> None:
    _agrees(reader, text)


@pytest.mark.postgres
@settings(max_examples=400, deadline=None)
@given(text=st.text(alphabet='{},"\\ aN UL\t', max_size=12).map(lambda s: "{" + s))
def test_any_array_text_is_read_as_postgresql_reads_it(
    text: str, reader: psycopg.Connection[tuple[object, ...]]
) -> None:
    _agrees(reader, text)


# ---------------------------------------------------------------------------------------
# Refused


@pytest.mark.parametrize(
    ("predicate", "words", "sqlstate"),
    [
        ("code = ANY('{A')", "malformed array literal", "22P02"),
        ("code = ANY('{{A},{B}}')", "one dimension", "22P02"),
        ("code = ANY(ARRAY[])", "cannot determine type of empty array", "42P18"),
        ("code = ANY(ARRAY[code])", "whose elements are constants", "0A000"),
        ("stay = ANY(ARRAY[1, 'a'::text])", "of different types", "0A000"),
        ("code = ANY('{A}'::varchar(1)[])", "no length or precision", "0A000"),
        ("code = ANY('{A}'::text[][])", "one dimension", "0A000"),
        ("code = ANY(E'{A}')", "array of constants only", "0A000"),
        # A NULL pattern is refused, as LIKE NULL is.
        ("name LIKE ANY('{a%,NULL}')", "pattern of LIKE must be a quoted text", "0A000"),
        ("name NOT ILIKE ALL(ARRAY['a%', NULL])", "pattern of LIKE must be", "0A000"),
        # No array at all, as PostgreSQL refuses it.
        ("stay = ANY(5)", "requires array on right side", "42809"),
        ("stay = ANY(-5)", "requires array on right side", "42809"),
        ("flag = ANY(TRUE)", "requires array on right side", "42809"),
        ("stay = ANY(NULL::int)", "requires array on right side", "42809"),
        ("code = ANY('{A}'::text)", "requires array on right side", "42809"),
    ],
)
def test_forms_not_read_are_refused(predicate: str, words: str, sqlstate: str) -> None:
    with pytest.raises(Rejected, match=words) as caught:
        plan(f"SELECT COUNT(*) FROM notes WHERE {predicate}", catalog("main"), PlanRequest(1.0))
    assert caught.value.sqlstate == sqlstate
