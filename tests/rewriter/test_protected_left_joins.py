"""LEFT JOIN of a protected table along the privacy unit (rewriter.passes.check_joins,
_left_link), as Metabase and Looker write their joins: ``visits v LEFT JOIN patients p ON
p.patient_id = v.patient_id``. The rows of the left side that meet no row of the joined
table are kept, with NULLs in its columns, and belong to the left side's person (the
query's unit is the first protected table's, never the joined table's NULL); a domain key
of the joined table has a NULL cell, released always; the rows per person stay bounded.

Checked: the exact answers (no noise) on DuckDB and PostgreSQL are PostgreSQL's own (but
the domain's empty cells, which PostgreSQL does not show), on data within the policy's
bounds; on neighbouring databases (one person more: with visits but no patients row, with
a patients row but no visits, with several rows of each table, beyond the bounds) the same
cells are released and each measurement moves by at most its sensitivity, on both engines;
the bounds and the refusals."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal

import duckdb
import psycopg
import pytest

from rewriter import (
    Catalog,
    ColumnPolicy,
    ColumnType,
    Plan,
    PlanRequest,
    Rejected,
    TablePolicy,
    build_catalog,
    plan,
)
from tests.rewriter.coupling import in_key_order, sensitivity
from tests.rewriter.noise import ZeroNoise
from tests.rewriter.post import post_processed
from tests.rewriter.scratch import fresh_duckdb, insert

COLUMNS = {
    "visits": {
        "visit_id": ColumnType.INTEGER,
        "patient_id": ColumnType.INTEGER,
        "department": ColumnType.TEXT,
        "cost": ColumnType.FLOAT,
        "stay": ColumnType.INTEGER,
    },
    "patients": {
        "patient_id": ColumnType.INTEGER,
        "sex": ColumnType.TEXT,
        "birth_year": ColumnType.INTEGER,
    },
    "phones": {
        "patient_id": ColumnType.INTEGER,
        "kind": ColumnType.TEXT,
        "minutes": ColumnType.INTEGER,
    },
    "prescriptions": {
        "rx_id": ColumnType.INTEGER,
        "visit_id": ColumnType.INTEGER,
        "dose": ColumnType.INTEGER,
    },
    "departments": {"name": ColumnType.TEXT, "floor": ColumnType.INTEGER},
}
POLICIES = {
    "visits": TablePolicy(
        privacy_unit="patient_id",
        max_rows_per_unit=3,
        max_groups_per_unit=4,
        columns={
            "department": ColumnPolicy(domain=["A", "B", "C"]),
            "cost": ColumnPolicy(lower=0, upper=100),
            "stay": ColumnPolicy(lower=1, upper=10),
        },
    ),
    "patients": TablePolicy(
        privacy_unit="patient_id",
        max_rows_per_unit=1,
        columns={
            "sex": ColumnPolicy(domain=["F", "M"]),
            "birth_year": ColumnPolicy(lower=1900, upper=2025),
        },
    ),
    # Several rows per person.
    "phones": TablePolicy(
        privacy_unit="patient_id",
        max_rows_per_unit=2,
        columns={
            "kind": ColumnPolicy(domain=["home", "work"]),
            "minutes": ColumnPolicy(lower=0, upper=100),
        },
    ),
    "prescriptions": TablePolicy(
        privacy_unit="visit_id -> visits.visit_id",
        max_rows_per_unit=2,
        columns={"dose": ColumnPolicy(lower=0, upper=8)},
    ),
    "departments": TablePolicy(public=True, columns={"floor": ColumnPolicy(domain=[1, 2])}),
}
SCHEMA = [
    "CREATE TABLE {schema}.visits (visit_id BIGINT, patient_id BIGINT, department VARCHAR, "
    "cost DOUBLE PRECISION, stay INTEGER)",
    "CREATE TABLE {schema}.patients (patient_id BIGINT, sex VARCHAR, birth_year INTEGER)",
    "CREATE TABLE {schema}.phones (patient_id BIGINT, kind VARCHAR, minutes INTEGER)",
    "CREATE TABLE {schema}.prescriptions (rx_id BIGINT, visit_id BIGINT, dose INTEGER)",
    "CREATE TABLE {schema}.departments (name VARCHAR PRIMARY KEY, floor INTEGER)",
    "INSERT INTO {schema}.departments VALUES ('A', 1), ('B', 2), ('C', 2)",
]

Rows = list[tuple[object, ...]]


@dataclass(frozen=True)
class Person:
    """One person's rows: visits (visit_id, department, cost, stay), a patients row (sex,
    birth_year) or None, phones (kind, minutes), prescriptions (rx_id, visit_id, dose)."""

    pid: int
    visits: tuple[tuple[int, str, float, int], ...] = ()
    patient: tuple[str | None, int] | None = None
    phones: tuple[tuple[str, int], ...] = ()
    rx: tuple[tuple[int, int, int], ...] = ()


#: Within the policy's bounds: every person's rows are kept whole, so that the bounded
#: answer is PostgreSQL's. Visits without a patients row (2, 6), a patients row without
#: visits (3), a NULL sex (4), two phones (1, 5), two prescriptions of one visit (1, 6).
PEOPLE = [
    Person(1, ((1, "A", 10.0, 2), (2, "B", 20.0, 3)), ("F", 1950), (("home", 10), ("work", 20)),
           ((1, 1, 5), (2, 1, 6))),
    Person(2, ((3, "A", 30.0, 1),), None, (("home", 5),)),
    Person(3, (), ("M", 1980), (("work", 7),)),
    Person(4, ((4, "C", 40.0, 4), (5, "C", 50.0, 5), (6, "A", 60.0, 6)), (None, 1990), (),
           ((3, 4, 1), (4, 6, 2))),
    Person(5, ((7, "B", 70.0, 7),), ("M", 2000), (("home", 1), ("home", 2)), ((5, 7, 3),)),
    Person(6, ((8, "A", 80.0, 8),), None, (), ((6, 8, 4), (7, 8, 4))),
]  # fmt: skip


def tables(people: Sequence[Person]) -> dict[str, Rows]:
    return {
        "visits": [(v[0], p.pid, *v[1:]) for p in people for v in p.visits],
        "patients": [(p.pid, *p.patient) for p in people if p.patient is not None],
        "phones": [(p.pid, *ph) for p in people for ph in p.phones],
        "prescriptions": [rx for p in people for rx in p.rx],
    }


def catalog(schema: str) -> Catalog:
    return build_catalog(COLUMNS, POLICIES, schema=schema, unique={"departments": ["name"]})


def duck_with(people: Sequence[Person]) -> duckdb.DuckDBPyConnection:
    conn = fresh_duckdb()
    conn.execute(";\n".join(s.format(schema="main") for s in SCHEMA))
    for name, rows in tables(people).items():
        if rows:
            insert(conn, f"main.{name}", rows)
    return conn


def fill_postgres(
    conn: psycopg.Connection[tuple[object, ...]], schema: str, people: Sequence[Person]
) -> None:
    with conn.cursor() as cur:
        for name, rows in tables(people).items():
            if rows:
                places = ", ".join(["%s"] * len(rows[0]))
                cur.executemany(f'INSERT INTO "{schema}".{name} VALUES ({places})', rows)


@dataclass
class Engines:
    duck: duckdb.DuckDBPyConnection
    postgres: psycopg.Connection[tuple[object, ...]]
    schema: str

    def answers(self, sql: str) -> tuple[Rows, Rows]:
        """dpproxy's answers (no noise, post-processed) on DuckDB and on PostgreSQL."""
        on_duck = plan(sql, catalog("main"), PlanRequest(10.0))
        on_pg = plan(sql, catalog(self.schema), PlanRequest(10.0, "postgres"))
        duck_rows = [tuple(r) for r in self.duck.execute(in_key_order(on_duck)).fetchall()]
        pg_rows = [tuple(r) for r in self.postgres.execute(in_key_order(on_pg).encode())]
        return (
            post_processed(on_duck, list(on_duck.release(duck_rows, ZeroNoise()).rows)),
            post_processed(on_pg, list(on_pg.release(pg_rows, ZeroNoise()).rows)),
        )

    def native(self, sql: str) -> Rows:
        """What PostgreSQL answers for the analyst's SQL itself."""
        return [tuple(r) for r in self.postgres.execute(sql.encode()).fetchall()]


def _schema(conn: psycopg.Connection[tuple[object, ...]]) -> str:
    schema = f"dpproxy_test_{uuid.uuid4().hex[:10]}"
    conn.execute(f'CREATE SCHEMA "{schema}"')
    for statement in SCHEMA:
        conn.execute(statement.format(schema=f'"{schema}"').encode())
    return schema


@pytest.fixture(scope="module")
def engines(pg_dsn: str) -> Iterator[Engines]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        schema = _schema(conn)
        try:
            fill_postgres(conn, schema, PEOPLE)
            conn.execute(f'SET search_path = "{schema}"')
            yield Engines(duck_with(PEOPLE), conn, schema)
        finally:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _normal(rows: Rows, sums: tuple[int, ...] = ()) -> Rows:
    """Numbers as rounded floats (PostgreSQL's AVG of integers is a numeric), and the SUMs
    at positions ``sums`` of cells without a value 0, as dpproxy releases a sum over no
    value (docs/sql.md: whether a cell holds a value cannot be told exactly): PostgreSQL's
    NULL."""

    def value(index: int, v: object) -> object:
        if v is None and index in sums:
            return 0.0
        if isinstance(v, (int, float, Decimal)) and not isinstance(v, bool):
            return round(float(v), 9)
        return v

    return [tuple(value(i, v) for i, v in enumerate(row)) for row in rows]


def _held(rows: Rows, count: int) -> Rows:
    """The rows of cells that hold rows (their COUNT(*), column ``count``, is not 0):
    PostgreSQL shows no other."""
    return [r for r in rows if r[count] != 0]


METABASE = (
    'SELECT "Patients"."sex" AS "Patients__sex", COUNT(*) AS "count" FROM "visits" '
    'LEFT JOIN "patients" AS "Patients" ON "visits"."patient_id" = "Patients"."patient_id" '
    'GROUP BY "Patients"."sex" ORDER BY 1'
)
V_P = "FROM visits v LEFT JOIN patients p ON p.patient_id = v.patient_id"

#: (sql, the position of a COUNT(*) that tells the cells holding rows)
SAME_AS_POSTGRESQL = [
    (METABASE, 1),
    ("SELECT p.sex, COUNT(*) FROM visits v LEFT JOIN patients p USING (patient_id) "
     "GROUP BY 1 ORDER BY 1", 1),
    (f"SELECT p.sex, COUNT(*), SUM(v.cost), AVG(v.stay), COUNT(p.birth_year), "
     f"SUM(p.birth_year) {V_P} GROUP BY 1 ORDER BY 1", 1),
    (f"SELECT COUNT(*), COUNT(p.patient_id), COUNT(DISTINCT p.patient_id), "
     f"COUNT(DISTINCT v.patient_id), SUM(p.birth_year) {V_P}", 0),
    (f"SELECT v.department, COUNT(*), COUNT(DISTINCT p.patient_id) FILTER (WHERE v.stay > 1) "
     f"{V_P} GROUP BY 1 HAVING COUNT(DISTINCT p.patient_id) >= 0 "
     "ORDER BY COUNT(DISTINCT p.patient_id), 1", 1),
    # The visits of persons without a patients row (an anti-join), and those with one.
    (f"SELECT COUNT(*), SUM(v.stay) {V_P} WHERE p.patient_id IS NULL", 0),
    (f"SELECT p.sex, COUNT(*) {V_P} WHERE p.birth_year > 1960 GROUP BY 1 ORDER BY 1", 1),
    # More conditions in the ON: rows it does not match are kept with NULLs.
    (f"SELECT p.sex, COUNT(*) {V_P} AND p.birth_year < 1995 GROUP BY 1 ORDER BY 1", 1),
    (f"SELECT p.sex, v.department, COUNT(*) {V_P} GROUP BY 1, 2 ORDER BY 1, 2", 2),
    ("SELECT p.sex, COUNT(*), SUM(v.cost) FROM visits v LEFT JOIN patients p ON p.patient_id "
     "= v.patient_id GROUP BY 1 ORDER BY p.sex NULLS FIRST", 1),
    (f"SELECT coalesce(p.sex, '?'), COUNT(*) {V_P} GROUP BY 1 ORDER BY 1", 1),
    # A table with several rows per person: each visit meets each phone of its person.
    ("SELECT ph.kind, COUNT(*), SUM(ph.minutes), SUM(v.stay) FROM visits v "
     "LEFT JOIN phones ph ON ph.patient_id = v.patient_id GROUP BY 1 ORDER BY 1", 1),
    # The other way round: patients without visits are kept.
    ("SELECT v.department, COUNT(*), SUM(p.birth_year) FROM patients p "
     "LEFT JOIN visits v ON v.patient_id = p.patient_id GROUP BY 1 ORDER BY 1", 1),
    # Two LEFT JOINs, the second through the first (NULL where the first met nothing).
    (f"SELECT p.sex, ph.kind, COUNT(*) {V_P} LEFT JOIN phones ph ON ph.patient_id = "
     "p.patient_id GROUP BY 1, 2 ORDER BY 1, 2", 2),
    # A foreign-key child: visits without prescriptions are kept.
    ("SELECT v.department, COUNT(*), SUM(rx.dose), COUNT(rx.rx_id) FROM visits v "
     "LEFT JOIN prescriptions rx ON rx.visit_id = v.visit_id GROUP BY 1 ORDER BY 1", 1),
    # A foreign-key parent, with a condition: prescriptions of other visits keep NULLs
    # (and their person, through the join dpproxy adds).
    ("SELECT v.department, COUNT(*), SUM(rx.dose) FROM prescriptions rx LEFT JOIN visits v "
     "ON v.visit_id = rx.visit_id AND v.stay > 2 GROUP BY 1 ORDER BY 1", 1),
    # With a public lookup table, and an inner join after the LEFT JOIN.
    (f"SELECT d.floor, p.sex, COUNT(*) {V_P} JOIN departments d ON d.name = v.department "
     "GROUP BY 1, 2 ORDER BY 1, 2", 2),
    (f"SELECT p.sex, COUNT(*) {V_P} JOIN phones ph ON ph.patient_id = v.patient_id "
     "GROUP BY 1 ORDER BY 1", 1),
    # A row-level subquery LEFT JOINed (its WHERE goes to the ON), and a per-person one.
    ("SELECT p.sex, COUNT(*) FROM visits v LEFT JOIN (SELECT patient_id, sex FROM patients "
     "WHERE birth_year < 1995) p ON p.patient_id = v.patient_id GROUP BY 1 ORDER BY 1", 1),
    ("SELECT COUNT(*), SUM(s.n), SUM(s.y) FROM (SELECT v.patient_id, COUNT(p.birth_year) AS n, "
     "MAX(p.birth_year) AS y FROM visits v LEFT JOIN patients p ON p.patient_id = v.patient_id "
     "GROUP BY v.patient_id) s", 0),
    (f"SELECT DISTINCT p.sex, COUNT(*) {V_P} GROUP BY 1 ORDER BY 1", 1),
    # A per-person subquery LEFT JOINed: the visits of persons without prescriptions.
    ("SELECT COUNT(*), SUM(v.stay) FROM visits v LEFT JOIN (SELECT w.patient_id, COUNT(*) "
     "AS n FROM prescriptions rx JOIN visits w ON w.visit_id = rx.visit_id "
     "GROUP BY w.patient_id) s ON s.patient_id = v.patient_id WHERE s.n IS NULL", 0),
    # The partials summed before an inner join off the unit (eager_partials), the LEFT
    # JOIN below it.
    ("SELECT p.sex, COUNT(*), SUM(ph.minutes) FROM visits v LEFT JOIN phones ph "
     "USING (patient_id) JOIN patients p ON p.patient_id = v.patient_id "
     "WHERE p.sex IS NOT NULL GROUP BY 1 ORDER BY 1", 1),
]  # fmt: skip


@pytest.mark.parametrize(("sql", "count"), SAME_AS_POSTGRESQL)
def test_answers_match_postgresql(sql: str, count: int, engines: Engines) -> None:
    on_duck, on_pg = engines.answers(sql)
    assert on_duck == on_pg
    # ph.kind's NULL cell: visits of persons without phones, so no minutes to sum.
    sums = (2,) if "SUM(ph.minutes)" in sql else ()
    native = _normal(engines.native(sql), sums)
    held = _normal(_held(on_duck, count))
    if "ORDER BY" in sql:
        assert held == native
    else:
        assert sorted(held, key=repr) == sorted(native, key=repr)


def test_the_metabase_query_counts_the_visits_without_a_patients_row(engines: Engines) -> None:
    on_duck, _ = engines.answers(METABASE)
    # F: person 1's 2 visits; M: person 5's 1; NULL: person 4's 3 (sex NULL) and the
    # visits of persons 2 and 6 (no patients row).
    assert on_duck == [("F", 2), ("M", 1), (None, 5)]
    made = plan(METABASE, catalog("main"), PlanRequest(1.0))
    assert [k.domain for k in made.keys] == [("F", "M", None)]


@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY p.birth_year) {V_P}",
        f"SELECT p.sex, median(v.stay) {V_P} GROUP BY 1",
        f"SELECT p.birth_year, COUNT(*) {V_P} GROUP BY 1",  # a key from the data (δ > 0)
    ],
)
def test_other_shapes_run_on_both_engines(sql: str, engines: Engines) -> None:
    for schema, dialect, run in (
        ("main", "duckdb", lambda q: engines.duck.execute(q).fetchall()),
        (engines.schema, "postgres", lambda q: engines.postgres.execute(q.encode()).fetchall()),
    ):
        made = plan(sql, catalog(schema), PlanRequest(1.0, dialect, delta=1e-6))  # type: ignore[arg-type]
        assert run(made.sql)


def _plan(sql: str) -> Plan:
    return plan(sql, catalog("main"), PlanRequest(1.0))


@pytest.mark.parametrize(
    ("sql", "rows"),
    [
        # As the inner join: each visit meets at most 1 patients row, 2 phones.
        (f"SELECT COUNT(*) {V_P}", 3),
        ("SELECT COUNT(*) FROM visits v JOIN patients p ON p.patient_id = v.patient_id", 3),
        ("SELECT COUNT(*) FROM visits v LEFT JOIN phones ph USING (patient_id)", 6),
        ("SELECT COUNT(*) FROM phones ph LEFT JOIN visits v USING (patient_id)", 6),
        ("SELECT COUNT(*) FROM patients p LEFT JOIN phones ph USING (patient_id)", 2),
        # A foreign-key parent is a key lookup, LEFT JOINed or not.
        ("SELECT COUNT(*) FROM prescriptions rx LEFT JOIN visits v ON v.visit_id = rx.visit_id", 2),
        ("SELECT COUNT(*) FROM prescriptions rx JOIN visits v ON v.visit_id = rx.visit_id", 2),
        # A child LEFT JOINed keeps its parent's rows without a child: both multiply (a
        # person's 3 visits, one with 2 prescriptions, make 4 rows, more than the inner
        # join's 2).
        ("SELECT COUNT(*) FROM visits v LEFT JOIN prescriptions rx ON rx.visit_id = v.visit_id", 6),
        ("SELECT COUNT(*) FROM visits v JOIN prescriptions rx ON rx.visit_id = v.visit_id", 2),
        # Two prescriptions of one visit.
        ("SELECT COUNT(*) FROM prescriptions rx LEFT JOIN prescriptions rx2 "
         "ON rx2.visit_id = rx.visit_id", 4),
    ],
)  # fmt: skip
def test_rows_per_person(sql: str, rows: int) -> None:
    assert _plan(sql).max_rows_per_unit == rows


def test_the_person_is_the_left_tables() -> None:
    """The unit is the first table's column (never the joined table's, NULL where nothing
    matched), and a foreign-key path is followed with a join dpproxy adds, never through the
    table LEFT JOINed."""
    assert '"t0"."patient_id" AS "unit_id"' in _plan(METABASE).sql
    assert 'NOT "t0"."patient_id" IS NULL' in _plan(METABASE).sql
    made = _plan(
        "SELECT COUNT(*) FROM prescriptions rx LEFT JOIN visits v ON v.visit_id = rx.visit_id"
    )
    assert '"t0_u1"."patient_id" AS "unit_id"' in made.sql
    assert 'INNER JOIN "main"."visits" AS "t0_u1"' in made.sql


def test_the_rows_of_the_joined_side_alone_are_dropped(engines: Engines) -> None:
    """A prescription of a visit that does not exist belongs to no one (as without the join):
    left out, while PostgreSQL counts it."""
    sql = "SELECT COUNT(*) FROM prescriptions rx LEFT JOIN visits v ON v.visit_id = rx.visit_id"
    made = plan(sql, catalog("main"), PlanRequest(1.0))
    conn = duck_with(PEOPLE)
    before = conn.execute(made.sql).fetchall()
    conn.execute("INSERT INTO main.prescriptions VALUES (99, 999, 1)")
    assert conn.execute(made.sql).fetchall() == before


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        # Not along the person.
        ("SELECT COUNT(*) FROM visits v LEFT JOIN patients p ON p.birth_year = v.stay",
         'ON equates its privacy unit'),
        ("SELECT COUNT(*) FROM visits v LEFT JOIN patients p "
         "ON p.patient_id = v.patient_id OR v.stay > 1", "ON equates its privacy unit"),
        ("SELECT COUNT(*) FROM visits v LEFT JOIN patients p USING (patient_id) "
         "LEFT JOIN phones ph ON v.patient_id = p.patient_id", '"phones" is joined otherwise'),
        ("SELECT COUNT(*) FROM prescriptions rx LEFT JOIN visits v ON v.patient_id = rx.rx_id",
         '"visits" is joined otherwise'),
        # No protected table before it: its NULL unit would be the person.
        ("SELECT COUNT(*) FROM departments d LEFT JOIN visits v ON v.department = d.name",
         '"visits" is joined otherwise'),
        # Inside a subquery in WHERE.
        ("SELECT COUNT(*) FROM visits v WHERE v.patient_id NOT IN (SELECT p.patient_id FROM "
         "visits w LEFT JOIN patients p ON p.patient_id = w.patient_id)",
         "inside a subquery in WHERE"),
        ("SELECT COUNT(*) FROM visits v WHERE EXISTS (SELECT 1 FROM visits w LEFT JOIN "
         "patients p ON p.patient_id = w.patient_id WHERE w.patient_id = v.patient_id)",
         "inside a subquery in WHERE"),
        # RIGHT and FULL joins, as before.
        ("SELECT COUNT(*) FROM visits v RIGHT JOIN patients p ON p.patient_id = v.patient_id",
         "RIGHT JOIN is not supported"),
        ("SELECT COUNT(*) FROM visits v FULL JOIN patients p ON p.patient_id = v.patient_id",
         "FULL JOIN is not supported"),
        ("SELECT COUNT(*) FROM visits v FULL OUTER JOIN patients p "
         "ON p.patient_id = v.patient_id", "FULL OUTER JOIN is not supported"),
        # Three tables with several rows per person, as for inner joins.
        ("SELECT COUNT(*) FROM visits v LEFT JOIN phones ph USING (patient_id) "
         "LEFT JOIN prescriptions rx ON rx.visit_id = v.visit_id", "at most 2 protected tables"),
    ],
)  # fmt: skip
def test_refusals_say_why(sql: str, words: str) -> None:
    with pytest.raises(Rejected) as caught:
        _plan(sql)
    assert caught.value.sqlstate == "0A000"
    assert words in caught.value.message, caught.value.message
    assert caught.value.hint


def test_a_refusal_shows_the_link() -> None:
    with pytest.raises(Rejected) as caught:
        _plan("SELECT COUNT(*) FROM visits v LEFT JOIN patients p ON p.birth_year = v.stay")
    assert caught.value.hint == "e.g. LEFT JOIN patients p ON v.patient_id = p.patient_id"
    with pytest.raises(Rejected) as caught:
        _plan("SELECT COUNT(*) FROM visits v RIGHT JOIN patients p ON p.patient_id = v.patient_id")
    assert caught.value.hint is not None and "b LEFT JOIN a" in caught.value.hint


# Neighbouring databases -----------------------------------------------------------------

NEIGHBOUR_QUERIES = [
    METABASE,
    f"SELECT p.sex, COUNT(*), SUM(v.cost), AVG(p.birth_year), COUNT(DISTINCT p.patient_id) "
    f"{V_P} GROUP BY 1",
    f"SELECT COUNT(*), SUM(p.birth_year), COUNT(DISTINCT v.patient_id) {V_P}",
    f"SELECT v.department, p.sex, COUNT(*) {V_P} WHERE p.patient_id IS NULL GROUP BY 1, 2",
    "SELECT ph.kind, COUNT(*), SUM(ph.minutes) FROM visits v LEFT JOIN phones ph "
    "ON ph.patient_id = v.patient_id GROUP BY 1",
    "SELECT v.department, COUNT(*), SUM(rx.dose) FROM visits v LEFT JOIN prescriptions rx "
    "ON rx.visit_id = v.visit_id GROUP BY 1",
    "SELECT v.department, COUNT(*), SUM(rx.dose) FROM prescriptions rx LEFT JOIN visits v "
    "ON v.visit_id = rx.visit_id AND v.stay > 2 GROUP BY 1",
    "SELECT v.department, COUNT(*) FROM patients p LEFT JOIN visits v USING (patient_id) "
    "GROUP BY 1",
]
#: The person added (id 7, visits 20-29, prescriptions 20-29).
ADDED = {
    "visits, no patients row": Person(7, ((20, "A", 5.0, 2), (21, "B", 6.0, 3))),
    "a patients row, no visits": Person(7, (), ("F", 1960), (("home", 3),)),
    "both, with phones and prescriptions": Person(
        7, ((20, "C", 5.0, 2),), ("M", 1970), (("home", 3), ("work", 4)), ((20, 20, 7),)
    ),
    "beyond the bounds": Person(
        7,
        tuple((20 + i, "ABC"[i % 3], 500.0, 12) for i in range(6)),
        ("F", 1800),
        tuple(("home", 900) for _ in range(4)),
        tuple((20 + i, 20, 50) for i in range(5)),
    ),
    "a NULL sex, visits in one department": Person(
        7, tuple((20 + i, "A", 99.0, 9) for i in range(3)), (None, 2020), (), ((20, 21, 8),)
    ),
}


def _totals(
    made: Plan, rows: Rows
) -> tuple[list[tuple[object, ...]], dict[tuple[object, ...], list[int]]]:
    keys = len(made.keys)
    released: list[tuple[object, ...]] = [
        tuple(r[:keys]) for r in made.release(rows, ZeroNoise()).rows
    ]
    return released, {tuple(r[:keys]): [int(str(v)) for v in r[keys:]] for r in rows}


def _check_neighbours(made: Plan, found: list[Rows]) -> None:
    """The same cells released; each measurement moves by at most its sensitivity (L1 over
    all cells)."""
    (released0, totals0), (released1, totals1) = (_totals(made, rows) for rows in found)
    assert released0 == released1
    zeros = [0] * len(made.measurements)
    for index, measurement in enumerate(made.measurements):
        change = sum(
            abs(totals1.get(cell, zeros)[index] - totals0.get(cell, zeros)[index])
            for cell in set(totals0) | set(totals1)
        )
        assert change <= sensitivity(made, measurement), (measurement.spec.key, change)


@pytest.mark.parametrize("added", list(ADDED))
@pytest.mark.parametrize("sql", NEIGHBOUR_QUERIES)
def test_one_person_more_on_duckdb(sql: str, added: str) -> None:
    made = _plan(sql)
    bounded = in_key_order(made)
    found = [
        [tuple(r) for r in duck_with(people).execute(bounded).fetchall()]
        for people in (PEOPLE, [*PEOPLE, ADDED[added]])
    ]
    _check_neighbours(made, found)


@pytest.mark.parametrize("removed", [2, 3, 4, 6])
@pytest.mark.parametrize("sql", NEIGHBOUR_QUERIES)
def test_one_person_less_on_duckdb(sql: str, removed: int) -> None:
    """Person 2 and 6 have visits and no patients row, 3 a patients row and no visits."""
    made = _plan(sql)
    bounded = in_key_order(made)
    found = [
        [tuple(r) for r in duck_with(people).execute(bounded).fetchall()]
        for people in (PEOPLE, [p for p in PEOPLE if p.pid != removed])
    ]
    _check_neighbours(made, found)


@pytest.mark.parametrize("sql", NEIGHBOUR_QUERIES)
def test_one_person_more_on_postgresql(sql: str, pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        schema = _schema(conn)
        try:
            fill_postgres(conn, schema, PEOPLE)
            made = plan(sql, catalog(schema), PlanRequest(1.0, "postgres"))
            bounded = in_key_order(made).encode()
            base = [tuple(r) for r in conn.execute(bounded).fetchall()]
            for person in ADDED.values():
                with conn.transaction(force_rollback=True):
                    fill_postgres(conn, schema, [person])
                    more = [tuple(r) for r in conn.execute(bounded).fetchall()]
                _check_neighbours(made, [base, more])
        finally:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def test_a_person_counts_alike_with_or_without_a_patients_row() -> None:
    """The visits of a person count the same whether or not the person has a patients row:
    the unit is the visits' own, never the joined table's NULL."""
    made = _plan(f"SELECT COUNT(*), SUM(v.stay) {V_P}")
    without = Person(7, ((20, "A", 5.0, 2), (21, "B", 6.0, 3)))
    with_row = Person(7, without.visits, ("F", 1960))
    base = duck_with(PEOPLE).execute(made.sql).fetchall()[0]
    for person in (without, with_row):
        more = duck_with([*PEOPLE, person]).execute(made.sql).fetchall()[0]
        assert [int(b) - int(a) for a, b in zip(base, more, strict=True)] == [2, 5]


# IN over a LEFT JOINed table's column (found by the session's hostile review) ------------

#: 20 persons with a visit and no patients row (their p.patient_id is NULL after the join),
#: and person 100, with a patients row and the only phone: with 100, the phones' ids are
#: not empty, and NULL NOT IN (them) is NULL for all 20; without, it was TRUE for all 20.
ORPHANS = [Person(pid, ((pid, "A", 1.0, 1),)) for pid in range(1, 21)]
PHONE_OWNER = Person(100, ((100, "B", 1.0, 1),), ("F", 1980), (("home", 1),))
LEFT_NULL_IN = [
    f"SELECT COUNT(*) {V_P} WHERE p.patient_id NOT IN (SELECT patient_id FROM phones)",
    f"SELECT COUNT(*) {V_P} WHERE NOT (p.patient_id IN (SELECT patient_id FROM phones))",
    f"SELECT COUNT(*) {V_P} WHERE (p.patient_id IN (SELECT patient_id FROM phones)) IS NULL",
    f"SELECT COUNT(*) {V_P} WHERE COALESCE(p.patient_id IN (SELECT patient_id FROM phones), TRUE)",
    "SELECT COUNT(*) FROM visits v LEFT JOIN phones ph ON ph.patient_id = v.patient_id "
    "WHERE ph.patient_id NOT IN (SELECT patient_id FROM patients)",
]


@pytest.mark.parametrize("sql", LEFT_NULL_IN)
def test_in_over_a_left_joined_column_is_each_persons_own(sql: str, pg_dsn: str) -> None:
    """A NULL that the LEFT JOIN gives is a row of the left side's person: x IN (S) of it
    is NULL whatever S (everyone's rows) holds, on both engines."""
    made = _plan(sql)
    bounded = in_key_order(made)
    found = [
        [tuple(r) for r in duck_with(people).execute(bounded).fetchall()]
        for people in ([*ORPHANS, PHONE_OWNER], ORPHANS)
    ]
    _check_neighbours(made, found)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        schema = _schema(conn)
        try:
            fill_postgres(conn, schema, ORPHANS)
            on_pg = plan(sql, catalog(schema), PlanRequest(1.0, "postgres"))
            query = in_key_order(on_pg).encode()
            without = [tuple(r) for r in conn.execute(query).fetchall()]
            fill_postgres(conn, schema, [PHONE_OWNER])
            with_owner = [tuple(r) for r in conn.execute(query).fetchall()]
            _check_neighbours(on_pg, [with_owner, without])
        finally:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
