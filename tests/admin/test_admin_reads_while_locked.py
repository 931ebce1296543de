"""Admin commands that only look at the state store read it while another process holds
its write lock (a long write transaction): SQLite's WAL and PostgreSQL let readers read,
so `dpproxy audit list`, `budget show` and the others answer at once instead of failing
with "stayed locked ... for too long". Commands that change something still wait for the
lock and fail closed. Run in-process against a real SQLite file or PostgreSQL schema; the
lock is held by a real second connection."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from proxy.settings import load_settings
from tests.accountant.backends import write_lock_held
from tests.admin.cli import run
from tests.admin.test_admin_postgres_state import with_state
from tests.integration.server import write_config

LOCK_TIMEOUT = 1.0


@pytest.fixture(params=["sqlite", "postgres"])
def config(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    if request.param == "sqlite":
        return write_config(tmp_path, backend="", lock_timeout_seconds=LOCK_TIMEOUT)
    dsn, schema = request.getfixturevalue("pg_dsn"), request.getfixturevalue("pg_schema")
    return with_state(
        write_config(tmp_path, backend=""),
        f'dsn = "{dsn}"\nschema = "{schema}"\nlock_timeout_seconds = {LOCK_TIMEOUT}',
    )


def test_read_only_commands_answer_while_another_process_writes(
    config: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    c = ("--config", str(config))
    code, _, err = run(capsys, monkeypatch, "budget", "grant", "alice", "1", *c)  # seeds it
    assert code == 0, err
    location = load_settings(config).state.location
    with write_lock_held(location):
        started = time.monotonic()
        code, out, err = run(capsys, monkeypatch, "audit", "list", "--json", *c)
        assert code == 0, err
        assert [json.loads(line)["decision"] for line in out.splitlines()] == ["admin"] * 3
        code, out, err = run(capsys, monkeypatch, "budget", "show", "--json", *c)
        assert code == 0, err
        assert [r["analyst"] for r in json.loads(out)] == ["alice", "bob"]
        code, out, err = run(capsys, monkeypatch, "budget", "show", "alice", *c)
        assert code == 0, err
        code, out, err = run(capsys, monkeypatch, "analyst", "list", *c)
        assert code == 0 and "alice" in out, err
        code, out, err = run(capsys, monkeypatch, "budget", "global", *c)
        assert code == 0 and "no global budget" in out, err
        code, out, err = run(capsys, monkeypatch, "audit", "verify", *c)
        assert code == 0 and "audit log intact: 3 records" in out, err
        code, out, err = run(capsys, monkeypatch, "audit", "show", "1", *c)
        assert code == 0, err
        report = tmp_path / "report.html"
        code, _, err = run(capsys, monkeypatch, "report", "--out", str(report), *c)
        assert code == 0 and report.exists(), err
        assert time.monotonic() - started < 5 * LOCK_TIMEOUT  # none waited for the lock

        # A change still waits for the lock, then fails closed.
        code, out, err = run(capsys, monkeypatch, "budget", "grant", "alice", "1", *c)
        assert code != 0 and "locked" in err, (out, err)
        assert "or raise [state] lock_timeout_seconds" in err  # the setting, by its name
    code, out, err = run(capsys, monkeypatch, "audit", "verify", *c)
    assert code == 0 and "audit log intact: 3 records" in out, err
