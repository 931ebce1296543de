"""Start dpproxy from its settings: backend, catalog, ledger, pipeline, server."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable

from proxy.app import DpproxyApp
from proxy.backends import Backend
from proxy.backends.duckdb import DuckDBBackend
from proxy.backends.postgres import PostgresBackend
from proxy.ledger import AsyncLedger
from proxy.pipeline import Pipeline
from proxy.server import Server
from proxy.settings import BackendSettings, Settings
from rewriter import OpenDPNoise, build_catalog

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


async def run(settings: Settings, on_ready: Callable[[int], None]) -> None:
    """Serve until SIGINT or SIGTERM. ``on_ready`` gets the bound port."""
    backend = open_backend(settings.backend)
    ledger: AsyncLedger | None = None
    try:
        columns = await backend.schema_columns(settings.backend.schema_or_default)
        catalog = build_catalog(columns, settings.tables, schema=settings.backend.schema_or_default)
        ledger = AsyncLedger(settings.state.path)
        recovered = ledger.recover_interrupted()
        if recovered:
            logger.warning("recorded %d interrupted queries as failed (charges stand)", recovered)
        app = DpproxyApp(settings, Pipeline(catalog, backend, ledger, OpenDPNoise()))
        server = Server(
            app,
            settings.server.host,
            settings.server.port,
            max_message_size=settings.server.max_message_bytes,
        )
        port = await server.start()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        on_ready(port)
        await stop.wait()
        logger.info("stopping")
        await server.close()
    finally:
        await backend.close()
        if ledger is not None:
            ledger.close()
