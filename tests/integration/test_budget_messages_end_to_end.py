"""What analysts and admins are told about budgets, through a real `dpproxy serve`, psql's
driver (psycopg) and the admin commands: the global cap's refusals show no amount of the
shared budget anywhere an analyst can look; settings far below the ledger's units are
refused up front; a δ that would leave none to state Gaussian spending says so, with a δ
that fits; a grant beyond the largest budget says the limit."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.types.string import TextLoader

from tests.integration.server import (
    RunningServer,
    demo_database,
    dpproxy_in_process,
    start,
    write_config,
)

pytestmark = pytest.mark.integration

COUNT = "SELECT COUNT(*) FROM visits"
BY_DIAGNOSIS = "SELECT diagnosis, COUNT(*) AS visits FROM visits GROUP BY diagnosis"
#: The global cap, what bob spends of it, and what is left: alice must see none of these.
SECRETS = (
    "1.234567",
    "0.334567",
    "3.3e-7",
    "1.1e-7",
    "2.2e-7",
    "0.00000033",
    "0.00000011",
    "0.00000022",
)
TINY = "1e-999999999999999999"


def serve(directory: Path) -> RunningServer:
    demo_database(directory, 300)
    return start(write_config(directory, backend=""))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    running = serve(tmp_path_factory.mktemp("budget-messages"))
    yield running
    log = running.stop()
    assert "Traceback" not in log, log


def admin(server: RunningServer, *args: str) -> str:
    result = dpproxy_in_process(*args, "--config", str(server.config))
    assert result.returncode == 0, result.stderr
    return result.stdout


def everything(conn: psycopg.Connection[Any], sql: str) -> str:
    """All the text of a statement's rows (numerics as the text on the wire)."""
    cur = conn.cursor()
    cur.adapters.register_loader("numeric", TextLoader)
    cur.execute(sql)
    return repr(cur.fetchall())


def refused(conn: psycopg.Connection[Any], sql: str) -> str:
    """The text of the refusal of ``sql``: message, detail and hint."""
    with pytest.raises(psycopg.errors.ConfigurationLimitExceeded) as error:
        conn.execute(sql).fetchall()
    diag = error.value.diag
    return " | ".join(
        str(part) for part in (diag.message_primary, diag.message_detail, diag.message_hint)
    )


def test_the_global_cap_shows_analysts_none_of_its_amounts(tmp_path: Path) -> None:
    server = serve(tmp_path)
    try:
        admin(server, "budget", "global", "--epsilon-total", "1.234567", "--delta", "3.3e-7")
        with psycopg.connect(server.dsn("bob"), autocommit=True) as bob:
            bob.execute("SET dpproxy.epsilon = 0.9")
            bob.execute("SET dpproxy.delta = '2.2e-7'")
            bob.execute(BY_DIAGNOSIS).fetchall()
        seen = []
        with psycopg.connect(server.dsn("alice"), autocommit=True) as alice:
            notices: list[str] = []
            alice.add_notice_handler(
                lambda d: notices.append(f"{d.message_primary} {d.message_detail}")
            )
            alice.execute("SET dpproxy.epsilon = 0.1")
            alice.execute("SET dpproxy.delta = '2e-7'")  # only 1.1e-7 of the global δ is left
            seen.append(refused(alice, BY_DIAGNOSIS))
            alice.execute("SET dpproxy.epsilon = 0.5")  # only ε=0.334567 is left
            seen.append(refused(alice, COUNT))
            for text in seen:
                assert "the global privacy budget shared by all analysts cannot pay" in text
            alice.execute("SET dpproxy.epsilon = 0.3")
            alice.execute(COUNT).fetchall()  # a query that fits is answered
            seen += notices
            seen.append(everything(alice, "SHOW dpproxy.budget"))
            seen.append(everything(alice, "SELECT * FROM dpproxy.my_budget"))
            queries = everything(alice, "SELECT * FROM dpproxy.my_queries")
            assert queries.count("over_budget") == 2
            seen.append(queries)
        leaked = [(s, text) for text in seen for s in SECRETS if s in text]
        assert leaked == []
        # The admin sees the figures: `dpproxy budget global`, and the server's log.
        assert "0.034567 left" in admin(server, "budget", "global")
    finally:
        log = server.stop()
    assert "Traceback" not in log, log
    assert "refused by the global budget: partition selection would spend δ=4.2e-7" in log
    assert "of the global cap's δ=3.3e-7" in log


def test_settings_below_the_ledgers_units_are_refused_up_front(server: RunningServer) -> None:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as alice:
        delta = alice.execute("SHOW dpproxy.delta").fetchone()
        epsilon = alice.execute("SHOW dpproxy.epsilon").fetchone()
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="1e-15"):
            alice.execute(f"SET dpproxy.delta = '{TINY}'")
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="decimal places"):
            alice.execute(f"SET dpproxy.epsilon = '{TINY}'")
        assert alice.execute("SHOW dpproxy.delta").fetchone() == delta != ("0e+0",)
        assert alice.execute("SHOW dpproxy.epsilon").fetchone() == epsilon


def test_a_delta_leaving_none_for_gaussian_spending_says_so_and_what_fits(
    server: RunningServer,
) -> None:
    with psycopg.connect(server.dsn("bob"), autocommit=True) as bob:
        bob.execute("SET dpproxy.mechanism = gaussian")
        bob.execute(COUNT).fetchall()  # ρ = 0.125: ε ≈ 2.42 of bob's 3 at δ = 1e-6
        bob.execute("SET dpproxy.mechanism = laplace")
        bob.execute("SET dpproxy.epsilon = 0.01")
        bob.execute("SET dpproxy.delta = '1e-6'")  # all of bob's δ
        text = refused(bob, BY_DIAGNOSIS)
        assert 'that is all the δ analyst "bob" has left' in text
        assert "Gaussian (ρ) spending" in text and "SET dpproxy.epsilon" not in text
        found = re.search(r"lower dpproxy\.delta \(at most (\S+) fits\)", text)
        assert found is not None, text
        bob.execute(f"SET dpproxy.delta = '{found.group(1)}'")
        bob.execute(BY_DIAGNOSIS).fetchall()  # the δ it names is accepted and fits


def test_a_grant_beyond_the_largest_budget_says_the_limit(server: RunningServer) -> None:
    result = dpproxy_in_process(
        "budget", "grant", "bob", "999999.9", "--config", str(server.config)
    )
    assert result.returncode != 0
    assert "ε=3 + ε=999999.9 would be ε=1000002.9" in result.stderr
    assert "the largest ε dpproxy keeps (1000000" in result.stderr
    assert "add at most ε=999997" in result.stderr
    assert "a stored ε" not in result.stderr
