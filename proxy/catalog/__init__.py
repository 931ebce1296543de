"""Catalog browsing for clients (psql, JDBC, SQLAlchemy, DBeaver, Metabase, ...), answered
from an emulated pg_catalog and information_schema built from the schema alone."""

from proxy.catalog.responder import CatalogResponder

__all__ = ["CatalogResponder"]
