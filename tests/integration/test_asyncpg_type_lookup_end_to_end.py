"""asyncpg's lists of every type dpproxy compares with, through a real `dpproxy serve` on
DuckDB and PostgreSQL.

asyncpg encodes a list for ``x = ANY($1)`` by the parameter's described type (int4[],
int8[], float8[], date[], bool[], numeric[], timestamp[]...), and has a built-in codec
for text[] and oid[] only: for the others it first looks the type up, with
``SELECT current_setting('jit'), set_config('jit', 'off', false)`` and then its recursive
query over pg_type, pg_namespace, pg_range, pg_attribute and pg_class with ``$1::oid[]``
bound in binary (asyncpg/introspection.py). dpproxy refused set_config() and could not
read ``$1::oid[]``, so those lists failed before anything ran. Here the described types
are PostgreSQL's own, each noisy count (ε = 5) is near PostgreSQL's bounded count and
equal to psycopg's answer to the same query on dpproxy, and the type lookup's rows are
PostgreSQL's."""

from __future__ import annotations

import asyncio
import datetime as dt
import struct
from collections.abc import Iterator, Sequence
from decimal import Decimal

import psycopg
import pytest
from psycopg.types.numeric import Int4, Int8

from proxy.demo_data import DemoSize, generate, load_postgres
from tests.integration.server import RunningServer
from tests.postgres_schema import scratch_schema

asyncpg = pytest.importorskip("asyncpg")
introspection = pytest.importorskip("asyncpg.introspection")

pytestmark = pytest.mark.integration

PATIENTS = 1_000
DIRECTORY_PREFIX = "asyncpg-lookup-"
ROWS_PER_PATIENT = 30  # the demo's max_rows_per_unit for visits
TOLERANCE = 150  # ε = 5, sensitivity 30: noise of scale 6; 150 is 25 scales
COUNT = "SELECT COUNT(*) FROM visits WHERE "
#: A condition, the list asyncpg sends for it, and the type PostgreSQL describes.
LISTS: list[tuple[str, list[object], str]] = [
    ("length_of_stay = ANY($1)", [1, 2, None], "int4[]"),
    ("length_of_stay = ANY($1::int[])", [0, 3], "int4[]"),
    ("patient_id = ANY($1)", list(range(1, 400, 3)), "int8[]"),
    ("cost >= ANY($1)", [15000.5, 19000.25], "float8[]"),
    ("visit_date = ANY($1)", [dt.date(2023, 1, 2), dt.date(2023, 1, 3), None], "date[]"),
    ("visit_date < ALL($1)", [dt.date(2022, 6, 1)], "date[]"),
    ("(length_of_stay > 3) = ANY($1)", [True], "bool[]"),
    ("department = ANY($1)", ["Cardiology", "Neurology"], "text[]"),
]
#: A list asyncpg now sends, of a type dpproxy refuses to compare the column with (as
#: psycopg's same list is refused): the refusal is dpproxy's rule, after the binding.
REFUSED_LISTS: list[tuple[str, list[object], str]] = [
    ("length_of_stay = ANY($1::numeric[])", [Decimal(1), Decimal("2.5")], "numeric[]"),
]
#: Lists of each type in a catalog query (the demo has no numeric or timestamp column).
CATALOG_LISTS: list[tuple[str, list[object]]] = [
    ("int4", [1, None, 3]),
    ("int8", [2**40, -1]),
    ("float8", [1.5, -2.25]),
    ("numeric", [Decimal("1.25"), Decimal(-3)]),
    ("bool", [True, False, None]),
    ("date", [dt.date(2023, 1, 2)]),
    ("timestamp", [dt.datetime(2023, 1, 2, 12, 30), dt.datetime(2024, 2, 29)]),  # noqa: DTZ001
    ("text", ["a", "b c", None]),
]
#: The array types of the lists above and their element types, for the type lookup.
LOOKED_UP = [1007, 1016, 1022, 1182, 1000, 1231, 1115, 1009, 23, 20, 701, 1082, 16, 1700, 1114, 25]


@pytest.fixture(scope="module")
def postgres_demo(pg_dsn: str) -> Iterator[str]:
    """The demo's data (the server's) in a PostgreSQL schema of the test's own."""
    with scratch_schema(pg_dsn) as (_, schema):
        load_postgres(generate(DemoSize(patients=PATIENTS)), pg_dsn, schema=schema)
        yield schema


def _bounded(condition: str) -> str:
    """The exact count with each person's visits capped as dpproxy caps them."""
    return (
        f"SELECT COALESCE(SUM(LEAST(n, {ROWS_PER_PATIENT})), 0) FROM (SELECT COUNT(*) AS n "
        f"FROM visits WHERE {condition} GROUP BY patient_id) s"
    )


async def _asyncpg_counts(
    dsn: str, lists: Sequence[tuple[str, list[object], str]], *, truth: bool, **settings: str
) -> tuple[list[list[str]], list[object]]:
    """The parameter types asyncpg reads and the counts (or the error of each)."""
    conn = await asyncpg.connect(dsn, server_settings=settings or None)
    try:
        if not truth:
            await conn.execute("SET dpproxy.epsilon = 5")
        types: list[list[str]] = []
        counts: list[object] = []
        for condition, listed, _ in lists:
            statement = await conn.prepare(COUNT + condition)
            types.append([t.name for t in statement.get_parameters()])
            try:
                counted = await conn.fetchval(
                    _bounded(condition) if truth else COUNT + condition, listed
                )
            except asyncpg.PostgresError as error:
                counts.append(f"{error.sqlstate} {error}")
                continue
            counts.append(int(counted) if truth else counted)  # PostgreSQL's SUM: numeric
        return types, counts
    finally:
        await conn.close()


#: psycopg's wrappers that make it send a list of ints as asyncpg does (psycopg picks the
#: smallest integer type for a list of small ints, int2[], a different bound query).
_PSYCOPG_INTS = {"int4[]": Int4, "int8[]": Int8}


def _psycopg_counts(dsn: str, lists: Sequence[tuple[str, list[object], str]]) -> list[object]:
    """psycopg's answers to the same queries on dpproxy, its list of the same array type."""
    answers: list[object] = []
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET dpproxy.epsilon = 5")
        for condition, listed, name in lists:
            wrap = _PSYCOPG_INTS.get(name)
            sent = [v if v is None or wrap is None else wrap(int(str(v))) for v in listed]
            try:
                row = conn.execute((COUNT + condition).replace("$1", "%s"), [sent]).fetchone()
            except psycopg.Error as error:
                answers.append(f"{error.sqlstate} {error}")
                continue
            assert row is not None
            answers.append(row[0])
    return answers


def test_asyncpg_lists_of_each_type_are_described_and_answered(
    server: RunningServer, pg_dsn: str, postgres_demo: str
) -> None:
    their_types, truths = asyncio.run(
        _asyncpg_counts(pg_dsn, LISTS, truth=True, search_path=postgres_demo)
    )
    before = _audited(server)
    our_types, answers = asyncio.run(_asyncpg_counts(server.dsn("alice"), LISTS, truth=False))
    by_asyncpg = _audited(server)[len(before) :]
    psycopgs = _psycopg_counts(server.dsn("alice"), LISTS)
    by_psycopg = _audited(server)[len(before) + len(by_asyncpg) :]
    assert their_types == [[name] for _, _, name in LISTS]
    assert our_types == their_types
    for (condition, _, _), noisy, truth, other in zip(
        LISTS, answers, truths, psycopgs, strict=True
    ):
        assert isinstance(truth, int) and truth > 0, condition  # each list selects rows
        assert isinstance(noisy, int), (condition, noisy)  # was: 0A000 set_config()
        assert abs(noisy - truth) <= TOLERANCE, (condition, noisy, truth)
        assert isinstance(other, int) and abs(other - truth) <= TOLERANCE, (condition, other)
    # psycopg's list of the same type is the same query to dpproxy (with the answer cache
    # on, the same answer: tests/proxy covers that); but its text[], which it sends in
    # text, where asyncpg's binary one is bound with each element quoted.
    assert len(by_asyncpg) == len(by_psycopg) == len(LISTS)
    for (_, _, name), ours, psycopgs_sql in zip(LISTS, by_asyncpg, by_psycopg, strict=True):
        if name != "text[]":
            assert ours == psycopgs_sql


def _audited(server: RunningServer) -> list[str]:
    """The SQL of alice's audited queries, oldest first."""
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        rows = conn.execute("SELECT * FROM dpproxy.my_queries").fetchall()
    return [str(row[3]) for row in rows]


def test_asyncpg_numeric_lists_are_sent_and_refused_as_psycopgs(
    server: RunningServer, pg_dsn: str, postgres_demo: str
) -> None:
    their_types, truths = asyncio.run(
        _asyncpg_counts(pg_dsn, REFUSED_LISTS, truth=True, search_path=postgres_demo)
    )
    our_types, answers = asyncio.run(
        _asyncpg_counts(server.dsn("alice"), REFUSED_LISTS, truth=False)
    )
    assert their_types == [[name] for _, _, name in REFUSED_LISTS] == our_types
    assert all(isinstance(t, int) for t in truths)
    # Bound as psycopg's list is, then refused by the same rule (was: set_config()).
    assert answers == _psycopg_counts(server.dsn("alice"), REFUSED_LISTS)
    assert all(str(a).startswith("0A000 ") and "set_config" not in str(a) for a in answers)


async def _catalog_lists(dsn: str) -> list[tuple[list[str], object]]:
    """Each list in a catalog query, each on a connection of its own (asyncpg looks the
    type up on each): the parameter's type and the answer."""
    answers: list[tuple[list[str], object]] = []
    for name, listed in CATALOG_LISTS:
        conn = await asyncpg.connect(dsn)
        try:
            statement = await conn.prepare(f"SELECT cardinality($1::{name}[])")
            types = [t.name for t in statement.get_parameters()]
            answers.append((types, await statement.fetchval(listed)))
        finally:
            await conn.close()
    return answers


def test_asyncpg_lists_of_each_type_in_catalog_queries(server: RunningServer, pg_dsn: str) -> None:
    theirs = asyncio.run(_catalog_lists(pg_dsn))
    assert theirs == [([f"{name}[]"], len(listed)) for name, listed in CATALOG_LISTS]
    assert asyncio.run(_catalog_lists(server.dsn("alice"))) == theirs


def _oid_array(oids: Sequence[int]) -> bytes:
    """An oid[] as asyncpg sends it in binary."""
    head = struct.pack("!iiIii", 1, 0, 26, len(oids), 1)
    return head + b"".join(struct.pack("!iI", 4, oid) for oid in oids)


def _type_lookup(dsn: str) -> tuple[list[int], set[tuple[str | None, ...]]]:
    """asyncpg's type lookup as asyncpg sends it (Parse with no types, Describe, Bind of a
    binary oid[]): the described parameter types and the rows' text."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        pgconn = conn.pgconn
        prepared = pgconn.prepare(b"lookup", introspection.INTRO_LOOKUP_TYPES.encode())
        assert prepared.status == psycopg.pq.ExecStatus.COMMAND_OK, prepared.error_message
        described = pgconn.describe_prepared(b"lookup")
        types = [described.param_type(i) for i in range(described.nparams)]
        result = pgconn.exec_prepared(b"lookup", [_oid_array(LOOKED_UP)], param_formats=[1])
        assert result.status == psycopg.pq.ExecStatus.TUPLES_OK, result.error_message
        rows = {
            tuple(
                None if (v := result.get_value(r, c)) is None else v.decode()
                for c in range(result.nfields)
            )
            for r in range(result.ntuples)
        }
        return types, rows


def test_the_type_lookup_answers_as_postgresql(server: RunningServer, pg_dsn: str) -> None:
    their_types, theirs = _type_lookup(pg_dsn)
    our_types, ours = _type_lookup(server.dsn("alice"))
    assert their_types == our_types == [1028]  # oid[]: asyncpg's built-in codec
    assert {int(str(row[0])) for row in theirs} == set(LOOKED_UP)  # elements: depth 0 and 1
    assert ours == theirs  # was: 42601, dpproxy could not read $1::oid[]


def test_set_config_of_jit_alone(server: RunningServer) -> None:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        jit = "SELECT current_setting('jit') AS cur, set_config('jit', 'off', false) AS new"
        assert conn.execute(jit).fetchone() == ("on", "off")  # was: 0A000
        assert conn.execute("SELECT set_config('jit', %s, false)", ["on"]).fetchone() == ("on",)
        assert conn.execute("SELECT set_config('JIT', 'no', false)").fetchone() == ("off",)
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="Boolean"):
            conn.execute("SELECT set_config('jit', 'maybe', false)")
        for refused in (
            "SELECT set_config('work_mem', '1MB', false)",
            "SELECT set_config('dpproxy.epsilon', '100', false)",
            "SELECT set_config('jit', 'off', true)",
            "SELECT set_config('jit', 'off', false), COUNT(*) FROM visits",
        ):
            with pytest.raises(psycopg.errors.FeatureNotSupported):
                conn.execute(refused)
        assert conn.execute("SHOW dpproxy.epsilon").fetchone() != ("100",)


#: Catalog queries the type lookup relies on, answered as PostgreSQL answers them (the
#: invalid OID 0 is shown '-'; a quoted array cast to an array type was refused: DuckDB
#: does not read PostgreSQL's array text).
CATALOG_QUERIES = [
    "SELECT 0::regtype::text, 0::regclass::text, 0::regnamespace::text, 23::regtype::text",
    "SELECT '{1,NULL,3}'::int[] = ARRAY[1, NULL, 3], cardinality('{}'::int[])",
    "SELECT cardinality('{2024-02-29 12:00:00}'::timestamp[]), cardinality('{}'::timestamp[])",
    "SELECT typname FROM pg_type WHERE oid = ANY('{23,1007}'::oid[]) ORDER BY 1",
    "SELECT typname FROM pg_type WHERE oid = ANY('{23,1007}'::pg_catalog.oid[]) ORDER BY 1",
]


def test_catalog_queries_of_the_type_lookup(server: RunningServer, pg_dsn: str) -> None:
    def answers(dsn: str) -> list[list[tuple[object, ...]]]:
        with psycopg.connect(dsn, autocommit=True) as conn:
            return [conn.execute(sql).fetchall() for sql in CATALOG_QUERIES]

    assert answers(server.dsn("alice")) == answers(pg_dsn)
