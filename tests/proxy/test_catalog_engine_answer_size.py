"""One catalog answer may take at most MAX_ANSWER_BYTES as sent to the server (its rows,
pickled): the engine refuses a longer one before sending it, so the server never holds
more. Before, answers up to 64 MB (by the engine's estimate of their values: their text's
length in characters) came whole into the server, whose memory grew by four times that;
and text of many-byte characters passed even that estimate (6 million '€' counted 6 MB,
sent 18 MB).

Clients' catalog queries need far less: the largest, whole catalog tables, are checked
here too. A real engine process.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from proxy.catalog.database import CatalogDatabase, CatalogResultTooLarge
from proxy.catalog.engine_process import MAX_ANSWER_BYTES
from proxy.catalog.messages import encode
from tests.proxy.test_catalog_engine import _catalog

MB = 1024 * 1024
#: 16 values as long as can be sent: the frame's other bytes (its length, the pickled
#: reply and column) take 352 bytes.
LARGEST_VALUE = (MAX_ANSWER_BYTES - 352) // 16
#: Whole catalog tables, the largest answers clients' metadata queries could ask for.
WHOLE_TABLES = (
    "SELECT * FROM pg_catalog.pg_proc",
    "SELECT * FROM pg_catalog.pg_attribute",
    "SELECT * FROM information_schema.columns",
    "SELECT * FROM pg_catalog.pg_settings",
)


@pytest.fixture(scope="module")
def database() -> Iterator[CatalogDatabase]:
    database = CatalogDatabase(_catalog())
    yield database
    database.close()


def test_an_answer_just_under_the_limit_is_sent_whole(database: CatalogDatabase) -> None:
    answer = database.run_blocking(
        f"SELECT repeat('x', {LARGEST_VALUE}) AS v FROM generate_series(1, 16)"
    )
    assert answer.rows == [("x" * LARGEST_VALUE,)] * 16


@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT repeat('x', {LARGEST_VALUE + 1}) AS v FROM generate_series(1, 16)",
        f"SELECT repeat('x', {MB}) AS v FROM generate_series(1, 40)",
        # 6 million characters, 18 MB of UTF-8: within the engine's estimate (64 MB).
        "SELECT repeat('€', 6000000) AS v",
    ],
)
def test_an_answer_over_the_limit_is_refused_by_the_engine(
    database: CatalogDatabase, sql: str
) -> None:
    engine = database.engine_pid
    with pytest.raises(CatalogResultTooLarge, match=r"its answer is larger than 16 MB$"):
        database.run_blocking(sql)
    assert database.run_blocking("SELECT 42").rows == [(42,)]
    assert database.engine_pid == engine  # refused, not restarted


@pytest.mark.parametrize("sql", WHOLE_TABLES)
def test_whole_catalog_tables_are_far_under_the_limit(database: CatalogDatabase, sql: str) -> None:
    assert len(encode(database.run_blocking(sql))) < MAX_ANSWER_BYTES // 16
