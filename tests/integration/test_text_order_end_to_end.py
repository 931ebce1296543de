"""`dpproxy serve` on a PostgreSQL database whose default collation is ICU's en-US answers
with text in PostgreSQL's order: ORDER BY, comparisons and min/max over released keys
(they came back in byte order: b, B, 'a b' as B, a b, b)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from proxy.demo import ANALYST_TEMPLATE
from proxy.protocol.scram import make_verifier
from tests.collated_database import TEXTS, icu_database
from tests.integration.server import PASSWORDS, RunningServer, start

Connection = psycopg.Connection[tuple[object, ...]]


def write_config(directory: Path, dsn: str) -> Path:
    analyst = ANALYST_TEMPLATE.format(
        name="alice", verifier=make_verifier(PASSWORDS["alice"]), total=100.0, default=1.0, cap=5.0
    )
    domain = ", ".join(json.dumps(text, ensure_ascii=False) for text in TEXTS)
    path = directory / "dpproxy.toml"
    path.write_text(
        f'[server]\nhost = "127.0.0.1"\nport = 0\n\n'
        f'[backend]\nengine = "postgres"\ndsn = {json.dumps(dsn)}\nschema = "public"\n'
        f'answer_cache_seconds = 0\n\n[state]\npath = "state.sqlite"\n\n{analyst}\n'
        f'[tables.visits]\nprivacy_unit = "patient_id"\nmax_rows_per_unit = 1\n\n'
        f"[tables.visits.columns.department]\ndomain = [{domain}]\n"
    )
    return path


@pytest.fixture(scope="module")
def collated(
    pg_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[RunningServer, Connection]]:
    """dpproxy over a table of visits in an ICU en-US database, and a connection to that
    database with a table ``keys`` holding the department domain."""
    with icu_database(pg_dsn) as dsn, psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE visits (patient_id bigint, department text)")
        conn.execute("CREATE TABLE keys (k text)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO keys VALUES (%s)", [(k,) for k in TEXTS])
            cur.executemany("INSERT INTO visits VALUES (%s, %s)", list(enumerate(TEXTS)))
        server = start(write_config(tmp_path_factory.mktemp("text-order"), dsn))
        try:
            yield server, conn
        finally:
            log = server.stop()
            assert "Traceback" not in log
            assert "under DuckDB's ICU collation en_us" in log


INNER = "(SELECT department, COUNT(*) AS n FROM visits GROUP BY 1) s"
#: (a query to dpproxy, the same question to PostgreSQL over the released keys).
QUERIES = [
    (
        "SELECT department, COUNT(*) FROM visits GROUP BY 1 ORDER BY 1",
        "SELECT k FROM keys ORDER BY 1",
    ),
    (
        "SELECT department, COUNT(*) FROM visits GROUP BY 1 ORDER BY 1 DESC",
        "SELECT k FROM keys ORDER BY 1 DESC",
    ),
    (
        f"SELECT s.department FROM {INNER} WHERE s.department < 'b' ORDER BY 1",
        "SELECT k FROM keys WHERE k < 'b' ORDER BY 1",
    ),
    (
        f"SELECT max(s.department), min(s.department) FROM {INNER} WHERE s.department < 'b'",
        "SELECT max(k), min(k) FROM keys WHERE k < 'b'",
    ),
    (
        f"SELECT nullif(s.department, 'B') AS d FROM {INNER} ORDER BY 1 DESC",
        "SELECT nullif(k, 'B') FROM keys ORDER BY 1 DESC",
    ),
    (
        f"SELECT DISTINCT lower(s.department) FROM {INNER} ORDER BY 1",
        "SELECT DISTINCT lower(k) FROM keys ORDER BY 1",
    ),
]


@pytest.mark.parametrize(("ours", "theirs"), QUERIES)
def test_text_comes_back_in_postgres_order(
    collated: tuple[RunningServer, Connection], ours: str, theirs: str
) -> None:
    server, postgres = collated
    expected = postgres.execute(theirs.encode()).fetchall()
    with psycopg.connect(server.dsn("alice"), autocommit=True, connect_timeout=10) as conn:
        conn.execute("SET dpproxy.epsilon = 0.1")
        rows = conn.execute(ours.encode()).fetchall()
    width = len(expected[0])
    assert [tuple(row[:width]) for row in rows] == expected


def test_case_variants_stay_apart(collated: tuple[RunningServer, Connection]) -> None:
    server, _ = collated
    with psycopg.connect(server.dsn("alice"), autocommit=True, connect_timeout=10) as conn:
        conn.execute("SET dpproxy.epsilon = 0.1")
        rows = conn.execute(
            "SELECT department, COUNT(*) FROM visits GROUP BY 1 "
            "HAVING department IN ('b', 'B', 'a b') ORDER BY 1"
        ).fetchall()
        grouped = conn.execute(
            f"SELECT s.department, COUNT(*) FROM {INNER} GROUP BY 1 ORDER BY 1"
        ).fetchall()
    assert [row[0] for row in rows] == ["a b", "b", "B"]
    assert len(grouped) == len(TEXTS) and {row[1] for row in grouped} == {1}
