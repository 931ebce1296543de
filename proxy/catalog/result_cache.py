"""Answers to catalog queries, remembered by their translated SQL.

The emulated catalog never changes once built, and a translation has every session value
(user, database, settings, parameters) written into its SQL as literals, so the same
translated SQL always has the same answer, unless it calls a function whose value changes
(now(), random(), ...): such answers are never kept. Clients repeat their metadata queries
(``SELECT 1``, ``SELECT version()``, JDBC's DatabaseMetaData) on every connection.
"""

from __future__ import annotations

import re
from collections import OrderedDict

from proxy.seam import StatementResult

RESULT_CACHE_SIZE = 256
MAX_CACHED_ROWS = 1000
#: Larger answers are not kept (at most 64 MB in all, with RESULT_CACHE_SIZE answers).
MAX_CACHED_BYTES = 256 * 1024
# Anything that may change between two runs of the same SQL (conservative: a false match
# only means the answer is computed again).
_VOLATILE = re.compile(
    r"now|rand|uuid|current_|localtime|clock|timeofday|timestamp|nextval|setseed|today",
    re.IGNORECASE,
)


class ResultCache:
    """A bounded least-recently-used map of translated SQL to its answer."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._results: OrderedDict[str, StatementResult] = OrderedDict()

    def get(self, sql: str) -> StatementResult | None:
        found = self._results.get(sql)
        if found is not None:
            self._results.move_to_end(sql)
        return found

    def put(self, sql: str, result: StatementResult, size: int = 0) -> None:
        """Keep ``result`` unless it is large (``size``: about its bytes) or may change."""
        if len(result.rows) > MAX_CACHED_ROWS or size > MAX_CACHED_BYTES or _VOLATILE.search(sql):
            return
        self._results[sql] = result
        if len(self._results) > self._size:
            self._results.popitem(last=False)

    def __len__(self) -> int:
        return len(self._results)
