"""A ``real`` beside another type in post-processing (rewriter.passes.post_reals): computed
in double precision, a ``double precision``, as PostgreSQL 15 computes it
(``COUNT(*)::real / 3`` was a float4 computed in single precision: 1708.0 for 5124, where
PostgreSQL sends 1708 as a float8; ``0.1::real = 0.1`` was true). Each form is compared
with PostgreSQL over many counts and averages: the text a client receives and the type."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterator, Sequence

import psycopg
import pytest

from proxy.postprocess import PostProcessor
from rewriter import PlanRequest, plan
from tests.rewriter.noise import ZeroNoise
from tests.rewriter.tables import catalog

CATALOG = catalog("main")

#: Forms over x, a count (bigint) or an average (double precision).
FORMS = [
    "{x}::real / 3",
    "3 / {x}::real",
    "{x}::real * 2",
    "{x}::real + 0.1",
    "0.1 - {x}::real",
    "{x}::real * 1.5::real",
    "{x}::real / 3::real",
    "{x}::real / 3::float8",
    "-{x}::real * 7",
    "abs({x}::real) / 7",
    "({x}::real + 1::real) / 3",
    "coalesce({x}::real, 0) / 3",
    "greatest({x}::real, 1) * 1.1",
    "CASE WHEN {x} > 2 THEN {x}::real ELSE 0 END / 7",
    "nullif({x}::real, 0) / 3",
    "{x}::real",
    "{x}::real * {x}::real",
    "sqrt({x}::real)",
    "floor({x}::real / 3)",
    "({x}::real / 3)::text",
    "{x}::real > 16777217",
    "{x}::real = 0.1",
    "{x}::real BETWEEN 0.1 AND 16777217",
    "{x}::real < {x}",
]
COUNTS = [0, 1, 2, 3, 7, 5124, 16777217, 123456789, -5, None]
AVERAGES = [0.1, 1 / 3, 2.5, -0.0, 1e-7, 12345.678, 3.4e38, 1e30, None]


def _random_counts() -> list[int]:
    rnd = random.Random(11)
    return [rnd.randint(-(10 ** rnd.randint(1, 12)), 10 ** rnd.randint(1, 12)) for _ in range(40)]


def _random_averages() -> list[float]:
    rnd = random.Random(12)
    return [rnd.uniform(-1, 1) * 10 ** rnd.randint(-30, 30) for _ in range(40)]


@pytest.fixture(scope="module")
def pg(pg_dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


def _ours(sql: str, values: Sequence[object]) -> tuple[int, list[str | None]]:
    """The answer's type and texts of the first column of ``sql`` over released rows
    holding ``values``."""
    made = plan(sql, CATALOG, PlanRequest(1.0, delta=1e-6))
    released = made.release([], ZeroNoise())
    rows = tuple((v,) for v in values)
    answer = PostProcessor().run(dataclasses.replace(released, rows=rows), made.post_sql)
    return answer.columns[0].type_oid, [row[0] for row in answer.rows]


def _theirs(
    pg: psycopg.Connection[tuple[object, ...]], form: str, typed: str, values: Sequence[object]
) -> tuple[int, list[str | None]]:
    expression = form.format(x="v")
    rows = pg.execute(
        f"SELECT ({expression})::text, pg_typeof({expression})::oid::int "
        f"FROM unnest(%s::{typed}[]) WITH ORDINALITY AS u(v, i) ORDER BY i",
        (list(values),),
    ).fetchall()
    oids = {int(str(row[1])) for row in rows}
    texts = [None if row[0] is None else str(row[0]) for row in rows]
    if {"true", "false"} & set(texts):
        texts = [None if t is None else t[0] for t in texts]  # a boolean's output: t, f
    (oid,) = oids
    return oid, texts


@pytest.mark.postgres
@pytest.mark.parametrize("form", FORMS)
def test_reals_of_counts_as_on_postgres(
    pg: psycopg.Connection[tuple[object, ...]], form: str
) -> None:
    values: list[object] = [*COUNTS, *_random_counts()]
    if "sqrt" in form:
        values = [v for v in values if v is None or int(str(v)) >= 0]
    if "/ {x}" in form:  # x / 0 is NULL here, an error on PostgreSQL (docs/sql.md)
        values = [v for v in values if v != 0]
    ours = _ours("SELECT " + form.format(x="COUNT(*)") + " FROM visits", values)
    assert ours == _theirs(pg, form, "bigint", values)


@pytest.mark.postgres
@pytest.mark.parametrize("form", FORMS)
def test_reals_of_averages_as_on_postgres(
    pg: psycopg.Connection[tuple[object, ...]], form: str
) -> None:
    values: list[object] = [*AVERAGES, *_random_averages()]
    if "sqrt" in form:
        values = [v for v in values if v is None or float(str(v)) >= 0]
    if "/ {x}" in form:
        values = [v for v in values if v != 0]
    if "*" in form or "greatest" in form:  # beyond a real's range: overflow on both
        values = [v for v in values if v is None or abs(float(str(v))) < 1e18]
    if "{x}::real * {x}::real" in form:  # a real's underflow fails on PostgreSQL
        values = [v for v in values if v is None or abs(float(str(v))) > 1e-18]
    ours = _ours("SELECT " + form.format(x="AVG(cost)") + " FROM visits", values)
    assert ours == _theirs(pg, form, "float8", values)


def test_a_real_beside_an_integer_is_widened_in_the_sql() -> None:
    made = plan("SELECT COUNT(*)::real / 3 FROM visits", CATALOG, PlanRequest(1.0, delta=1e-6))
    assert 'CAST(CAST("a0" AS REAL) AS DOUBLE) / NULLIF(3, 0)' in made.post_sql
    made = plan("SELECT COUNT(*)::real / 3::real FROM visits", CATALOG, PlanRequest(1.0))
    assert "AS DOUBLE" not in made.post_sql
