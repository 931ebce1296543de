"""Start dpproxy from its settings: backend, catalog, ledger, pipeline, server."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import ssl
from collections.abc import Callable

from accountant import AdminChange
from proxy.admin.seed import configured, current_actor, differences
from proxy.answers import AnswerCache, duckdb_file_version, no_version
from proxy.app import DpproxyApp
from proxy.backends import (
    Backend,
    BackendError,
    DeclaredKey,
    Schema,
    column_digits,
    column_types,
)
from proxy.backends.duckdb import DuckDBBackend
from proxy.backends.postgres import PostgresBackend
from proxy.catalog import CatalogResponder
from proxy.catalog.contents import Declared, Keys
from proxy.catalog.database import CatalogEngineDidNotStart
from proxy.domain_columns import check_domain_columns
from proxy.ledger import AsyncLedger
from proxy.pipeline import Pipeline
from proxy.postprocess import PostProcessor
from proxy.public_keys import find_public_keys
from proxy.selfservice import SelfServiceResponder
from proxy.server import Server
from proxy.settings import BackendSettings, ConfigError, ServerSettings, Settings
from proxy.text_collations import check_text_collations
from proxy.text_order import read_text_order
from proxy.tls import TLSConfigError, server_context
from proxy.unit_columns import check_unit_columns
from proxy.unit_keys import check_unit_keys
from rewriter import Catalog, OpenDPNoise, build_catalog
from rewriter.opendp_library import opendp

logger = logging.getLogger("dpproxy")


def open_backend(settings: BackendSettings) -> Backend:
    if settings.engine == "duckdb":
        if settings.path is None:
            raise ValueError("engine duckdb needs a path")
        return DuckDBBackend(settings.path, timeout_seconds=settings.statement_timeout_seconds)
    if settings.dsn is None:
        raise ValueError("engine postgres needs a dsn")
    return PostgresBackend(
        settings.dsn,
        pool_size=settings.pool_size,
        timeout_seconds=settings.statement_timeout_seconds,
    )


def seed_analysts(ledger: AsyncLedger, settings: Settings) -> None:
    """The configuration's analysts seed the state store, which wins (see proxy.admin.seed)."""
    change = AdminChange(actor=current_actor(), command="dpproxy serve (configuration seed)")
    added = ledger.seed_analysts(configured(settings), change)
    if added:
        logger.info("added analysts from the configuration: %s", ", ".join(added))
    for note in differences(settings, ledger.stored_analysts()):
        logger.warning("%s", note)


def ssl_context(settings: ServerSettings) -> ssl.SSLContext | None:
    """The server's TLS context, or None without tls_cert/tls_key. Raises ConfigError."""
    if settings.tls_cert is None or settings.tls_key is None:
        return None
    try:
        return server_context(settings.tls_cert, settings.tls_key)
    except TLSConfigError as error:
        raise ConfigError(str(error)) from None


def answer_cache(settings: BackendSettings) -> AnswerCache:
    """The answer cache: DuckDB answers are valid until the file changes (and the TTL)."""
    version = no_version
    if settings.engine == "duckdb" and settings.path is not None:
        version = duckdb_file_version(settings.path)
    return AnswerCache(version, ttl_seconds=settings.answer_cache_seconds)


def catalog_responder(
    catalog: Catalog, declared: Declared | None, keys: Keys = ()
) -> CatalogResponder:
    """The responder of catalog queries, its engine started; BackendError if it does not
    start (the engine's log line says why)."""
    try:
        return CatalogResponder(catalog, declared, keys)
    except CatalogEngineDidNotStart as error:
        raise BackendError(
            f"{error}; dpproxy answers catalog queries (psql's \\d, drivers' metadata) "
            "with it, and did not start: see the line logged above"
        ) from None


async def load_catalog(
    settings: Settings, backend: Backend
) -> tuple[Catalog, Schema, tuple[DeclaredKey, ...]]:
    """The catalog of the configured tables, checked against the database (PolicyError),
    with the columns each public table may be joined on (proxy.public_keys); and the
    schema as the database declares it, with its constraints (for the emulated catalog)."""
    schema = settings.backend.schema_or_default
    declared = await backend.schema_declared(schema)
    keys = await backend.schema_keys(schema)

    def built(unique: dict[str, list[str]], oversized: dict[str, int]) -> Catalog:
        return build_catalog(
            column_types(declared),
            settings.tables,
            schema=schema,
            digits=column_digits(declared),
            finite_decimals=backend.finite_decimals,
            unique=unique,
            oversized=oversized,
        )

    built({}, {})  # the policies checked against the schema before any key is looked for
    opendp()  # loaded now (deferred by the commands that answer no query)
    check_unit_columns(declared, settings.tables)
    check_domain_columns(declared, settings.tables)
    if settings.backend.engine == "postgres":
        check_text_collations(declared, settings.tables)
    for note in await check_unit_keys(backend, schema, declared, settings.tables):
        logger.info("%s", note)
    public = await find_public_keys(
        backend, schema, declared, settings.tables, max_rows=settings.backend.max_public_rows
    )
    for note in public.notes:
        logger.info("%s", note)
    for warning in public.warnings:
        logger.warning("%s", warning)
    return built(public.unique, public.oversized), declared, keys


async def run(settings: Settings, on_ready: Callable[[int], None]) -> None:
    """Serve until SIGINT or SIGTERM. ``on_ready`` gets the bound port."""
    context = ssl_context(settings.server)
    backend = open_backend(settings.backend)
    ledger: AsyncLedger | None = None
    pipeline: Pipeline | None = None
    try:
        catalog, declared, keys = await load_catalog(settings, backend)
        ledger = AsyncLedger(
            settings.state.location, lock_timeout=settings.state.lock_timeout_seconds
        )
        recovered = ledger.recover_interrupted()
        if recovered:
            logger.warning("recorded %d interrupted queries as failed (charges stand)", recovered)
        seed_analysts(ledger, settings)
        order = await read_text_order(backend, declared, settings.tables)
        if order.warning is not None:
            logger.warning("%s", order.warning)
        else:
            logger.info("%s", order.note)
        pipeline = Pipeline(
            catalog,
            backend,
            ledger,
            OpenDPNoise(),
            PostProcessor(order.collation),
            answers=answer_cache(settings.backend),
            declared=declared,
        )
        app = DpproxyApp(
            settings,
            pipeline,
            responders=(SelfServiceResponder(), catalog_responder(catalog, declared, keys)),
        )
        server = Server(
            app,
            settings.server.host,
            settings.server.port,
            max_message_size=settings.server.max_message_bytes,
            ssl_context=context,
            require_tls=settings.server.require_tls,
        )
        try:
            port = await server.start()
        except socket.gaierror as error:  # an OSError whose errno os.strerror does not know
            raise ConfigError(
                f"cannot listen on {settings.server.host}: {error.strerror}; it is neither an "
                "address nor a name this machine can resolve: give an address such as "
                "127.0.0.1, or 0.0.0.0 for every interface ([server] host, or --host)"
            ) from None
        except OSError as error:
            where = f"{settings.server.host}:{settings.server.port}"
            raise ConfigError(
                f"cannot listen on {where}: {os.strerror(error.errno) if error.errno else error}; "
                "stop what is using it "
                "or choose another address ([server] host and port, or --host/--port)"
            ) from None
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        on_ready(port)
        await stop.wait()
        logger.info("stopping")
        await server.close()
    finally:
        try:
            if pipeline is not None:  # outcomes the state store could not record yet
                await pipeline.close()
        finally:
            await backend.close()
            if ledger is not None:
                ledger.close()
