"""Floats in catalog answers as PostgreSQL 15 writes them (float8out, float4out).

Before: the catalog wrote a float with Python's shortest digits, which may lie exactly
halfway between two floats, where PostgreSQL's (Ryu) never do: the real -80706896 came
out as -8.07069e+07 (PostgreSQL: -8.0706896e+07), the double 2.5852722969407088e+16 as
2.585272296940709e+16. The catalog now writes proxy.float_text's text, as the DP answers
do. With extra_float_digits at 0 or below (a client's SET, as before PostgreSQL 12)
PostgreSQL writes %.15g (%.6g) plus extra_float_digits digits: proxy.float_text,
pg_text and format_value take it. Each value is compared with the real PostgreSQL.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Iterator

import psycopg
import pytest

from proxy.catalog.text import pg_text
from proxy.float_text import float4_text, float8_text
from proxy.postprocess import format_value

Connection = psycopg.Connection[tuple[object, ...]]

pytestmark = pytest.mark.postgres

#: Values whose shortest digits lie halfway between two floats (found against PostgreSQL).
HALFWAY_DOUBLES = [
    2.5852722969407088e16,
    5.426763153133352e17,
    5.925490765873106e16,
    -5.42538114927507e16,
    2.684891475042848e18,
    -1.263132356646384e18,
    -3.694899239908696e17,
    1.765150774259044e17,
]
HALFWAY_REALS = [
    -80706896.0,
    108218144.0,
    985459968.0,
    -76859264.0,
    -1868408064.0,
    464718016.0,
    38463288.0,
    655048832.0,
    67110704.0,
]
PLAIN = [0.0, -0.0, 1.0, 0.1, 1e15, 1e16, 1e-5, 0.0001, -2.5, 1e300, 123456789012345678.0,
         0.30000000000000004, 100.0, 2.5e-10, 1.5, float("nan"), float("inf"),
         float("-inf")]  # fmt: skip


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[Connection]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


def _real(value: float) -> float:
    try:
        return float(struct.unpack("<f", struct.pack("<f", value))[0])
    except OverflowError:
        return value


def _sample(count: int, seed: int) -> list[float]:
    """Doubles of every kind: whole numbers up to 2**62 (where halfway strings are found),
    random bit patterns, fractions over powers of two."""
    rnd = random.Random(seed)
    values: list[float] = []
    while len(values) < count:
        kind = rnd.randrange(3)
        if kind == 0:
            value = float(rnd.randrange(-(2**62), 2**62))
        elif kind == 1:
            value = struct.unpack("<d", struct.pack("<Q", rnd.getrandbits(64)))[0]
        else:
            value = rnd.randrange(-(10**9), 10**9) / 2 ** rnd.randrange(40)
        if value == value and abs(value) != float("inf"):
            values.append(value)
    return values


def _postgres_texts(
    postgres: Connection, values: list[float], real: bool, extra_float_digits: int = 1
) -> list[str]:
    """PostgreSQL's text of each value (sent as its exact digits) as a double or a real."""
    kind = "float4" if real else "float8"
    postgres.execute(f"SET extra_float_digits = {extra_float_digits}")
    try:
        row = postgres.execute(
            f"SELECT array_agg(v::float8::{kind}::text ORDER BY n) "
            "FROM unnest(%s::text[]) WITH ORDINALITY AS t(v, n)",
            ([repr(v) for v in values],),
        ).fetchone()
    finally:
        postgres.execute("RESET extra_float_digits")
    assert row is not None and isinstance(row[0], list)
    return [str(text) for text in row[0]]


@pytest.mark.parametrize("value", HALFWAY_DOUBLES + PLAIN)
def test_halfway_doubles_are_written_as_postgresql_writes_them(
    postgres: Connection, value: float
) -> None:
    assert pg_text(value) == _postgres_texts(postgres, [value], real=False)[0]


@pytest.mark.parametrize("value", HALFWAY_REALS + [v for v in PLAIN if abs(v) < 3e38 or v != v])
def test_halfway_reals_are_written_as_postgresql_writes_them(
    postgres: Connection, value: float
) -> None:
    assert pg_text(value, real=True) == _postgres_texts(postgres, [value], real=True)[0]


def test_a_sample_of_doubles_and_reals_is_written_as_postgresql_writes_it(
    postgres: Connection,
) -> None:
    doubles = _sample(3000, seed=15)
    reals = [_real(v) for v in doubles if abs(v) < 3.4e38]
    ours = [pg_text(v) for v in doubles]
    assert [
        (v, a, b)
        for v, a, b in zip(doubles, ours, _postgres_texts(postgres, doubles, False), strict=True)
        if a != b
    ] == []
    ours = [pg_text(v, real=True) for v in reals]
    assert [
        (v, a, b)
        for v, a, b in zip(reals, ours, _postgres_texts(postgres, reals, True), strict=True)
        if a != b
    ] == []


def test_arrays_of_floats_are_written_with_postgresqls_digits() -> None:
    assert pg_text([-80706896.0, 1.0], real=True) == "{-8.0706896e+07,1}"
    assert pg_text([2.5852722969407088e16, None]) == "{2.5852722969407088e+16,NULL}"


@pytest.mark.parametrize("extra_float_digits", [0, -1, -4, -15, 1, 2, 3])
def test_extra_float_digits_is_honoured_as_postgresql_honours_it(
    postgres: Connection, extra_float_digits: int
) -> None:
    doubles = PLAIN + HALFWAY_DOUBLES + _sample(400, seed=extra_float_digits + 100)
    reals = [_real(v) for v in doubles if abs(v) < 3.4e38 or v != v] + HALFWAY_REALS
    theirs = _postgres_texts(postgres, doubles, False, extra_float_digits)
    for value, text in zip(doubles, theirs, strict=True):
        assert float8_text(value, extra_float_digits) == text, value
        assert pg_text(value, extra_float_digits=extra_float_digits) == text, value
        assert format_value(value, extra_float_digits=extra_float_digits) == text, value
    theirs = _postgres_texts(postgres, reals, True, extra_float_digits)
    for value, text in zip(reals, theirs, strict=True):
        assert float4_text(value, extra_float_digits) == text, value
        assert pg_text(value, True, extra_float_digits) == text, value
        assert format_value(value, real=True, extra_float_digits=extra_float_digits) == text
