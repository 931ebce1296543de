"""Two `dpproxy serve` processes sharing one ledger in PostgreSQL ([state] dsn): 32
concurrent sessions spread over both never overspend one analyst's budget; SIGKILL of one
server under load loses no charge and no audit record, and its restart recovers only its
own interrupted queries; admin commands work against the shared store and reach both."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from accountant import Decision, Epsilon, PostgresState, StateStore
from proxy.demo_data import DemoSize, generate, write_duckdb
from tests.integration.server import (
    RunningServer,
    dpproxy,
    dpproxy_in_process,
    session_loop,
    start,
    wait_until,
    write_config,
)

pytestmark = [pytest.mark.integration, pytest.mark.postgres]

COUNT = "SELECT COUNT(*) FROM visits"
SESSIONS = 32  # in total, half on each server


@dataclass
class Shared:
    """One configuration (both servers use it) whose state lives in ``state``."""

    config: Path
    state: PostgresState
    application: str  # the state connections' application_name, to watch them


@pytest.fixture
def shared(tmp_path: Path, pg_dsn: str, pg_schema: str) -> Shared:
    write_duckdb(generate(DemoSize(patients=200)), tmp_path / "demo.duckdb")
    config = write_config(tmp_path, backend="")
    application = f"dpproxy-{pg_schema}"
    dsn = f"{pg_dsn}?application_name={application}"
    text = config.read_text()
    start_at = text.index("[state]\n")
    end = text.index("\n", start_at + len("[state]\n"))
    state = f'[state]\ndsn = "{dsn}"\nschema = "{pg_schema}"'
    config.write_text(text[:start_at] + state + text[end:])
    assert not (tmp_path / "state.sqlite").exists()
    return Shared(config, PostgresState(dsn, pg_schema), application)


@pytest.fixture
def servers(shared: Shared) -> Iterator[list[RunningServer]]:
    running = [start(shared.config), start(shared.config)]
    yield running
    for server in running:
        log = server.stop()
        assert "Traceback" not in log, log


def admin(config: Path, *args: str, stdin: str | None = None) -> str:
    """In this process, unless the command reads standard input (the real `dpproxy`)."""
    command = [*args, "--config", str(config)]
    result = dpproxy(*command, stdin=stdin) if stdin is not None else dpproxy_in_process(*command)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def query(state: PostgresState, statement: str) -> Any:
    with psycopg.connect(state.dsn) as conn:
        conn.execute(sql.SQL("SET search_path = {}").format(sql.Identifier(state.schema)))
        row = conn.execute(statement).fetchone()  # type: ignore[arg-type]
    assert row is not None
    return row[0]


def run_sessions(
    servers: list[RunningServer], stop: threading.Event
) -> tuple[list[threading.Thread], list[list[int]]]:
    """SESSIONS threads, alternating between the servers and between Laplace and Gaussian
    answers; ``answered[i]`` counts the answers server ``i`` gave."""
    answered: list[list[int]] = [[] for _ in servers]
    threads = [
        threading.Thread(
            target=session_loop,
            args=(servers[i % len(servers)], (i // 2) % 2 == 1, answered[i % len(servers)], stop),
        )
        for i in range(SESSIONS)
    ]
    for thread in threads:
        thread.start()
    return threads, answered


def test_32_sessions_on_two_servers_never_overspend(
    shared: Shared, servers: list[RunningServer]
) -> None:
    admin(
        shared.config, "budget", "set", "alice", "--epsilon-total", "1.5",
        "--epsilon-per-query-max", "1",
    )  # fmt: skip
    stop = threading.Event()
    threads, answered = run_sessions(servers, stop)
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    assert all(len(by_server) > 0 for by_server in answered)  # both servers charged
    shown = json.loads(admin(shared.config, "budget", "show", "alice", "--json"))[0]
    assert Epsilon(shown["spent"]) <= Epsilon("1.5")
    assert Epsilon(shown["remaining"]) < Epsilon("0.05")  # the budget was used up
    with StateStore.open(shared.state) as store:
        accepted = store.audit_records(analyst="alice", decisions=[Decision.ACCEPTED])
        assert len(accepted) == sum(len(by_server) for by_server in answered) > 30
        assert any(r.rho for r in accepted) and any(not r.epsilon.is_zero() for r in accepted)
        # Each charge saw every earlier one: the remaining budgets recorded are all distinct.
        assert len({r.remaining for r in accepted}) == len(accepted)
        assert store.verify_audit().intact


def state_connections(shared: Shared) -> int:
    with psycopg.connect(shared.state.dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
            (shared.application,),
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_sigkill_of_one_server_under_load_loses_nothing(
    shared: Shared, servers: list[RunningServer]
) -> None:
    survivor, doomed = servers
    stop = threading.Event()
    threads, answered = run_sessions(servers, stop)
    # Under load: each server has answered, on average, every one of its sessions once.
    wait_until(
        lambda: all(len(by_server) >= SESSIONS // 2 for by_server in answered),
        "both servers to answer their sessions",
    )
    before = state_connections(shared)
    doomed.process.kill()  # SIGKILL: no cleanup at all
    doomed.process.wait(timeout=10)
    deadline = time.monotonic() + 10  # until PostgreSQL has noticed its connections closed
    while state_connections(shared) > before - 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    served_by_survivor = len(answered[0])
    # The other server goes on answering (a survivor that stopped fails after 60 s).
    wait_until(lambda: len(answered[0]) > served_by_survivor, "the other server to answer")
    restarted = start(shared.config)  # recovers only the killed server's reservations
    servers.append(restarted)
    with psycopg.connect(restarted.dsn("alice"), autocommit=True) as conn:
        conn.execute(COUNT).fetchall()  # the restarted server answers from the same ledger
    stop.set()
    for thread in threads:
        thread.join(timeout=60)
    seen = sum(len(by_server) for by_server in answered) + 1
    for server in (survivor, restarted):
        assert "Traceback" not in server.stop()
    verified = dpproxy_in_process("audit", "verify", "--config", str(shared.config))
    assert verified.returncode == 0, verified.stdout + verified.stderr
    charges = query(shared.state, "SELECT count(*) FROM reservations")
    still_open = query(shared.state, "SELECT count(*) FROM reservations WHERE status = 'reserved'")
    audited = query(shared.state, "SELECT count(*) FROM audit_log WHERE reservation_id IS NOT NULL")
    accepted = query(shared.state, "SELECT count(*) FROM audit_log WHERE decision = 'accepted'")
    recovered = query(
        shared.state,
        "SELECT count(*) FROM audit_log WHERE decision = 'failed'"
        " AND reason LIKE 'dpproxy stopped%'",
    )
    assert still_open == 0
    assert audited == charges  # every charge has its audit record (failed if interrupted)
    assert accepted >= seen  # every answer a client received was recorded
    assert charges == accepted + recovered
    print(f"charges {charges}, answers seen {seen}, recovered after SIGKILL {recovered}")
    spent = Epsilon(
        json.loads(admin(shared.config, "budget", "show", "alice", "--json"))[0]["spent"]
    )
    assert spent > Epsilon.zero()


def test_admin_commands_on_the_shared_store_reach_both_servers(
    shared: Shared, servers: list[RunningServer]
) -> None:
    first, second = servers
    listed = json.loads(admin(shared.config, "analyst", "list", "--json"))
    assert [a["analyst"] for a in listed] == ["alice", "bob"]  # seeded once, not twice
    admin(shared.config, "analyst", "add", "carol", "--epsilon-total", "1", stdin="carol-pw\n")
    carol_dsn = second.dsn("bob").replace("bob:bob-pw", "carol:carol-pw")
    with psycopg.connect(carol_dsn, autocommit=True) as carol:  # the other server knows her
        carol.execute("SET dpproxy.epsilon = 0.4")
        carol.execute(COUNT).fetchall()
    with psycopg.connect(carol_dsn.replace(str(second.port), str(first.port))) as carol:
        carol.execute("SET dpproxy.epsilon = 0.4")
        carol.execute(COUNT).fetchall()
    shown = json.loads(admin(shared.config, "budget", "show", "carol", "--json"))[0]
    assert (shown["spent"], shown["remaining"]) == ("0.8", "0.2")
    assert admin(shared.config, "audit", "verify").startswith("audit log intact")
    checked = admin(shared.config, "config", "check")
    assert f"(schema {shared.state.schema})" in checked and "password" not in checked


def lookups_waiting(shared: Shared) -> int:
    """The state store connections waiting for a lock."""
    with psycopg.connect(shared.state.dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE application_name = %s AND wait_event_type = 'Lock'",
            (shared.application,),
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_login_waiting_on_the_state_store_stalls_no_other_session(shared: Shared) -> None:
    """A login reads its analyst from the state store; while that read waits (here on a
    table lock, as it would on a slow or unreachable PostgreSQL), the server goes on
    serving the sessions already open."""
    server = start(shared.config)
    answers: dict[str, object] = {}

    def login() -> None:
        try:
            with psycopg.connect(server.dsn("alice"), autocommit=True) as alice:
                answers["alice"] = alice.execute("SHOW dpproxy.epsilon").fetchone()
        except psycopg.Error as exc:
            answers["alice"] = exc

    try:
        with (
            psycopg.connect(server.dsn("bob"), autocommit=True) as bob,
            psycopg.connect(shared.state.dsn, autocommit=True) as blocker,
        ):
            blocker.execute("BEGIN")
            blocker.execute(
                sql.SQL("LOCK TABLE {}.analysts IN ACCESS EXCLUSIVE MODE").format(
                    sql.Identifier(shared.state.schema)
                )
            )
            thread = threading.Thread(target=login)
            thread.start()
            deadline = time.monotonic() + 10
            while lookups_waiting(shared) == 0 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert lookups_waiting(shared) == 1  # alice's login waits for the lock
            assert bob.execute("SHOW dpproxy.epsilon").fetchone() is not None
            # bob was answered while alice's lookup was still waiting (the lock times out
            # after 5 s: a blocked event loop would have answered bob only after it)
            assert lookups_waiting(shared) == 1
            assert thread.is_alive()
            blocker.execute("ROLLBACK")
        thread.join(timeout=30)
        assert answers["alice"] is not None and not isinstance(answers["alice"], Exception)
    finally:
        assert "Traceback" not in server.stop()
