"""jsonb columns of catalog answers are described as jsonb (3802), as PostgreSQL describes
them: DuckDB has one JSON type, which the catalog showed as json (114) whatever the query
said."""

from __future__ import annotations

import pytest
import sqlglot

from proxy.catalog.output_types import jsonb_outputs
from proxy.catalog.pgtypes import result_type

JSON, JSONB, TEXT = 114, 3802, 25


@pytest.mark.parametrize(
    ("sql", "jsonb"),
    [
        ("SELECT '{}'::jsonb j, '{}'::json k", {0}),
        ("SELECT to_jsonb(1), jsonb_build_object('a', 1), (CAST('1' AS jsonb)) x", {0, 1, 2}),
        ("SELECT '1'::json::jsonb UNION ALL SELECT '2'::jsonb", {0}),
        ("SELECT j FROM (SELECT '{}'::jsonb j) s", set()),  # read through a subquery: json
        ("SELECT *", set()),
    ],
)
def test_jsonb_columns_are_typed_jsonb(sql: str, jsonb: set[int]) -> None:
    assert jsonb_outputs(sqlglot.parse_one(sql, read="postgres")) == jsonb
    assert result_type("JSON", jsonb=True) == (JSONB, -1)
    assert result_type("JSON") == (JSON, -1)
    assert result_type("VARCHAR", jsonb=True) == (TEXT, -1)  # only a JSON answer is jsonb
