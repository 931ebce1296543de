"""What an analyst reads in dpproxy.my_queries of a query that failed after its charge:
what failed in dpproxy's words, never the database's message, which may quote a value
(the audit record of a failed post-processing: tests/proxy/test_answer_cache.py)."""

from __future__ import annotations

import pytest

from proxy.selfservice import FAILED_REASON, failed_reason


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        (
            "QueryCanceled: canceled due to statement timeout",
            "canceled due to statement timeout; the charge stands",
        ),
        (
            "BackendError: DuckDB: Catalog Error: Table with name visits does not exist!",
            FAILED_REASON,
        ),
        # A reason an older dpproxy stored, with the database's message: never shown.
        (
            "PostProcessError: Conversion Error: Type INT64 with value 47314 can't be cast",
            FAILED_REASON,
        ),
        (None, FAILED_REASON),
    ],
)
def test_the_analyst_reads_what_failed_never_the_database_s_message(
    stored: str | None, shown: str
) -> None:
    assert failed_reason(stored) == shown
