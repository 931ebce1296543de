"""BI tools' lists of a column's values (Metabase's field values, Grafana's variables)
through a real `dpproxy serve` and psycopg, on both engines: a query of GROUP BY keys with
a public domain alone answers the declared values, post-processed, free, audited as such,
with a NOTICE that says so (rewriter.domain_values, proxy.domain_values)."""

from __future__ import annotations

import json
import tomllib

import psycopg
import pytest

from tests.integration.server import Connection, RunningServer, dpproxy_in_process

pytestmark = pytest.mark.integration

PATIENTS = 200
DIRECTORY_PREFIX = "domain-values-"
METABASE = (
    'SELECT "public"."visits"."department" AS "department" FROM "public"."visits" '
    'GROUP BY "public"."visits"."department" ORDER BY "public"."visits"."department" ASC '
    "LIMIT 1000"
)


def _declared(server: RunningServer) -> list[str]:
    """visits.department's domain, as the server's configuration declares it."""
    config = tomllib.loads(server.config.read_text())
    return sorted(config["tables"]["visits"]["columns"]["department"]["domain"])


def _spent(server: RunningServer) -> float:
    result = dpproxy_in_process("budget", "show", "alice", "--json", "--config", str(server.config))
    assert result.returncode == 0, result.stderr
    return float(json.loads(result.stdout)[0]["spent"])


def _last_record(server: RunningServer) -> dict[str, object]:
    done = dpproxy_in_process(
        "audit", "list", "--analyst", "alice", "--limit", "100000", "--json",
        "--config", str(server.config),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.splitlines()[-1]))


@pytest.mark.parametrize(
    ("sql", "parameters"),
    [
        (METABASE, ()),
        ("SELECT DISTINCT department FROM visits ORDER BY 1", ()),
        ("SELECT department FROM visits WHERE department <> %s GROUP BY 1 ORDER BY 1", ("X",)),
    ],
)
def test_the_declared_values_free(
    server: RunningServer, proxy: Connection, sql: str, parameters: tuple[str, ...]
) -> None:
    notices: list[str] = []
    proxy.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    before = _spent(server)
    cursor = proxy.execute(sql, parameters)
    assert cursor.fetchall() == [(name,) for name in _declared(server)]
    assert [d.name for d in cursor.description or []] == ["department"]
    assert _spent(server) == before
    record = _last_record(server)
    assert record["decision"] == "cached"
    assert float(str(record["epsilon"])) == 0
    assert record["rows"] == len(_declared(server))
    assert "declared values" in str(record["reason"])
    assert any("declared values" in n and "at no cost" in n for n in notices), notices


def test_grafanas_column_values_around_it(server: RunningServer, proxy: Connection) -> None:
    before = _spent(server)
    rows = proxy.execute(
        "SELECT 'department' AS col_name, \"department\"::text AS val FROM (SELECT DISTINCT "
        '"department" FROM "public"."visits" WHERE "department" IS NOT NULL ORDER BY '
        '"department" LIMIT 3) sub_0'
    ).fetchall()
    assert rows == [("department", name) for name in _declared(server)[:3]]
    assert _spent(server) == before


def test_a_where_on_other_columns_is_still_refused(
    server: RunningServer, proxy: Connection
) -> None:
    before = _spent(server)
    with pytest.raises(psycopg.errors.FeatureNotSupported, match="only for one table"):
        proxy.execute("SELECT DISTINCT department FROM visits WHERE cost > 100")
    assert _spent(server) == before
