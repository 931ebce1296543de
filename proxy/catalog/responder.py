"""The catalog responder: answers psql's \\dt and \\d, JDBC's DatabaseMetaData, SQLAlchemy's
inspector, DBeaver's and Metabase's connect queries, ``SELECT 1`` and ``SELECT version()``.

Answers come from the emulated catalog (the tables the analyst may query, their columns and
types), never from the database: nothing reads data and nothing is charged.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from typing import NamedTuple

from proxy import __version__
from proxy.catalog.contents import Declared
from proxy.catalog.database import (
    CatalogDatabase,
    CatalogQueryFailed,
    CatalogQueryTooLong,
    CatalogResultTooLarge,
)
from proxy.catalog.pgtypes import result_type
from proxy.catalog.result_cache import RESULT_CACHE_SIZE, ResultCache
from proxy.catalog.text import pg_text
from proxy.catalog.translate import (
    CACHED_LENGTH,
    PARSE_CACHE_SIZE,
    CatalogRefused,
    SessionValues,
    Translation,
    remembered_translation,
)
from proxy.responders import SessionContext
from proxy.seam import ColumnDescription, QueryError, StatementResult
from proxy.sqlstate import FEATURE_NOT_SUPPORTED, QUERY_CANCELED
from proxy.workers import Workers
from rewriter import Catalog
from rewriter.parse import MAX_SQL_LENGTH

logger = logging.getLogger("dpproxy.catalog")

VERSION = f"PostgreSQL 15.0 (dpproxy {__version__}) on x86_64-pc-linux-gnu, 64-bit"
DEFAULT_DATABASE = "dpproxy"
#: Threads that parse, translate and run catalog queries (one at a time per analyst).
CATALOG_THREADS = 4
PROGRAM_LIMIT_EXCEEDED = "54000"


class _Refusal(NamedTuple):
    """A remembered CatalogRefused (without its traceback, which holds the parsed tree)."""

    message: str
    hint: str | None
    sqlstate: str


#: What translating a statement gave: its translation, None (not a catalog query) or a
#: refusal; remembered by statement, session values and parameters.
_Outcome = Translation | _Refusal | None
_OutcomeKey = tuple[str, str, str, str, tuple[tuple[str, str], ...], tuple[str | None, ...]]


class CatalogResponder:
    """One per server: builds the emulated catalog once from the Catalog."""

    def __init__(self, catalog: Catalog, declared: Declared | None = None) -> None:
        """``declared``: table -> column -> the type the database declares, shown instead
        of the rewriter's coarse type (e.g. integer and character varying, not bigint and
        text)."""
        self._database = CatalogDatabase(catalog, declared)
        self._results = ResultCache(RESULT_CACHE_SIZE)
        # Parsing (a long statement takes a second) and running catalog queries happen on
        # threads of their own, one job at a time per analyst: the event loop keeps
        # serving everyone, and one analyst's slow catalog queries (pg_sleep, large
        # answers) hold one thread, not all of them.
        self._workers = Workers(CATALOG_THREADS, "dpproxy-catalog")
        # Translations of short statements, looked up on the event loop (no thread for a
        # statement seen before). Kept for each analyst apart, as catalog_tree explains.
        self._outcomes: OrderedDict[_OutcomeKey, _Outcome] = OrderedDict()

    async def answer(self, sql: str, context: SessionContext) -> StatementResult | None:
        return await self.answer_with_parameters(sql, context, ())

    async def answer_with_parameters(
        self, sql: str, context: SessionContext, parameters: Sequence[str | None]
    ) -> StatementResult | None:
        """As ``answer``, with the text values of $1, $2, ... (extended protocol)."""
        if len(sql) > MAX_SQL_LENGTH:
            # Not parsed at all: the DP pipeline refuses it (54000) before parsing too.
            return None
        analyst = context.asker.analyst
        session = SessionValues(
            user=analyst,
            database=context.database or DEFAULT_DATABASE,
            version=VERSION,
            settings=dict(context.parameters),
        )
        translation = await self._translation(sql, session, parameters)
        if isinstance(translation, _Refusal):
            raise QueryError(translation.sqlstate, translation.message, hint=translation.hint)
        if translation is None:
            return None
        cached = self._results.get(translation.sql)
        if cached is not None:
            return cached
        database, translated = self._database, translation.sql
        try:
            output = await self._workers.run(analyst, lambda: database.run_blocking(translated))
        except CatalogResultTooLarge as error:
            raise QueryError(
                PROGRAM_LIMIT_EXCEEDED,
                f"catalog query stopped: {error}",
                hint="ask for fewer rows (WHERE, LIMIT) or shorter values (e.g. left(x, 100))",
            ) from None
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
        self._results.put(translation.sql, result, output.size)
        return result

    async def _translation(
        self, sql: str, session: SessionValues, parameters: Sequence[str | None]
    ) -> _Outcome:
        """The statement's translation (remembered_translation) or its refusal, computed
        on a worker thread unless remembered here."""
        key: _OutcomeKey | None = None
        if len(sql) <= CACHED_LENGTH:
            key = (
                sql,
                session.user,
                session.database,
                session.version,
                tuple(sorted(session.settings.items())),
                tuple(parameters),
            )
            if key in self._outcomes:
                self._outcomes.move_to_end(key)
                return self._outcomes[key]
        outcome = await self._workers.run(
            session.user, lambda: _translate(sql, session, parameters)
        )
        if key is not None:
            self._outcomes[key] = outcome
            if len(self._outcomes) > PARSE_CACHE_SIZE:
                self._outcomes.popitem(last=False)
        return outcome

    def close(self) -> None:
        self._workers.close()
        self._database.close()


def _translate(sql: str, session: SessionValues, parameters: Sequence[str | None]) -> _Outcome:
    try:
        return remembered_translation(sql, session, parameters)
    except CatalogRefused as refusal:
        return _Refusal(refusal.message, refusal.hint, refusal.sqlstate)
