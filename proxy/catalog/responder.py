"""The catalog responder: answers psql's \\dt and \\d, JDBC's DatabaseMetaData, SQLAlchemy's
inspector, DBeaver's and Metabase's connect queries, ``SELECT 1`` and ``SELECT version()``.

Answers come from the emulated catalog (the tables the analyst may query, their columns and
types), never from the database: nothing reads data and nothing is charged.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from proxy import __version__
from proxy.catalog.contents import Declared
from proxy.catalog.database import CatalogDatabase, CatalogQueryFailed, CatalogQueryTooLong
from proxy.catalog.pgtypes import result_type
from proxy.catalog.result_cache import RESULT_CACHE_SIZE, ResultCache
from proxy.catalog.text import pg_text
from proxy.catalog.translate import CatalogRefused, SessionValues, remembered_translation
from proxy.responders import SessionContext
from proxy.seam import ColumnDescription, QueryError, StatementResult
from proxy.sqlstate import FEATURE_NOT_SUPPORTED, QUERY_CANCELED
from rewriter import Catalog

logger = logging.getLogger("dpproxy.catalog")

VERSION = f"PostgreSQL 15.0 (dpproxy {__version__}) on x86_64-pc-linux-gnu, 64-bit"
DEFAULT_DATABASE = "dpproxy"


class CatalogResponder:
    """One per server: builds the emulated catalog once from the Catalog."""

    def __init__(self, catalog: Catalog, declared: Declared | None = None) -> None:
        """``declared``: table -> column -> the type the database declares, shown instead
        of the rewriter's coarse type (e.g. integer and character varying, not bigint and
        text)."""
        self._database = CatalogDatabase(catalog, declared)
        self._results = ResultCache(RESULT_CACHE_SIZE)

    async def answer(self, sql: str, context: SessionContext) -> StatementResult | None:
        return await self.answer_with_parameters(sql, context, ())

    async def answer_with_parameters(
        self, sql: str, context: SessionContext, parameters: Sequence[str | None]
    ) -> StatementResult | None:
        """As ``answer``, with the text values of $1, $2, ... (extended protocol)."""
        session = SessionValues(
            user=context.asker.analyst,
            database=context.database or DEFAULT_DATABASE,
            version=VERSION,
            settings=dict(context.parameters),
        )
        try:
            translation = remembered_translation(sql, session, parameters)
        except CatalogRefused as refusal:
            raise QueryError(FEATURE_NOT_SUPPORTED, refusal.message, hint=refusal.hint) from None
        if translation is None:
            return None
        cached = self._results.get(translation.sql)
        if cached is not None:
            return cached
        try:
            output = await self._database.run(translation.sql)
        except CatalogQueryTooLong as error:
            raise QueryError(
                QUERY_CANCELED,
                f"catalog query stopped: {error}",
                hint="ask for fewer catalog rows",
            ) from None
        except CatalogQueryFailed as error:
            logger.info("catalog query not answered: %s | %s", error, sql)
            raise QueryError(
                FEATURE_NOT_SUPPORTED,
                "dpproxy cannot answer this catalog query",
                detail=str(error),
                hint="dpproxy emulates the PostgreSQL catalog for the tables you may query; "
                "simplify the query or report it to your dpproxy admin",
            ) from None
        names = translation.column_names or ()
        if len(names) != len(output.column_types):
            names = tuple(output.column_names)
        columns = tuple(
            ColumnDescription(name, *result_type(duck_type))
            for name, duck_type in zip(names, output.column_types, strict=True)
        )
        rows = tuple(tuple(pg_text(v) for v in row) for row in output.rows)
        result = StatementResult(tag=f"SELECT {len(rows)}", columns=columns, rows=rows)
        self._results.put(translation.sql, result)
        return result

    def close(self) -> None:
        self._database.close()
