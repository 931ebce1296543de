"""Probes of a query's columns (BI tools, notebooks) whose SQL text alone shows that the
answer has no rows — ``LIMIT 0``, a HAVING never true, ``SELECT * FROM (<DP query>) q
WHERE 1 = 0``, ``SELECT * FROM visits WHERE 1 = 0`` — through a real `dpproxy serve` and
psycopg, on both engines: the columns of the normal answer (names and type OIDs), no
rows, free, audited as such; still checked in full (rewriter.no_rows, proxy.empty_answers).
"""

from __future__ import annotations

import json
import re

import psycopg
import pytest

from tests.integration.server import Connection, RunningServer, dpproxy_in_process

pytestmark = pytest.mark.integration

PATIENTS = 200
DIRECTORY_PREFIX = "no-rows-"
INNER = "SELECT department, COUNT(*) AS n, AVG(cost) FROM visits GROUP BY 1"
#: DP probes and the query each probes (the same without what makes it empty).
DP_PROBES = (
    ("SELECT COUNT(*) FROM visits LIMIT 0", "SELECT COUNT(*) FROM visits"),
    (
        "SELECT department, COUNT(*) FROM visits GROUP BY 1 LIMIT 0",
        "SELECT department, COUNT(*) FROM visits GROUP BY 1",
    ),
    (
        "SELECT department, SUM(cost) AS s FROM visits GROUP BY 1 HAVING 1 = 0",
        "SELECT department, SUM(cost) AS s FROM visits GROUP BY 1",
    ),
    (f"SELECT * FROM ({INNER}) s LIMIT 0", f"SELECT * FROM ({INNER}) s"),
    (f"SELECT * FROM ({INNER}) q WHERE 1 = 0", f"SELECT * FROM ({INNER}) q"),
    (
        f"SELECT department, n FROM ({INNER}) q WHERE FALSE",
        f"SELECT department, n FROM ({INNER}) q",
    ),
    (
        f'SELECT "source".* FROM ({INNER}) "source" WHERE 1 <> 1 LIMIT 1048575',
        f'SELECT "source".* FROM ({INNER}) "source" LIMIT 1048575',
    ),
)
ROW_PROBES = (
    "SELECT * FROM visits WHERE 1=0",
    "SELECT * FROM visits LIMIT 0",
    'SELECT * FROM "public"."visits" WHERE NULL',
    "SELECT v.* FROM visits v WHERE false LIMIT 0",
)
VISITS = [
    "visit_id",
    "patient_id",
    "visit_date",
    "department",
    "diagnosis",
    "cost",
    "length_of_stay",
]
#: The catalog's description of a table's columns, as psql's \d reads it.
CATALOG_COLUMNS = (
    "SELECT a.attname, a.atttypid, a.atttypmod FROM pg_catalog.pg_attribute a "
    "JOIN pg_catalog.pg_class c ON a.attrelid = c.oid WHERE c.relname = %s "
    "AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum"
)


def _spent(server: RunningServer) -> float:
    result = dpproxy_in_process("budget", "show", "alice", "--json", "--config", str(server.config))
    assert result.returncode == 0, result.stderr
    return float(json.loads(result.stdout)[0]["spent"])


def _audit(server: RunningServer) -> list[dict[str, object]]:
    """alice's audit records, oldest first."""
    done = dpproxy_in_process(
        "audit", "list", "--analyst", "alice", "--limit", "100000", "--json",
        "--config", str(server.config),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def _shape(cursor: psycopg.Cursor[tuple[object, ...]]) -> list[tuple[str, int]]:
    return [(d.name, d.type_code) for d in cursor.description or []]


def _free_record(server: RunningServer, sql: str) -> dict[str, object]:
    record = _audit(server)[-1]
    assert record["sql"] == sql
    assert record["decision"] == "cached"
    assert float(str(record["epsilon"])) == 0
    assert record["rows"] == 0
    reason = str(record["reason"])
    assert reason.startswith("free: no rows to answer"), reason
    assert "nothing was run or charged" in reason
    return record


@pytest.mark.parametrize(("probe", "query"), DP_PROBES)
def test_a_dp_probe_has_the_columns_of_its_query_free(
    server: RunningServer, proxy: Connection, probe: str, query: str
) -> None:
    notices: list[str] = []
    proxy.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    before = _spent(server)
    probed = proxy.execute(probe)
    assert probed.fetchall() == []
    assert _spent(server) == before
    _free_record(server, probe)
    assert any("no rows" in n and "at no cost" in n for n in notices), notices
    asked = proxy.execute(query)
    assert asked.fetchall()  # the query itself has rows and is charged
    assert _spent(server) > before
    assert _shape(probed) == _shape(asked)


def test_a_probe_with_report_columns_has_the_interval_columns(
    server: RunningServer, proxy: Connection
) -> None:
    proxy.execute("SET dpproxy.report = columns")
    query = "SELECT department, COUNT(*) AS n FROM visits GROUP BY 1"
    before = _spent(server)
    probed = proxy.execute(query + " LIMIT 0")
    assert probed.fetchall() == []
    assert _spent(server) == before
    asked = proxy.execute(query)
    assert [d.name for d in asked.description or []] == ["department", "n", "n_ci95", "n_bias"]
    assert _shape(probed) == _shape(asked)


@pytest.mark.parametrize("probe", ROW_PROBES)
def test_a_row_level_probe_has_the_tables_columns_free(
    server: RunningServer, proxy: Connection, probe: str
) -> None:
    catalog = proxy.execute(CATALOG_COLUMNS, ("visits",)).fetchall()
    assert [name for name, _, _ in catalog] == VISITS
    before = _spent(server)
    probed = proxy.execute(probe)
    assert probed.fetchall() == []
    assert _spent(server) == before
    _free_record(server, probe)
    described = [(d.name, d.type_code, d.internal_size) for d in probed.description or []]
    assert [(n, t) for n, t, _ in described] == [(n, t) for n, t, _ in catalog]
    varchar = next(d for d in probed.description or [] if d.name == "department")
    assert varchar.type_code in (25, 1043)  # text or character varying, as \d shows


def test_a_row_level_probe_names_its_columns(server: RunningServer, proxy: Connection) -> None:
    probed = proxy.execute("SELECT cost AS c, Department, v.visit_date FROM visits v WHERE 1=0")
    assert probed.fetchall() == []
    oids = {n: t for n, t, _ in proxy.execute(CATALOG_COLUMNS, ("visits",)).fetchall()}
    assert _shape(probed) == [
        ("c", oids["cost"]),
        ("department", oids["department"]),
        ("visit_date", oids["visit_date"]),
    ]


def test_on_postgresql_a_row_level_probe_is_typed_as_postgresql_types_it(
    server: RunningServer, proxy: Connection, postgres: Connection
) -> None:
    text = server.config.read_text()
    schema = re.search(r'schema = "([^"]+)"', text)
    if 'engine = "postgres"' not in text or schema is None:
        pytest.skip("the DuckDB backend: no PostgreSQL table to compare with")
    real = postgres.execute(f'SELECT * FROM "{schema.group(1)}".visits LIMIT 0')
    probed = proxy.execute("SELECT * FROM visits LIMIT 0")
    assert [(d.name, d.type_code) for d in probed.description or []] == [
        (d.name, d.type_code) for d in real.description or []
    ]


@pytest.mark.parametrize(
    ("sql", "error"),
    [
        ("SELECT nope FROM visits WHERE 1=0", psycopg.errors.UndefinedColumn),
        ("SELECT * FROM nowhere LIMIT 0", psycopg.errors.UndefinedTable),
        ("SELECT * FROM visits WHERE nope = 1 AND 1 = 0", psycopg.errors.UndefinedColumn),
        ("SELECT COUNT(nope) FROM visits LIMIT 0", psycopg.errors.UndefinedColumn),
        # a GROUP BY key without a public domain needs δ > 0, probe or not
        ("SELECT patient_id, COUNT(*) FROM visits GROUP BY 1 LIMIT 0", psycopg.Error),
        ("SELECT * FROM visits LIMIT 0 OFFSET -1", psycopg.Error),
    ],
)
def test_a_probe_is_checked_as_its_query(
    server: RunningServer, proxy: Connection, sql: str, error: type[Exception]
) -> None:
    before = _spent(server)
    with pytest.raises(error):
        proxy.execute(sql)
    assert _spent(server) == before
    assert _audit(server)[-1]["decision"] == "rejected"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM visits WHERE 1 = 0",  # one (noisy) count
        f"SELECT COUNT(*) FROM ({INNER}) q WHERE 1 = 0",  # one row: a count of none
        "SELECT COUNT(*) FROM visits LIMIT 1",
    ],
)
def test_a_query_that_has_rows_is_charged(
    server: RunningServer, proxy: Connection, sql: str
) -> None:
    before = _spent(server)
    assert len(proxy.execute(sql).fetchall()) == 1
    assert _spent(server) > before


def test_rows_are_still_refused(proxy: Connection) -> None:
    with pytest.raises(psycopg.Error, match="individual rows"):
        proxy.execute("SELECT * FROM visits WHERE 1 = 1")


def test_a_parameter_limit_of_zero_counts_as_limit_0(
    server: RunningServer, proxy: Connection
) -> None:
    """psycopg binds on the server (Parse, Bind, Describe, Execute): LIMIT $1 with 0."""
    before = _spent(server)
    prepared = "SELECT department, COUNT(*) AS n FROM visits GROUP BY 1 LIMIT %s"
    probed = proxy.execute(prepared, (0,))
    assert probed.fetchall() == []
    rows = proxy.execute("SELECT * FROM visits WHERE patient_id = %s LIMIT %s", (1, 0))
    assert rows.fetchall() == []
    assert [d.name for d in rows.description or []] == VISITS
    assert _spent(server) == before
    again = proxy.execute(prepared, (0,), prepare=True)  # Describe of the statement first
    assert again.fetchall() == []
    assert _spent(server) == before
    asked = proxy.execute(prepared, (100,), prepare=True)
    assert asked.fetchall()
    assert _spent(server) > before
    assert _shape(again) == _shape(asked) == _shape(probed)
