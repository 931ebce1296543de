"""Under load: 32 concurrent sessions spending one analyst's budget (Laplace and Gaussian
answers mixed) never overspend; a server killed with SIGKILL in the middle of a load loses
no charge and no audit record, and the audit chain stays intact."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import pytest

from accountant import Decision, Epsilon, StateStore
from proxy.demo_data import DemoSize, generate, write_duckdb
from tests.integration.server import (
    RunningServer,
    dpproxy_in_process,
    session_loop,
    start,
    wait_until,
    write_config,
)

pytestmark = pytest.mark.integration

COUNT = "SELECT COUNT(*) FROM visits"
SESSIONS = 32


def directory_with_data(tmp_path: Path) -> Path:
    write_duckdb(generate(DemoSize(patients=200)), tmp_path / "demo.duckdb")
    return write_config(tmp_path, backend="")


def admin(config: Path, *args: str) -> str:
    result = dpproxy_in_process(*args, "--config", str(config))
    assert result.returncode == 0, result.stderr
    return result.stdout


def run_sessions(
    server: RunningServer, stop: threading.Event
) -> tuple[list[threading.Thread], list[int]]:
    answered: list[int] = []
    threads = [
        threading.Thread(target=session_loop, args=(server, i % 2 == 1, answered, stop))
        for i in range(SESSIONS)
    ]
    for thread in threads:
        thread.start()
    return threads, answered


def test_32_sessions_never_overspend(tmp_path: Path) -> None:
    config = directory_with_data(tmp_path)
    server = start(config)
    try:
        admin(
            config,
            "budget",
            "set",
            "alice",
            "--epsilon-total",
            "1.5",
            "--epsilon-per-query-max",
            "1",
        )
        stop = threading.Event()
        threads, answered = run_sessions(server, stop)
        for thread in threads:
            thread.join(timeout=120)
        assert not any(thread.is_alive() for thread in threads)
    finally:
        log = server.stop()
    assert "Traceback" not in log, log
    shown = json.loads(admin(config, "budget", "show", "alice", "--json"))[0]
    assert Epsilon(shown["spent"]) <= Epsilon("1.5")
    with StateStore.open(tmp_path / "state.sqlite") as store:
        accepted = store.audit_records(analyst="alice", decisions=[Decision.ACCEPTED])
        assert len(accepted) == len(answered) > 30
        assert any(r.rho for r in accepted) and any(not r.epsilon.is_zero() for r in accepted)
        assert store.verify_audit().intact


def test_sigkill_mid_load_loses_nothing(tmp_path: Path) -> None:
    config = directory_with_data(tmp_path)
    server = start(config)
    stop = threading.Event()
    threads, answered = run_sessions(server, stop)
    # Under load: the sessions have answered, on average, three times each.
    wait_until(lambda: len(answered) >= 3 * SESSIONS, "the sessions to be answered")
    server.process.kill()  # SIGKILL: no cleanup at all
    server.process.wait(timeout=10)
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    seen = len(answered)
    assert seen > 0
    restarted = start(config)  # recovers reservations the killed server left open
    try:
        verified = dpproxy_in_process("audit", "verify", "--config", str(config))
        assert verified.returncode == 0, verified.stdout + verified.stderr
    finally:
        log = restarted.stop()
    assert "Traceback" not in log, log
    conn = sqlite3.connect(tmp_path / "state.sqlite")
    charges = conn.execute("SELECT count(*) FROM reservations").fetchone()[0]
    still_open = conn.execute(
        "SELECT count(*) FROM reservations WHERE status = 'reserved'"
    ).fetchone()[0]
    audited = conn.execute(
        "SELECT count(*) FROM audit_log WHERE reservation_id IS NOT NULL"
    ).fetchone()[0]
    accepted = conn.execute(
        "SELECT count(*) FROM audit_log WHERE decision = 'accepted'"
    ).fetchone()[0]
    conn.close()
    assert still_open == 0
    assert audited == charges  # every charge has its audit record (failed if interrupted)
    assert accepted >= seen  # every answer a client received was recorded
