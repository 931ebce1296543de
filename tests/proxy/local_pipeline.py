"""A real pipeline over a small DuckDB file and a SQLite ledger, and a session of alice on
it: what the session and catalog tests run statements through (no server, no client)."""

from __future__ import annotations

from pathlib import Path

from accountant import AnalystBudget, Epsilon
from proxy.asker import Asker
from proxy.backends.duckdb import DuckDBBackend
from proxy.ledger import AsyncLedger
from proxy.pipeline import Pipeline
from proxy.postprocess import PostProcessor
from proxy.session import AnalystSession
from rewriter import OpenDPNoise
from tests.rewriter.tables import catalog, duckdb_file


def local_pipeline(directory: Path) -> Pipeline:
    """Close its ledger when done (``pipeline.ledger.close()``)."""
    return Pipeline(
        catalog("main"),
        DuckDBBackend(duckdb_file(directory / "data.duckdb"), timeout_seconds=10),
        AsyncLedger(directory / "state.db"),
        OpenDPNoise(),
        PostProcessor(),
    )


def alice_session(pipeline: Pipeline) -> AnalystSession:
    """alice, ε=10 in all and ε=1 a query."""
    budget = AnalystBudget(total=Epsilon(10), default_per_query=Epsilon(1))
    return AnalystSession(pipeline, Asker("alice", budget, "127.0.0.1"), "test")
