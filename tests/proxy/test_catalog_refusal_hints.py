"""A catalog query dpproxy refuses when it runs (to_char of a year BC, an abbreviation it
does not know) tells what to write instead in the error's HINT, as PostgreSQL gives
advice; the DETAIL is left for facts (it carried the advice before)."""

from __future__ import annotations

import asyncio

import pytest

from proxy.seam import QueryError
from tests.proxy.catalog_arithmetic_cases import catalog_session


@pytest.mark.parametrize(
    ("sql", "message", "hint"),
    [
        (
            "SELECT to_char(x - interval '3000 years', 'YYYY') "
            "FROM (SELECT '2000-03-15'::timestamp AS x) t",
            "dpproxy does not format years BC with to_char()",
            "Cast the value to text.",
        ),
        (
            "SELECT s::timestamptz FROM (SELECT '2024-03-31 02:30 Europe/Paris' AS s) t",
            "dpproxy cannot read this text as a timestamp with time zone",
            "+02:00",
        ),
    ],
)
def test_advice_is_a_hint(sql: str, message: str, hint: str) -> None:
    with catalog_session() as (responder, context), pytest.raises(QueryError) as raised:
        asyncio.run(responder.answer(sql, context))
    assert raised.value.sqlstate == "0A000"
    assert raised.value.message == message
    assert raised.value.hint is not None and hint in raised.value.hint
    assert raised.value.detail is None
