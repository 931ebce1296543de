"""The text of a released ``double precision`` or ``real`` (proxy.float_text, used by
proxy.postprocess.format_value) is PostgreSQL 15's float8out / float4out, compared value by
value with PostgreSQL (found by comparing answers: ``AVG(cost)::real`` was sent as
1.100000023841858 for PostgreSQL's 1.1, and 1e15 as 1000000000000000.0 for 1e+15)."""

from __future__ import annotations

import dataclasses
import math
import random
import struct
from collections.abc import Iterator, Sequence

import psycopg
import pytest

from proxy.float_text import float4_text, float8_text
from proxy.postprocess import PostProcessor, format_value
from rewriter import PlanRequest, plan
from tests.rewriter.noise import ZeroNoise
from tests.rewriter.tables import catalog

NAN, INF = float("nan"), float("inf")


def _as_real(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def doubles() -> list[float]:
    rnd = random.Random(20260601)
    values = [0.0, -0.0, 1.0, -1.0, 2.0, 0.5, 1e15, -1e15, 1e16, 999999999999999.0, 1e-4, 1e-5]
    values += [1234567890123456.0, 123456789012345.6, 1000000000000000.2, 2562.0, 0.1, 1 / 3]
    values += [5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, NAN, INF, -INF]
    values += [1e23, 9.999999999999999e22, 2.585272296940709e16, 5.224044899153618e16]
    values += [s * 10.0**k for k in range(-323, 309) for s in (1, -1)]
    values += [s * 2.0**k for k in range(-1074, 1024) for s in (1, -1)]
    values += [float(10**k + d) for k in range(14, 19) for d in (-1, 1, 2, 5)]
    values += [struct.unpack("<d", struct.pack("<Q", rnd.getrandbits(64)))[0] for _ in range(4000)]
    values += [rnd.uniform(-1, 1) * 10.0 ** rnd.randint(-320, 300) for _ in range(4000)]
    values += [rnd.uniform(0, 20000) for _ in range(2000)]
    values += [float(rnd.randint(1, 2 ** rnd.randint(1, 80))) for _ in range(2000)]
    # large whole numbers: digit strings halfway between two doubles
    values += [float(rnd.randint(1, 2**53) * 2 ** rnd.randint(1, 70)) for _ in range(2000)]
    return values


def reals() -> list[float]:
    rnd = random.Random(20260602)
    values = [0.0, -0.0, 1.1, 2.5, -80706896.0, 1e6, 999999.0, 123456.0, 1234567.0, NAN, INF]
    values += [1e-4, 1e-5, 16777217.0, 3.4028234663852886e38, 1.401298464324817e-45, -INF]
    values += [s * 10.0**k for k in range(-45, 39) for s in (1, -1)]
    values += [s * 2.0**k for k in range(-149, 128) for s in (1, -1)]
    values += [struct.unpack("<f", struct.pack("<I", rnd.getrandbits(32)))[0] for _ in range(6000)]
    values += [rnd.uniform(-1, 1) * 10.0 ** rnd.randint(-44, 38) for _ in range(3000)]
    values += [rnd.uniform(0, 20000) for _ in range(2000)]
    values += [float(rnd.randint(1, 2**24) * 2 ** rnd.randint(0, 100)) for _ in range(2000)]
    return [_as_real(v) if math.isfinite(v) and abs(v) < 3.4e38 else v for v in values]


@pytest.fixture(scope="module")
def pg(pg_dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


def _theirs(
    pg: psycopg.Connection[tuple[object, ...]], values: Sequence[float], typed: str
) -> list[str]:
    rows = pg.execute(
        f"SELECT v::{typed}::text FROM unnest(%s::float8[]) WITH ORDINALITY AS u(v, i) ORDER BY i",
        (list(values),),
    ).fetchall()
    return [str(row[0]) for row in rows]


@pytest.mark.postgres
def test_doubles_as_float8out(pg: psycopg.Connection[tuple[object, ...]]) -> None:
    values = doubles()
    assert len(values) > 15000
    ours = [float8_text(v) for v in values]
    found = [(v, o, t) for v, o, t in zip(values, ours, _theirs(pg, values, "float8"), strict=True)]
    assert [f for f in found if f[1] != f[2]] == []


@pytest.mark.postgres
def test_reals_as_float4out(pg: psycopg.Connection[tuple[object, ...]]) -> None:
    values = reals()
    assert len(values) > 13000
    ours = [float4_text(v) for v in values]
    found = [(v, o, t) for v, o, t in zip(values, ours, _theirs(pg, values, "real"), strict=True)]
    assert [f for f in found if f[1] != f[2]] == []


@pytest.mark.parametrize(
    ("value", "real", "text"),
    [
        (2.0, False, "2"),
        (1e15, False, "1e+15"),
        (-1e15, False, "-1e+15"),
        (1234567890123456.0, False, "1.234567890123456e+15"),
        (999999999999999.0, False, "999999999999999"),
        (1e-5, False, "1e-05"),
        (0.0001, False, "0.0001"),
        (1e100, False, "1e+100"),
        (-0.0, False, "-0"),
        (NAN, False, "NaN"),
        (-INF, False, "-Infinity"),
        (2.585272296940709e16, False, "2.5852722969407088e+16"),  # not halfway: Ryu's
        (_as_real(1.1), True, "1.1"),
        (_as_real(2476.885), True, "2476.885"),
        (_as_real(15093.333), True, "15093.333"),
        (1e6, True, "1e+06"),
        (123456.0, True, "123456"),
        (-80706896.0, True, "-8.0706896e+07"),
        (1.1, True, "1.1"),  # a double is first rounded to a real
        (1e39, True, "Infinity"),
        (-0.0, True, "-0"),
    ],
)
def test_format_value(value: float, real: bool, text: str) -> None:
    assert format_value(value, real=real) == text


def test_answers_send_reals_and_doubles_as_postgresql() -> None:
    sql = (
        "SELECT AVG(cost)::real AS r, AVG(cost) AS d, COUNT(*)::real AS c, "
        "COUNT(*) * 1e15::float8 AS big FROM visits"
    )
    made = plan(sql, catalog("main"), PlanRequest(1.0, delta=1e-6))
    released = dataclasses.replace(made.release([], ZeroNoise()), rows=((1.1, 2.0),))
    answer = PostProcessor().run(released, made.post_sql)
    assert [c.type_oid for c in answer.columns] == [700, 701, 700, 701]
    assert answer.rows == (("1.1", "1.1", "2", "2e+15"),)
