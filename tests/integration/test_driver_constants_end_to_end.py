"""What SQLAlchemy Core (psycopg 3 and asyncpg dialects) and psycopg send, through a real
`dpproxy serve` on DuckDB and PostgreSQL: constants written with casts (``LIKE
%(p)s::VARCHAR || '%'``, ``CASE … THEN %(p)s::VARCHAR``, ``date_trunc(%(p)s::VARCHAR, …)``,
``width_bucket(x, %(p)s::INTEGER, …)``, ``LIMIT ALL OFFSET %(p)s::INTEGER``), a boolean
cast to integer in AVG, and a list passed to ``= ANY(%s)``. Each is answered, its noisy
counts near the true ones (ε = 5).

asyncpg prepares every statement and has dpproxy describe it before binding its values;
how dpproxy plans a statement without its values is ``proxy.parameters``' concern (a NULL
LIKE pattern, width_bucket bound or CASE result is refused), so through asyncpg only the
statements whose parameters may be NULL are asked here (LIMIT, OFFSET, a comparison,
ARRAY elements)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import psycopg
import pytest
import sqlalchemy
from sqlalchemy import (
    BigInteger,
    Column,
    Date,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    any_,
    case,
    cast,
    func,
    select,
)
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects.postgresql.asyncpg import dialect as asyncpg_dialect

from tests.integration.server import PASSWORDS, RunningServer

pytestmark = pytest.mark.integration

PATIENTS = 1_000
DIRECTORY_PREFIX = "driver-constants-"
DEPARTMENTS = [
    "Cardiology",
    "Emergency",
    "General Medicine",
    "Neurology",
    "Obstetrics",
    "Oncology",
    "Orthopedics",
    "Pediatrics",
]

VISITS = Table(
    "visits",
    MetaData(),
    Column("patient_id", BigInteger),
    Column("visit_date", Date),
    Column("department", String),
    Column("diagnosis", String),
    Column("cost", Float),
    Column("length_of_stay", Integer),
)
LEVEL = case((VISITS.c.cost < 1000, "low"), else_="high")
YEAR = func.date_trunc("year", VISITS.c.visit_date)
BUCKET = func.width_bucket(VISITS.c.cost, 0, 20000, 4)
INITIAL = func.substring(VISITS.c.diagnosis, 1, 1)
BY_DEPARTMENT = (
    select(VISITS.c.department, func.count())
    .group_by(VISITS.c.department)
    .order_by(VISITS.c.department)
)
CHOSEN = ["Cardiology", "Oncology"]
STATEMENTS: dict[str, Any] = {
    "startswith": select(func.count())
    .select_from(VISITS)
    .where(VISITS.c.diagnosis.startswith("I")),
    "contains": select(func.count()).select_from(VISITS).where(VISITS.c.diagnosis.contains("1")),
    "level": select(LEVEL.label("level"), func.count()).group_by(LEVEL),
    "year": select(YEAR.label("year"), func.count()).group_by(YEAR),
    "bucket": select(BUCKET.label("bucket"), func.count()).group_by(BUCKET),
    "initial": select(INITIAL.label("initial"), func.count()).group_by(INITIAL),
    "median": select(func.percentile_cont(0.5).within_group(VISITS.c.cost)),
    "limit": BY_DEPARTMENT.limit(2),
    "offset": BY_DEPARTMENT.offset(2),
    "share": select(func.avg(cast(VISITS.c.length_of_stay > 0, Integer))),
    "any": select(func.count())
    .select_from(VISITS)
    .where(VISITS.c.department == any_(postgresql.array(CHOSEN))),
}
#: Keys with a public domain, asked with δ = 0.
PUBLIC = ("level", "bucket")
#: What asyncpg can ask (see the module's docstring).
DESCRIBED = ("limit", "offset", "share", "any")
#: The conditions of the counting statements, to count them on the demo's DuckDB file.
TRUTH = {
    "startswith": "diagnosis LIKE 'I%'",
    "contains": "diagnosis LIKE '%1%'",
    "any": "department IN ('Cardiology', 'Oncology')",
}
ROWS_PER_PATIENT = 30  # visits.max_rows_per_unit in the demo configuration

Answers = dict[str, tuple[list[str], list[tuple[Any, ...]]]]


def _url(server: RunningServer, driver: str) -> str:
    return f"postgresql+{driver}://alice:{PASSWORDS['alice']}@127.0.0.1:{server.port}/demo"


def _truth(demo_dir: Path, condition: str) -> int:
    """The visits that meet ``condition``, at most 30 of each patient: what COUNT(*) counts
    before its noise."""
    sql = (
        f"SELECT COALESCE(SUM(LEAST(n, {ROWS_PER_PATIENT})), 0) FROM "
        f"(SELECT COUNT(*) AS n FROM visits WHERE {condition} GROUP BY patient_id)"
    )
    with duckdb.connect(str(demo_dir / "demo.duckdb"), read_only=True) as conn:
        row = conn.execute(sql).fetchone()
    assert row is not None
    return int(row[0])


def _near(noisy: object, truth: int) -> bool:
    """A noisy count (ε = 5: a noise of scale 30 / 5) of a true one: within 150 of it."""
    return isinstance(noisy, int) and abs(noisy - truth) <= 150


def _settings(name: str) -> list[str]:
    delta = "0" if name in PUBLIC else "DEFAULT"
    return ["SET dpproxy.epsilon = 5", f"SET dpproxy.delta = {delta}"]


def _check(answers: Answers, demo_dir: Path) -> None:
    """What every driver's answers hold (the values are noisy)."""
    for name, condition in TRUTH.items():
        if name in answers:
            names, rows = answers[name]
            assert names == ["count_1"] and len(rows) == 1, name
            assert _near(rows[0][0], _truth(demo_dir, condition)), (name, rows)
    if "level" in answers:
        names, rows = answers["level"]  # δ = 0: a public domain
        assert names == ["level", "count_1"] and {r[0] for r in rows} == {"low", "high"}
    if "year" in answers:
        names, rows = answers["year"]
        assert names == ["year", "count_1"]
        assert {r[0].year for r in rows if r[0] is not None} <= set(range(2020, 2025))
        assert all(r[0] is None or (r[0].month, r[0].day, r[0].hour) == (1, 1, 0) for r in rows)
    if "bucket" in answers:
        names, rows = answers["bucket"]
        assert names == ["bucket", "count_1"]
        assert {r[0] for r in rows} == {0, 1, 2, 3, 4, 5, None}  # empty buckets included
    if "initial" in answers:
        names, rows = answers["initial"]
        assert names == ["initial", "count_1"] and rows
        assert all(r[0] is None or len(r[0]) == 1 for r in rows)
    if "median" in answers:
        names, rows = answers["median"]
        assert names == ["percentile_cont_1"] and 0 <= rows[0][0] <= 20000
    names, rows = answers["limit"]
    assert names == ["department", "count_1"] and [r[0] for r in rows] == DEPARTMENTS[:2]
    names, rows = answers["offset"]
    assert [r[0] for r in rows] == DEPARTMENTS[2:]
    names, rows = answers["share"]
    assert names == ["avg_1"] and len(rows) == 1 and -0.5 <= float(rows[0][0]) <= 1.5


def test_sqlalchemy_with_psycopg(server: RunningServer, demo_dir: Path) -> None:
    engine = sqlalchemy.create_engine(_url(server, "psycopg"))
    answers: Answers = {}
    try:
        with engine.connect() as conn:
            for name, statement in STATEMENTS.items():
                for setting in _settings(name):
                    conn.exec_driver_sql(setting)
                result = conn.execute(statement)
                answers[name] = (list(result.keys()), [tuple(r) for r in result])
    finally:
        engine.dispose()
    _check(answers, demo_dir)


def test_sqlalchemy_s_asyncpg_sql_with_asyncpg(server: RunningServer, demo_dir: Path) -> None:
    """The SQL and parameters SQLAlchemy's asyncpg dialect sends (``$1::VARCHAR``), sent
    with asyncpg (SQLAlchemy's asyncio engine needs greenlet, not a test dependency)."""
    asyncpg = pytest.importorskip("asyncpg")
    dialect = asyncpg_dialect()

    async def ask() -> Answers:
        conn = await asyncpg.connect(server.dsn("alice"))
        found: Answers = {}
        try:
            for name in DESCRIBED:
                for setting in _settings(name):
                    await conn.execute(setting)
                compiled = STATEMENTS[name].compile(dialect=dialect)
                values = [compiled.params[k] for k in compiled.positiontup or []]
                prepared = await conn.prepare(str(compiled))
                names = [a.name for a in prepared.get_attributes()]
                found[name] = (names, [tuple(r) for r in await prepared.fetch(*values)])
        finally:
            await conn.close()
        return found

    _check(asyncio.run(ask()), demo_dir)


@pytest.fixture
def alice(server: RunningServer) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        conn.execute("SET dpproxy.epsilon = 5")
        yield conn


def test_a_list_for_any(alice: psycopg.Connection[tuple[Any, ...]], demo_dir: Path) -> None:
    """psycopg 3 binds a Python list as an array parameter (server side), which dpproxy
    reads as PostgreSQL does, elements with commas, quotes, backslashes and NULL included."""
    listed = [*CHOSEN, 'a "quoted", \\ one', None]
    rows = alice.execute(
        "SELECT COUNT(*) FROM visits WHERE department = ANY(%s)", (listed,)
    ).fetchall()
    assert _near(rows[0][0], _truth(demo_dir, TRUTH["any"]))
    rows = alice.execute(
        "SELECT COUNT(*) FROM visits WHERE department <> ALL(%s)", (CHOSEN,)
    ).fetchall()
    assert _near(rows[0][0], _truth(demo_dir, "department NOT IN ('Cardiology', 'Oncology')"))
    rows = alice.execute(
        "SELECT department, COUNT(*) FROM visits WHERE department <> ALL(%s) GROUP BY 1",
        (CHOSEN,),
    ).fetchall()
    counts = dict(rows)
    # a public domain: every department released but those the WHERE rules out, as in
    # PostgreSQL (rewriter.passes.where_cells)
    assert set(counts) == set(DEPARTMENTS) - set(CHOSEN)
