"""Catalog browsing for clients (psql, JDBC, SQLAlchemy, DBeaver, Metabase, ...), answered
from an emulated pg_catalog and information_schema built from the schema alone.

CatalogResponder is imported when first asked for: the catalog engine's process
(engine_process) imports modules of this package, and must not import the responder's
(the rewriter, the server's machinery).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from proxy.catalog.responder import CatalogResponder

__all__ = ["CatalogResponder"]


def __getattr__(name: str) -> object:
    if name == "CatalogResponder":
        from proxy.catalog.responder import CatalogResponder  # noqa: PLC0415

        return CatalogResponder
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
