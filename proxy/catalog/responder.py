"""The catalog responder: answers psql's \\dt and \\d, JDBC's DatabaseMetaData, SQLAlchemy's
inspector, DBeaver's and Metabase's connect queries, ``SELECT 1`` and ``SELECT version()``.

Answers come from the emulated catalog (the tables the analyst may query, their columns and
types), never from the database: nothing reads data and nothing is charged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, NamedTuple, TypeVar

from proxy import __version__
from proxy.backends import CancelToken
from proxy.catalog.cache_keys import PARSE_CACHE_SIZE, TranslationKey
from proxy.catalog.contents import Declared, Keys
from proxy.catalog.database import (
    TIMEOUT_SECONDS,
    CatalogDatabase,
    CatalogEngineDidNotStart,
    CatalogEngineLost,
    CatalogQueryCanceled,
    CatalogQueryFailed,
    CatalogQueryTimedOut,
    CatalogQueryTooLong,
    CatalogResultTooLarge,
    QueryOutput,
    QueryStop,
)
from proxy.catalog.datetimes import SessionZone, session_zone
from proxy.catalog.engine_errors import postgres_error
from proxy.catalog.pgtypes import result_type
from proxy.catalog.recent import Recent
from proxy.catalog.result_cache import RESULT_CACHE_SIZE, ResultCache
from proxy.catalog.text import pg_text
from proxy.catalog.translate import (
    CatalogRefused,
    SessionValues,
    Translation,
    cacheable,
    remembered_translation,
    translation_key,
)
from proxy.pg_settings import parameters_key
from proxy.responders import SessionContext, canceled, owned_canceled
from proxy.seam import ColumnDescription, QueryError, StatementResult
from proxy.sqlstate import FEATURE_NOT_SUPPORTED, QUERY_CANCELED
from proxy.workers import Workers
from rewriter import Catalog
from rewriter.parse import MAX_SQL_LENGTH

logger = logging.getLogger("dpproxy.catalog")
T = TypeVar("T")

VERSION = f"PostgreSQL 15.0 (dpproxy {__version__}) on x86_64-pc-linux-gnu, 64-bit"
DEFAULT_DATABASE = "dpproxy"
#: Threads that run catalog queries (one at a time per analyst), each waiting for its
#: query in the catalog engine's process (proxy.catalog.database).
CATALOG_THREADS = 4
#: Threads that parse and translate statements (one at a time per analyst): every
#: statement passes here first, to learn whether it is a catalog query.
TRANSLATION_THREADS = 4
PROGRAM_LIMIT_EXCEEDED = "54000"
INSUFFICIENT_RESOURCES = "53000"


class _Refusal(NamedTuple):
    """A remembered CatalogRefused (without its traceback, which holds the parsed tree)."""

    message: str
    hint: str | None
    sqlstate: str


#: What translating a statement gave: its translation, None (not a catalog query) or a
#: refusal; remembered by statement, session values (the session's parameters by their
#: key, pg_settings.parameters_key, never by themselves) and the values of $1, $2...
_Outcome = Translation | _Refusal | None


class CatalogResponder:
    """One per server: builds the emulated catalog once from the Catalog."""

    def __init__(self, catalog: Catalog, declared: Declared | None = None, keys: Keys = ()) -> None:
        """``declared``: table -> column -> the type the database declares, shown instead
        of the rewriter's coarse type (e.g. integer and character varying, not bigint and
        text), and whether it is NOT NULL; ``keys``: the PRIMARY KEY, UNIQUE and FOREIGN
        KEY constraints it declares (those of the tables and columns shown)."""
        self._database = CatalogDatabase(catalog, declared, keys=keys)
        self._results = ResultCache(RESULT_CACHE_SIZE)
        # Parsing (a long statement takes a second) and running catalog queries happen on
        # threads of their own, one job at a time per analyst: the event loop keeps
        # serving everyone, and one analyst's slow catalog queries (pg_sleep, large
        # answers) hold one thread, not all of them. Translating has threads apart from
        # running: a statement of the analyst's other connections (a DP query, or a
        # catalog query answered from the cache) is not held up by a catalog query that
        # runs meanwhile.
        self._translating = Workers(TRANSLATION_THREADS, "dpproxy-catalog-parse")
        self._running = Workers(CATALOG_THREADS, "dpproxy-catalog")
        # Translations of short statements, looked up on the event loop (no thread for a
        # statement seen before). Kept for each analyst apart, as catalog_tree explains.
        self._outcomes: Recent[TranslationKey, _Outcome] = Recent(PARSE_CACHE_SIZE)

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
            settings=context.parameters,  # the session's read-only snapshot: not copied
            settings_key=context.parameters_key or parameters_key(context.parameters),
            cursors=context.cursors,  # this session's own, never another's
        )
        translation = await self._translation(sql, session, parameters, context.cancel)
        if isinstance(translation, _Refusal):
            raise QueryError(translation.sqlstate, translation.message, hint=translation.hint)
        if translation is None:
            return None
        zone = session_zone(context.parameters.get("timezone", "UTC"))
        # The answer shows timestamptz values in the session's TimeZone: remembered for it.
        result_key = translation.sql if zone.name == "UTC" else f"{zone.name}\n{translation.sql}"
        cached = self._results.get(result_key)
        if cached is not None:
            return cached
        try:
            output = await self._run(analyst, translation.sql, zone, context.cancel)
        except CatalogQueryCanceled:  # a catalog query, surely: not audited as a DP one
            raise owned_canceled(context.cancel.reason) from None
        except CatalogResultTooLarge as error:
            raise QueryError(
                PROGRAM_LIMIT_EXCEEDED,
                f"catalog query stopped: {error}",
                hint="ask for fewer rows (WHERE, LIMIT) or shorter values (e.g. left(x, 100)); "
                "catalog queries are answered by dpproxy, within limits of time and memory",
            ) from None
        except CatalogQueryTimedOut as error:
            raise QueryError(
                QUERY_CANCELED,
                f"catalog query stopped: {error}",
                hint=f"catalog queries may run for {TIMEOUT_SECONDS:g} s: ask for less work, "
                "such as costly functions (levenshtein(), regexp_replace(), repeat()...) "
                "over fewer or shorter values, or fewer joined rows",
            ) from None
        except CatalogQueryTooLong as error:
            raise QueryError(
                QUERY_CANCELED,
                f"catalog query stopped: {error}",
                hint="ask for fewer catalog rows (WHERE, LIMIT)",
            ) from None
        except CatalogEngineDidNotStart as error:
            raise QueryError(
                INSUFFICIENT_RESOURCES,
                f"catalog query stopped: {error}",
                hint="send it again; if it fails again, tell your dpproxy admin (the server's "
                "log says why the catalog engine does not start)",
            ) from None
        except CatalogEngineLost as error:
            raise QueryError(
                INSUFFICIENT_RESOURCES,
                f"catalog query stopped: {error}",
                hint="send it again; if it fails again, ask for fewer rows or shorter values",
            ) from None
        except CatalogQueryFailed as error:
            postgres = postgres_error(str(error))
            if postgres is not None:  # division by zero, integer out of range...
                raise QueryError(
                    postgres.sqlstate,
                    postgres.message,
                    detail=postgres.detail,
                    hint=postgres.hint,
                ) from None
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
            ColumnDescription(name, *result_type(duck_type, i in translation.jsonb_columns))
            for i, (name, duck_type) in enumerate(zip(names, output.column_types, strict=True))
        )
        reals = [t.upper().startswith("FLOAT") for t in output.column_types]  # real, real[]
        rows = tuple(
            tuple(pg_text(v, real) for v, real in zip(row, reals, strict=True))
            for row in output.rows
        )
        result = StatementResult(tag=f"SELECT {len(rows)}", columns=columns, rows=rows)
        self._results.put(result_key, result, output.size)
        return result

    async def _run(
        self, analyst: str, sql: str, zone: SessionZone, token: CancelToken
    ) -> QueryOutput:
        """The output of the translated ``sql`` (timestamptz values shown in ``zone``), run
        on a worker thread in ``analyst``'s turn; stopped at once (CatalogQueryCanceled, or
        owned_canceled's 57014) when ``token`` fires."""
        database = self._database

        async def run(stop: QueryStop) -> QueryOutput:
            return await self._running.run(analyst, lambda: database.run_blocking(sql, stop, zone))

        return await _unless_canceled(token, run, owned_canceled)

    async def _translation(
        self,
        sql: str,
        session: SessionValues,
        parameters: Sequence[str | None],
        token: CancelToken,
    ) -> _Outcome:
        """The statement's translation (remembered_translation) or its refusal, computed
        on a worker thread unless remembered here; not awaited further once ``token``
        fires (the thread finishes on its own)."""
        key: TranslationKey | None = None
        if cacheable(sql, parameters, session.cursors):
            key = translation_key(sql, session, parameters)
            found, remembered = self._outcomes.get(key)
            if found:
                return remembered
        translating = self._translating

        async def translate(_: QueryStop) -> _Outcome:
            return await translating.run(session.user, lambda: _translate(sql, session, parameters))

        outcome = await _unless_canceled(token, translate)
        if key is not None:
            self._outcomes.put(key, outcome)
        return outcome

    def close(self) -> None:
        self._translating.close()
        self._running.close()
        self._database.close()


async def _unless_canceled(
    token: CancelToken,
    work: Callable[[QueryStop], Coroutine[Any, Any, T]],
    stopped: Callable[[str], QueryError] = canceled,
) -> T:
    """``work(stop)``'s result, unless ``token`` fires first: then ``stop`` is cancelled
    (a query not started never starts, a running one is interrupted), ``work`` is no
    longer awaited (nor started, if still waiting for its turn or a thread) and the
    statement ends with PostgreSQL's 57014 (``stopped(token.reason)``: a cancel request's or
    statement_timeout's). A cancel after ``work`` has ended changes nothing."""
    loop = asyncio.get_running_loop()
    stop = QueryStop()
    fired: asyncio.Future[None] = loop.create_future()

    def cancel() -> None:  # from the event loop (a cancel request), or any thread
        stop.cancel()
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing waits
            loop.call_soon_threadsafe(_resolve, fired)

    token.bind(cancel)
    try:
        if token.canceled:  # fired before it was bound (while nothing could be stopped)
            raise stopped(token.reason)
        job = asyncio.ensure_future(work(stop))
        job.add_done_callback(_consume)
        try:
            await asyncio.wait((job, fired), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:  # the session's task itself (server shutdown)
            stop.cancel()
            job.cancel()
            raise
    finally:
        token.bind(None)
    if job.done():
        return job.result()
    job.cancel()
    raise stopped(token.reason)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _consume(job: asyncio.Future[Any]) -> None:
    """Retrieve a job's outcome, which nobody awaits once cancelled (else asyncio logs
    'exception was never retrieved')."""
    if not job.cancelled():
        job.exception()


def _translate(sql: str, session: SessionValues, parameters: Sequence[str | None]) -> _Outcome:
    try:
        return remembered_translation(sql, session, parameters)
    except CatalogRefused as refusal:
        return _Refusal(refusal.message, refusal.hint, refusal.sqlstate)
