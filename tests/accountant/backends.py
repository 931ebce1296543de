"""Reaching into either kind of state store behind dpproxy's back, as an intruder or an
admin with database access could: raw SQL, dropped triggers, a held write lock."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from accountant import PostgresState, StateLocation
from accountant.postgres import LOCK_CLASS
from tests.conftest import pg_dsn_or_skip

BACKENDS = ["sqlite", "postgres"]
APPEND_ONLY_TRIGGERS = ("audit_log_no_update", "audit_log_no_delete")


@contextmanager
def raw(location: StateLocation) -> Iterator[Any]:
    """A DB-API connection in autocommit mode, on the state tables (``?`` placeholders
    only with SQLite)."""
    if isinstance(location, Path):
        conn = sqlite3.connect(location, isolation_level=None)
        try:
            yield conn
        finally:
            conn.close()
        return
    with psycopg.connect(location.dsn, autocommit=True) as pg:
        pg.execute(sql.SQL("SET search_path = {}").format(sql.Identifier(location.schema)))
        yield pg


def query(location: StateLocation, statement: str) -> list[tuple[Any, ...]]:
    with raw(location) as conn:
        return list(conn.execute(statement).fetchall())


def tamper(location: StateLocation, *statements: str) -> None:
    """Drop the append-only triggers and run ``statements``."""
    with raw(location) as conn:
        for trigger in APPEND_ONLY_TRIGGERS:
            conn.execute(
                f"DROP TRIGGER {trigger}"
                if isinstance(location, Path)
                else f"DROP TRIGGER {trigger} ON audit_log"
            )
        for statement in statements:
            conn.execute(statement)


@contextmanager
def write_lock_held(location: StateLocation) -> Iterator[None]:
    """Another session holds the store's write lock (as a stuck writer would)."""
    if isinstance(location, Path):
        blocker = sqlite3.connect(location, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        return
    with psycopg.connect(location.dsn, autocommit=True) as pg:
        pg.execute("SELECT pg_advisory_lock(%s::int4, %s::int4)", (LOCK_CLASS, location.lock_key))
        yield


@contextmanager
def fresh_location(backend: str, directory: Path) -> Iterator[StateLocation]:
    """A new, empty place for a store (for tests that need several in one test)."""
    if backend == "sqlite":
        yield directory / f"{uuid.uuid4().hex}.db"
        return
    dsn = pg_dsn_or_skip()
    schema = f"dpproxy_test_{uuid.uuid4().hex[:10]}"
    try:
        yield PostgresState(dsn, schema)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
