"""Adversarial real values on each engine: huge, tiny, NaN, ±Infinity, -0.0, subnormals,
and one person with very many rows.

For every engine the rewritten SQL must
- never fail (an error that depends on the data would be a side channel after the charge),
- return exact integer totals on the fixed-point grid, the same on DuckDB and PostgreSQL,
- move each measurement's totals by at most the sensitivity its noise is calibrated to when
  the adversarial person is removed (neighbouring databases),
- and the released values stay within their declared bounds.
"""

from __future__ import annotations

import math
import random
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import duckdb
import psycopg
import pytest

from rewriter import ColumnPolicy, ColumnType, PlanRequest, TablePolicy, build_catalog, plan
from rewriter.plan import Plan
from tests.rewriter.coupling import in_key_order, sensitivity
from tests.rewriter.noise import ZeroNoise as NoNoise

DOUBLE_MAX = 1.7976931348623157e308
ADVERSARIAL = [
    DOUBLE_MAX,
    -DOUBLE_MAX,
    5e-324,  # the smallest subnormal
    -5e-324,
    -0.0,
    math.nan,
    math.inf,
    -math.inf,
    1e-300,
    2.0**53 + 2,
    -(2.0**63),
    1e6 * (1 + 2**-52),  # just past the upper bound of the wide catalog
    0.1,
]
ADVERSARY = 999
MANY_ROWS = 20_000  # the adversary's rows; max_rows_per_unit is 4

COLUMNS = {
    "reading_id": ColumnType.INTEGER,
    "person_id": ColumnType.INTEGER,
    "grp": ColumnType.TEXT,
    "value": ColumnType.FLOAT,
}
CREATE = (
    "CREATE TABLE {schema}.readings (reading_id BIGINT, person_id BIGINT, grp VARCHAR, "
    "value DOUBLE PRECISION)"
)
#: Bounds from very wide to very narrow: the grid step follows the largest bound.
BOUNDS = [(-1e6, 1e6), (0.0, 1e-9), (-3.5, 2.25)]
QUERIES = [
    "SELECT COUNT(value), SUM(value), AVG(value) FROM readings",
    "SELECT grp, SUM(value * 2.5), VAR_POP(value), COUNT(*) FROM readings GROUP BY grp",
    "SELECT SUM(value - 1), STDDEV_SAMP(value) FROM readings WHERE value > 0 OR value <= 0",
    "SELECT SUM(CASE WHEN value > 0 THEN value ELSE 0 END) FROM readings",
    "SELECT width_bucket(value, 0, 1e10, 10) AS b, COUNT(*) FROM readings GROUP BY 1",
    "SELECT SUM((value - 0.1) * (value - 0.1) * 1e-30), VAR_SAMP(value * 1000) FROM readings",
]

Row = tuple[int, int, str, float]


def catalog_for(lower: float, upper: float, schema: str):  # type: ignore[no-untyped-def]
    policy = TablePolicy(
        privacy_unit="person_id",
        max_rows_per_unit=4,
        max_groups_per_unit=3,  # the adversary's width_bucket groups: all kept, no random pick
        columns={
            "value": ColumnPolicy(lower=lower, upper=upper),
            "grp": ColumnPolicy(domain=["a", "b"]),
        },
    )
    return build_catalog({"readings": COLUMNS}, {"readings": policy}, schema=schema)


def rows(lower: float, upper: float) -> list[Row]:
    """Fifty ordinary people (some values beyond the bounds), then the adversary."""
    draw = random.Random(7)
    made: list[Row] = []
    for person in range(1, 51):
        for _ in range(draw.randint(1, 6)):
            value = draw.uniform(lower - (upper - lower), upper + (upper - lower))
            made.append((len(made) + 1, person, draw.choice("ab"), value))
    for index in range(MANY_ROWS):
        value = ADVERSARIAL[index % len(ADVERSARIAL)]
        made.append((len(made) + 1, ADVERSARY, "ab"[index % 2], value))
    return made


def duckdb_totals(data: Sequence[Row], sql: str, keys: int) -> dict[tuple[object, ...], list[int]]:
    conn = duckdb.connect(":memory:")
    conn.execute(CREATE.format(schema="main"))
    # Through CSV text: a pandas frame would turn NaN into NULL on the way in.
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "readings.csv"
        path.write_text("".join(f"{i},{p},{g},{v!r}\n" for i, p, g, v in data))
        conn.execute(f"COPY main.readings FROM '{path}' (HEADER false)")
    assert conn.execute("SELECT count(*) FROM main.readings WHERE isnan(value)").fetchone() == (
        sum(1 for row in data if math.isnan(row[3])),
    )
    return _totals(conn.execute(sql).fetchall(), keys)


def postgres_totals(
    dsn: str, schema: str, data: Sequence[Row], sql: str, keys: int
) -> dict[tuple[object, ...], list[int]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP TABLE IF EXISTS "{schema}".readings')
        conn.execute(CREATE.format(schema=f'"{schema}"'))
        with conn.cursor() as cur, cur.copy(f'COPY "{schema}".readings FROM STDIN') as copy:
            for row in data:
                copy.write_row(row)
        return _totals(conn.execute(sql).fetchall(), keys)


def _totals(result: Sequence[Sequence[object]], keys: int) -> dict[tuple[object, ...], list[int]]:
    found: dict[tuple[object, ...], list[int]] = {}
    for row in result:
        values = row[keys:]
        for value in values:
            # Exact integers, never NULL, NaN or a float that could carry rounding.
            assert isinstance(value, int) or (
                hasattr(value, "to_integral_value") and value == value.to_integral_value()  # type: ignore[union-attr]
            ), (row, value)
        found[tuple(row[:keys])] = [int(v) for v in values]  # type: ignore[call-overload]
    return found


def check_neighbours(
    made: Plan,
    with_adversary: dict[tuple[object, ...], list[int]],
    without: dict[tuple[object, ...], list[int]],
) -> None:
    zeros = [0] * len(made.measurements)
    for index, measurement in enumerate(made.measurements):
        change = sum(
            abs(with_adversary.get(cell, zeros)[index] - without.get(cell, zeros)[index])
            for cell in set(with_adversary) | set(without)
        )
        bound = sensitivity(made, measurement)
        assert change <= bound, (measurement.spec.key, change, bound)
        assert measurement.mechanism.sensitivity == bound


def cases() -> Iterator[tuple[tuple[float, float], str]]:
    for bounds in BOUNDS:
        for query in QUERIES:
            yield bounds, query


@pytest.mark.parametrize(("bounds", "query"), list(cases()))
def test_duckdb_stays_within_the_sensitivity(bounds: tuple[float, float], query: str) -> None:
    lower, upper = bounds
    made = plan(query, catalog_for(lower, upper, "main"), PlanRequest(1.0))
    data = rows(lower, upper)
    keys = len(made.keys)
    sql = in_key_order(made)  # the same groups kept in both worlds, and on both engines
    with_adversary = duckdb_totals(data, sql, keys)
    without = duckdb_totals([r for r in data if r[1] != ADVERSARY], sql, keys)
    check_neighbours(made, with_adversary, without)
    released = made.release([[*cell, *v] for cell, v in with_adversary.items()], NoNoise())
    for output, column in zip(made.outputs, range(keys, keys + len(made.outputs)), strict=True):
        for row in released.rows:
            value = row[column]
            assert isinstance(value, int | float) and math.isfinite(value), (output, row)


@pytest.mark.parametrize(("bounds", "query"), list(cases()))
def test_postgres_matches_duckdb_and_stays_within_the_sensitivity(
    bounds: tuple[float, float], query: str, pg_dsn: str, pg_schema: str
) -> None:
    lower, upper = bounds
    request = PlanRequest(1.0, dialect="postgres")
    made = plan(query, catalog_for(lower, upper, pg_schema), request)
    data = rows(lower, upper)
    keys = len(made.keys)
    sql = in_key_order(made)
    with_adversary = postgres_totals(pg_dsn, pg_schema, data, sql, keys)
    without = postgres_totals(pg_dsn, pg_schema, [r for r in data if r[1] != ADVERSARY], sql, keys)
    check_neighbours(made, with_adversary, without)
    # The fixed-point grid makes both engines agree to the last unit.
    in_duckdb = plan(query, catalog_for(lower, upper, "main"), PlanRequest(1.0))
    assert duckdb_totals(data, in_key_order(in_duckdb), keys) == with_adversary
