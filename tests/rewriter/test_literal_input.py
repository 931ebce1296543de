"""Quoted literals read as PostgreSQL's input function of their type reads them
(rewriter.passes.value_types.literal_input): compared with a column (``stay = '1.5'``), in
an IN list, as an element of a quoted array in ANY/ALL (psycopg 3's list, ``stay =
ANY('{1.5,2}')``) or cast (``'1.5'::int``). What PostgreSQL refuses is refused before
anything runs, with PostgreSQL's own SQLSTATE and message (PostgreSQL asked the same
statement); what it reads is answered, as PostgreSQL answers, on both engines."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from rewriter import Catalog, PlanRequest, Rejected, build_catalog, plan
from tests.rewriter.driver_sql import COLUMNS, POLICY, Engines, engines


@pytest.fixture(scope="module")
def notes(pg_dsn: str) -> Iterator[Engines]:
    with engines(pg_dsn) as found:
        yield found


def declared(schema: str) -> Catalog:
    """The notes with the widths of their integer columns, as a backend reports them."""
    digits = {"notes": {"stay": (10, 0), "patient_id": (19, 0)}}
    return build_catalog({"notes": COLUMNS}, {"notes": POLICY}, schema=schema, digits=digits)


REFUSED = [
    # stay: integer; cost: double precision; flag: boolean; day: date.
    "stay = '1.5'",
    "stay = ANY('{1.5,2}')",
    "stay IN ('1.5', '2')",
    "stay = ANY('{a,b}')",
    "stay <> ALL('{1.5}')",
    "stay > ANY('{1.5}')",
    "stay = ANY('{1,NULL,x}')",
    "stay BETWEEN '1.5' AND 2.5",
    "stay = ''",
    "stay = '1e3'",
    "stay = 'NaN'",
    "stay = '3000000000'",
    "stay = ANY('{1,3000000000}')",
    "stay IN ('3000000000', 1)",
    "3000000000 = '1.5'",
    "stay = '1.5'::int",
    "stay = CAST('x' AS BIGINT)",
    "stay = ANY('{1.5}'::int[])",
    "stay = ANY(ARRAY['1.5', '2']::int[])",
    "stay = '40000'::smallint",
    "cost = '1.2.3'",
    "cost = ANY('{1,x}')",
    "cost = '1e400'",
    "cost = '1e-400'",
    "cost = '1.5'::real + 0 OR cost = '1e39'::real",
    "flag = 'maybe'",
    "flag = ANY('{t,o}')",
    "flag = '10'",
    "day = ANY('{2020-13-01}')",
    "day = '2020-02-30'",
    "day = '2020-01-32'",
    "day = '0000-01-01'",
    "day = ''",
    "day = '2020-00-01'::date",
    "CAST('2020-01-01 10:61' AS TIMESTAMP) IS NULL",
    "'2020-01-01 24:00:01'::timestamp IS NULL",
    "'2020-13-01 10:00'::timestamp IS NULL",
]


@pytest.mark.postgres
@pytest.mark.parametrize("predicate", REFUSED)
def test_refused_as_postgresql_refuses_it(predicate: str, notes: Engines) -> None:
    sql = f"SELECT COUNT(*) FROM notes WHERE {predicate}"
    with pytest.raises(psycopg.Error) as theirs:
        notes.native(sql)
    for request, catalog in (
        (PlanRequest(1.0), declared("main")),
        (PlanRequest(1.0, "postgres"), declared(notes.schema)),
    ):
        with pytest.raises(Rejected) as ours:
            plan(sql, catalog, request)
        assert (ours.value.sqlstate, ours.value.message) == (
            theirs.value.sqlstate,
            theirs.value.diag.message_primary,
        ), predicate
        their_hint = theirs.value.diag.message_hint
        if their_hint is not None:
            assert ours.value.hint == their_hint


ANSWERED = [
    "stay = ANY('{ 1 , 2 }')",
    "stay = ' +2 '",
    "stay = ANY('{2,NULL}')",
    "stay = '-0'",
    "stay = '0030'",
    "stay IN ('1', 2.5)",
    "stay IN ('3', 3000000000)",
    "stay = ANY('{1,2}'::int[])",
    "stay = '2'::smallint",
    "cost = '2.5'",
    "cost = ANY('{2.5,1e1, -3 }')",
    "cost > '-1e-3'",
    "cost = '1.'",
    "flag = 'ye'",
    "flag = ANY('{tr,OF}')",
    "flag = ' on '",
    "flag <> '0'",
    "day = ' 2024-01-02 '",
    "day = ANY('{2024-01-02,2020-02-29}')",
    "'2024-01-02 23:59'::timestamp > day",
    "code = ANY('{1.5,A}')",
]


@pytest.mark.postgres
@pytest.mark.parametrize("predicate", ANSWERED)
def test_answered_as_postgresql_answers(predicate: str, notes: Engines) -> None:
    sql = f"SELECT COUNT(*) FROM notes WHERE {predicate}"
    on_duck, on_pg = notes.released(sql, delta=0.0)
    assert on_duck == on_pg == notes.native(sql)
    plan(sql, declared("main"), PlanRequest(1.0))  # the widths change nothing here
