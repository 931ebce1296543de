"""A PostgreSQL schema of a test's own: made fresh (a random name, so that pytest-xdist
workers never meet), dropped with everything in it afterwards."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg


@contextmanager
def scratch_schema(dsn: str) -> Iterator[tuple[psycopg.Connection[tuple[object, ...]], str]]:
    """An autocommit connection and the name of a new, empty schema."""
    schema = f"dpproxy_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        try:
            yield conn, schema
        finally:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
