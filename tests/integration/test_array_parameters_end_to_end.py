"""Lists for ``x = ANY($1)``, ``x <> ALL($1)``, ``x LIKE ANY($1)`` and ``x = ANY($1::int[])``
of undeclared type through a real `dpproxy serve` on DuckDB and PostgreSQL: the parameter
is described with PostgreSQL's array type (text[], int4[], int8[], float8[], date[]),
where dpproxy said text and asyncpg refused a list before sending anything;
the client then sends the list in binary (array_send), which dpproxy binds
(proxy.parameter_arrays).

asyncpg itself sends text[] lists (its one built-in array codec besides oid[]); for the
other array types it first looks the type up in pg_type with a catalog query dpproxy does
not answer, so those lists are sent here as asyncpg sends them (its array_send layout:
no NULL flag, lower bound 1) through psycopg's low-level Parse/Describe/Bind with no
declared types. The described types are PostgreSQL's own for the same statements; each
noisy count (ε = 5) is near PostgreSQL's own bounded count with the same value; a GROUP BY
releases the groups PostgreSQL finds; a list longer than dpproxy compares with is refused
free of charge."""

from __future__ import annotations

import asyncio
import datetime as dt
import struct
from collections.abc import Iterator, Sequence

import psycopg
import pytest

from proxy.demo_data import DemoSize, generate, load_postgres
from tests.integration.server import RunningServer
from tests.postgres_schema import scratch_schema

asyncpg = pytest.importorskip("asyncpg")

pytestmark = pytest.mark.integration

PATIENTS = 1_000
DIRECTORY_PREFIX = "array-parameters-"
ROWS_PER_PATIENT = 30  # the demo's max_rows_per_unit for visits
TOLERANCE = 150  # ε = 5, sensitivity 30: noise of scale 6; 150 is 25 scales
COUNT = "SELECT COUNT(*) FROM visits WHERE "
#: Conditions on text columns and the list asyncpg sends for them.
TEXT_LISTS: list[tuple[str, list[str | None]]] = [
    ("department = ANY($1)", ["Cardiology", "Neurology"]),
    ("department <> ALL($1)", ["Cardiology", "Oncology"]),
    ("department = ANY($1)", ["Pediatrics", None]),
    ("diagnosis LIKE ANY($1)", ["I%", "J1%"]),
]
_EPOCH = dt.date(2000, 1, 1)
_INT4, _INT8, _FLOAT8, _DATE = 23, 20, 701, 1082


def _array(element: int, items: Sequence[bytes | None]) -> bytes:
    """A list as asyncpg sends it in binary (asyncpg/protocol/codecs/array.pyx)."""
    head = struct.pack("!iiiii", 1, 0, element, len(items), 1)
    return head + b"".join(
        struct.pack("!i", -1) if item is None else struct.pack("!i", len(item)) + item
        for item in items
    )


def _days(day: dt.date) -> bytes:
    return struct.pack("!i", (day - _EPOCH).days)


#: Conditions on other columns, the list in binary, and PostgreSQL's type for it.
BINARY_LISTS: list[tuple[str, bytes, int]] = [
    ("length_of_stay = ANY($1)", _array(_INT4, [struct.pack("!i", 1), struct.pack("!i", 2), None]),
     1007),
    ("length_of_stay = ANY($1::int[])", _array(_INT4, [struct.pack("!i", n) for n in (0, 3)]),
     1007),
    ("patient_id = ANY($1)", _array(_INT8, [struct.pack("!q", n) for n in range(1, 400, 3)]),
     1016),
    ("cost >= ANY($1)", _array(_FLOAT8, [struct.pack("!d", x) for x in (15000.5, 19000.25)]),
     1022),
    ("visit_date = ANY($1)",
     _array(_DATE, [_days(dt.date(2023, 1, 2)), _days(dt.date(2023, 1, 3)), None]), 1182),
    ("visit_date < ALL($1)", _array(_DATE, [_days(dt.date(2022, 6, 1))]), 1182),
]  # fmt: skip
#: The demo has no timestamp column (and refuses a cast of a column in WHERE): timestamp[]
#: is compared with PostgreSQL's own answers in tests/proxy/test_array_parameter_types.py.


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


def _grouped(condition: str) -> str:
    return f"SELECT department, COUNT(*) FROM visits WHERE {condition} GROUP BY department"


async def _asyncpg_answers(
    dsn: str, *, truth: bool, **settings: str
) -> tuple[list[list[str]], list[object], list[set[str]]]:
    """The parameter types asyncpg reads, the counts and the department groups."""
    conn = await asyncpg.connect(dsn, server_settings=settings or None)
    try:
        if not truth:
            await conn.execute("SET dpproxy.epsilon = 5")
        types, counts, groups = [], [], []
        for condition, listed in TEXT_LISTS:
            statement = await conn.prepare(COUNT + condition)  # dpproxy: with a stand-in
            types.append([t.name for t in statement.get_parameters()])
            asked = _bounded(condition) if truth else COUNT + condition
            counted = await conn.fetchval(asked, listed)  # was: expected str, got list
            counts.append(int(counted) if truth else counted)  # PostgreSQL's SUM: numeric
            if condition.startswith("department"):  # the groups the WHERE keeps
                grouped = await conn.fetch(_grouped(condition), listed)
                groups.append({str(row[0]) for row in grouped})
        return types, counts, groups
    finally:
        await conn.close()


def test_asyncpg_text_lists_are_described_and_answered_as_postgresql_does(
    server: RunningServer, pg_dsn: str, postgres_demo: str
) -> None:
    theirs = asyncio.run(_asyncpg_answers(pg_dsn, truth=True, search_path=postgres_demo))
    ours = asyncio.run(_asyncpg_answers(server.dsn("alice"), truth=False))
    assert theirs[0] == [["text[]"]] * len(TEXT_LISTS)
    assert ours[0] == theirs[0]
    for (condition, _), noisy, truth in zip(TEXT_LISTS, ours[1], theirs[1], strict=True):
        assert isinstance(truth, int) and truth > 0, condition  # each list selects rows
        assert isinstance(noisy, int) and abs(noisy - truth) <= TOLERANCE, (condition, noisy)
    assert ours[2] == theirs[2]
    assert theirs[2][0] == {"Cardiology", "Neurology"}
    assert theirs[2][2] == {"Pediatrics"}  # the NULL element matches nothing
    assert COUNT + """department = ANY(CAST('{"Cardiology","Neurology"}' AS TEXT[]))""" in (
        _audited(server)
    )


def _described_and_answered(dsn: str, *, truth: bool) -> tuple[list[tuple[int, ...]], list[int]]:
    """Parse with no declared types, Describe, Bind the list in binary, Execute: the
    described parameter types and the counts."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        if not truth:
            conn.execute("SET dpproxy.epsilon = 5")
        pgconn = conn.pgconn
        types: list[tuple[int, ...]] = []
        counts: list[int] = []
        for number, (condition, data, _) in enumerate(BINARY_LISTS):
            name = f"list{number}".encode()
            sql = _bounded(condition) if truth else COUNT + condition
            prepared = pgconn.prepare(name, sql.encode())
            assert prepared.status == psycopg.pq.ExecStatus.COMMAND_OK, prepared.error_message
            described = pgconn.describe_prepared(name)
            types.append(tuple(described.param_type(i) for i in range(described.nparams)))
            result = pgconn.exec_prepared(name, [data], param_formats=[1])
            assert result.status == psycopg.pq.ExecStatus.TUPLES_OK, result.error_message
            value = result.get_value(0, 0)
            assert value is not None
            counts.append(int(value.decode()))
        return types, counts


def test_binary_lists_of_numbers_dates_and_timestamps(
    server: RunningServer, pg_dsn: str, postgres_demo: str
) -> None:
    their_dsn = psycopg.conninfo.make_conninfo(pg_dsn, options=f"-c search_path={postgres_demo}")
    their_types, truths = _described_and_answered(their_dsn, truth=True)
    our_types, answers = _described_and_answered(server.dsn("alice"), truth=False)
    assert their_types == [(oid,) for _, _, oid in BINARY_LISTS]
    assert our_types == their_types
    for (condition, _, _), noisy, truth in zip(BINARY_LISTS, answers, truths, strict=True):
        assert truth > 0, condition
        assert abs(noisy - truth) <= TOLERANCE, (condition, noisy, truth)


def _audited(server: RunningServer) -> set[str]:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        rows = conn.execute("SELECT * FROM dpproxy.my_queries").fetchall()
    return {str(row[3]) for row in rows}


def _budget(server: RunningServer) -> object:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        return conn.execute("SELECT * FROM dpproxy.my_budget").fetchone()


def test_a_list_too_long_is_refused_free(server: RunningServer) -> None:
    before = _budget(server)

    async def ask(listed: Sequence[str]) -> str:
        conn = await asyncpg.connect(server.dsn("alice"))
        try:
            with pytest.raises(asyncpg.PostgresError) as refused:
                await conn.fetchval(COUNT + "department = ANY($1)", listed)
            return f"{refused.value.sqlstate} {refused.value}"
        finally:
            await conn.close()

    refusal = asyncio.run(ask([f"d{i}" for i in range(1001)]))
    assert refusal.startswith("54000 ") and "1001 elements" in refusal, refusal
    assert _budget(server) == before
