"""Answers from the answer cache under load: their audit records are grouped into shared
commits without an fsync of their own, yet a server killed with SIGKILL in the middle of
the load loses none that a client received, and the audit chain stays intact."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import psycopg
import pytest

from proxy.demo_data import DemoSize, generate, write_duckdb
from tests.integration.server import RunningServer, dpproxy_in_process, start, write_config

pytestmark = pytest.mark.integration

COUNT = "SELECT COUNT(*) FROM visits"
SESSIONS = 16


def session_loop(
    server: RunningServer, answered: list[str], stop: threading.Event, failed: list[str]
) -> None:
    try:
        with psycopg.connect(server.dsn("alice"), autocommit=True, connect_timeout=10) as conn:
            notices: list[str] = []
            conn.add_notice_handler(lambda notice: notices.append(notice.message_primary))
            while not stop.is_set():
                conn.execute(COUNT).fetchall()
                answered.append("cached" if "was cached" in notices[-1] else "charged")
    except psycopg.OperationalError:
        return  # the server was killed
    except psycopg.Error as error:
        failed.append(str(error))


def test_sigkill_mid_load_of_cached_answers_loses_no_record(tmp_path: Path) -> None:
    write_duckdb(generate(DemoSize(patients=200)), tmp_path / "demo.duckdb")
    config = write_config(tmp_path, backend="")
    text = config.read_text()
    config.write_text(text.replace("answer_cache_seconds = 0", "answer_cache_seconds = 3600", 1))
    server = start(config)
    stop = threading.Event()
    answered: list[str] = []
    failed: list[str] = []
    threads = [
        threading.Thread(target=session_loop, args=(server, answered, stop, failed))
        for _ in range(SESSIONS)
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    while answered.count("cached") < 200 and time.monotonic() < deadline:
        time.sleep(0.05)
    server.process.kill()  # SIGKILL, mid-load: no cleanup at all
    server.process.wait(timeout=10)
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    assert not failed, failed
    cached, charged = answered.count("cached"), answered.count("charged")
    assert cached >= 200
    restarted = start(config)
    try:
        verified = dpproxy_in_process("audit", "verify", "--config", str(config))
        assert verified.returncode == 0, verified.stdout + verified.stderr
    finally:
        log = restarted.stop()
    assert "Traceback" not in log, log
    conn = sqlite3.connect(tmp_path / "state.sqlite")
    counts = dict(
        conn.execute(
            "SELECT decision, count(*) FROM audit_log WHERE analyst = 'alice' GROUP BY decision"
        ).fetchall()
    )
    conn.close()
    assert counts.get("cached", 0) >= cached  # every cached answer received was recorded
    assert counts.get("accepted", 0) >= charged
