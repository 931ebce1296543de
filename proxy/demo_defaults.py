"""The demo's file name, seed and size limit, apart from ``proxy.demo`` and
``proxy.demo_data`` (which import duckdb, numpy and psycopg) so that ``dpproxy --help`` and
the commands that do not make a demo can show and check them without those imports."""

from __future__ import annotations

CONFIG_FILE = "dpproxy.toml"
DEFAULT_SEED = 20261122
MAX_PATIENTS = 1_000_000
"""Upper bound on :attr:`proxy.demo_data.DemoSize.patients` (about 4.5 million visits, a few
hundred MB)."""
