"""The startup packet's ``options`` (libpq's PGOPTIONS, psycopg's ``options=``): settings
applied at connect as SET would apply them, and a bad one refused with FATAL, as in
PostgreSQL. Before, they were dropped without a word."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from proxy.seam import QueryError
from proxy.session import parse_startup_options
from tests.integration.server import RunningServer

pytestmark = pytest.mark.integration
PATIENTS = 200


@pytest.mark.parametrize(
    ("options", "pairs"),
    [
        ("-c dpproxy.epsilon=0.25", [("dpproxy.epsilon", "0.25")]),
        ("-cdpproxy.epsilon=0.25  --statement-timeout=5s", [
            ("dpproxy.epsilon", "0.25"), ("statement_timeout", "5s")
        ]),
        (r"-c application_name=a\ b", [("application_name", "a b")]),
    ],
)  # fmt: skip
def test_options_are_read_as_postgresql_reads_them(
    options: str, pairs: list[tuple[str, str]]
) -> None:
    assert parse_startup_options(options) == pairs


@pytest.mark.parametrize("options", ["-x", "-c", "-c epsilon", "dpproxy.epsilon=1"])
def test_malformed_options_are_refused(options: str) -> None:
    with pytest.raises(QueryError):
        parse_startup_options(options)


def test_psycopg_options_set_the_session(server: RunningServer) -> None:
    notices: list[str] = []
    with psycopg.connect(server.dsn("alice"), options="-c dpproxy.epsilon=0.25") as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        assert conn.execute("SHOW dpproxy.epsilon").fetchone() == ("0.25",)
        conn.execute("SELECT COUNT(*) FROM visits WHERE length_of_stay > 2").fetchall()
    assert any("this answer cost ε=0.25" in notice for notice in notices), notices
    with pytest.raises(psycopg.OperationalError, match=r"invalid value for dpproxy\.epsilon"):
        psycopg.connect(server.dsn("alice"), options="-c dpproxy.epsilon=lots")


def test_postgresql_planner_and_custom_parameters_at_connect(server: RunningServer) -> None:
    """Before, jit=off (asyncpg's server_settings) or -c work_mem=64MB ended the
    connection with FATAL (unrecognized configuration parameter)."""
    options = "-c work_mem=64MB -c myapp.tenant=acme"
    with psycopg.connect(server.dsn("alice"), options=options, autocommit=True) as conn:
        assert conn.execute("SHOW work_mem").fetchone() == ("64MB",)
        assert conn.execute("SHOW myapp.tenant").fetchone() == ("acme",)
        assert conn.execute("SELECT current_setting('myapp.tenant')").fetchone() == ("acme",)
        conn.execute("SET jit = off")
        assert conn.execute("SHOW jit").fetchone() == ("off",)
    asyncpg = pytest.importorskip("asyncpg")  # a test dependency (pyproject's test extra)

    async def go() -> list[object]:
        conn = await asyncpg.connect(server.dsn("alice"), server_settings={"jit": "off"})
        try:
            return [await conn.fetchval("SHOW jit"), await conn.fetchval("SHOW work_mem")]
        finally:
            await conn.close()

    assert asyncio.run(go()) == ["off", "4MB"]
