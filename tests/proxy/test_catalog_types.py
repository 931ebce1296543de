"""The catalog shows the types the database declares (not the rewriter's coarse ones), and
remembers only answers that cannot change."""

from __future__ import annotations

import pytest

from proxy.backends import DeclaredType, column_types, group_declared
from proxy.catalog.pgtypes import declared_type
from proxy.catalog.result_cache import MAX_CACHED_ROWS, ResultCache
from proxy.seam import StatementResult
from rewriter import ColumnType


@pytest.mark.parametrize(
    ("declared", "expected"),
    [
        (DeclaredType("integer"), (23, -1)),
        (DeclaredType("INTEGER"), (23, -1)),
        (DeclaredType("BIGINT"), (20, -1)),
        (DeclaredType("smallint"), (21, -1)),
        (DeclaredType("TINYINT"), (21, -1)),
        (DeclaredType("HUGEINT"), (1700, -1)),
        (DeclaredType("VARCHAR"), (1043, -1)),
        (DeclaredType("character varying", length=20), (1043, 24)),
        (DeclaredType("character", length=3), (1042, 7)),
        (DeclaredType("text"), (25, -1)),
        (DeclaredType("DOUBLE"), (701, -1)),
        (DeclaredType("double precision"), (701, -1)),
        (DeclaredType("FLOAT"), (700, -1)),
        (DeclaredType("real"), (700, -1)),
        (DeclaredType("numeric", precision=10, scale=2), (1700, (10 << 16 | 2) + 4)),
        (DeclaredType("DECIMAL(18,3)"), (1700, (18 << 16 | 3) + 4)),
        (DeclaredType("numeric"), (1700, -1)),
        (DeclaredType("DATE"), (1082, -1)),
        (DeclaredType("timestamp without time zone"), (1114, -1)),
        (DeclaredType("TIMESTAMP WITH TIME ZONE"), (1184, -1)),
        (DeclaredType("BOOLEAN"), (16, -1)),
        (DeclaredType("UUID"), (2950, -1)),
    ],
)
def test_declared_types(declared: DeclaredType, expected: tuple[int, int]) -> None:
    shown = declared_type(declared.name, declared.length, declared.precision, declared.scale)
    assert shown == expected


def test_unknown_declared_type_falls_back() -> None:
    assert declared_type("USER-DEFINED", None, None, None) is None
    assert declared_type("STRUCT(a INTEGER)", None, None, None) is None


def test_schema_rows_give_declared_and_coarse_types() -> None:
    rows: list[tuple[object, ...]] = [
        ("visits", "visit_id", "bigint", None, 64, 0),
        ("visits", "department", "character varying", 40, None, None),
        ("visits", "cost", "numeric", None, 10, 2),
    ]
    declared = group_declared(rows)
    assert declared["visits"]["department"] == DeclaredType("character varying", length=40)
    assert declared["visits"]["cost"] == DeclaredType("numeric", precision=10, scale=2)
    assert column_types(declared) == {
        "visits": {
            "visit_id": ColumnType.INTEGER,
            "department": ColumnType.TEXT,
            "cost": ColumnType.DECIMAL,
        }
    }


def test_result_cache_keeps_only_stable_small_answers() -> None:
    cache = ResultCache(2)
    one = StatementResult(tag="SELECT 1", rows=(("1",),))
    cache.put("SELECT 1", one)
    assert cache.get("SELECT 1") is one
    cache.put("SELECT now()", one)
    cache.put("SELECT random()", one)
    cache.put("SELECT CURRENT_TIMESTAMP", one)
    assert len(cache) == 1
    big = StatementResult(tag="SELECT", rows=(("x",),) * (MAX_CACHED_ROWS + 1))
    cache.put("SELECT big", big)
    assert cache.get("SELECT big") is None
    cache.put("SELECT 2", one)
    cache.put("SELECT 3", one)
    assert cache.get("SELECT 1") is None and cache.get("SELECT 3") is one  # LRU, size 2
