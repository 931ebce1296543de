"""The admin commands, run in-process, against a state store in PostgreSQL ([state] dsn)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from proxy.cli import main
from tests.integration.server import write_config


def with_state(config: Path, state: str) -> Path:
    text = config.read_text()
    start = text.index("[state]\n")
    end = text.index("\n", start + len("[state]\n"))
    config.write_text(text[:start] + f"[state]\n{state}" + text[end:])
    return config


@pytest.fixture
def config(tmp_path: Path, pg_dsn: str, pg_schema: str) -> Path:
    return with_state(
        write_config(tmp_path, backend=""), f'dsn = "{pg_dsn}"\nschema = "{pg_schema}"'
    )


def run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str, stdin: str = ""
) -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_analysts_budgets_and_audit(
    config: Path,
    tmp_path: Path,
    pg_dsn: str,
    pg_schema: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    c = ("--config", str(config))
    code, out, err = run(capsys, monkeypatch, "analyst", "list", "--json", *c)
    assert code == 0, err
    assert [r["analyst"] for r in json.loads(out)] == ["alice", "bob"]  # seeded from config
    code, out, err = run(
        capsys, monkeypatch, "analyst", "add", "carol", "--epsilon-total", "2", *c, stdin="pw\n"
    )
    assert code == 0, err
    assert "carol: analyst added" in out
    assert run(capsys, monkeypatch, "budget", "grant", "carol", "0.5", *c)[0] == 0
    code, out, _ = run(capsys, monkeypatch, "budget", "show", "carol", "--json", *c)
    assert code == 0
    shown = json.loads(out)[0]
    assert (shown["total"], shown["spent"], shown["remaining"]) == ("2.5", "0", "2.5")

    code, out, _ = run(capsys, monkeypatch, "audit", "verify", *c)
    assert code == 0 and "audit log intact: 4 records" in out  # 2 seeded, add, grant
    report = tmp_path / "report.html"
    assert run(capsys, monkeypatch, "report", "--out", str(report), *c)[0] == 0
    assert f"(schema {pg_schema})" in report.read_text()

    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # an intruder edits record 3
        conn.execute(sql.SQL("SET search_path = {}").format(sql.Identifier(pg_schema)))
        conn.execute("ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_update")
        conn.execute("UPDATE audit_log SET reason = 'nothing happened' WHERE id = 3")
    code, out, _ = run(capsys, monkeypatch, "audit", "verify", *c)
    assert code == 1
    assert "audit log BROKEN at record 3: record 3 was changed after it was written" in out


def test_unreachable_state_server(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config = with_state(
        write_config(tmp_path, backend=""), 'dsn = "postgresql://ledger:sekret@127.0.0.1:1/acct"'
    )
    code, out, err = run(capsys, monkeypatch, "budget", "show", "--config", str(config))
    assert code == 1 and out == ""
    assert "postgresql://ledger@127.0.0.1:1/acct (schema dpproxy)" in err
    assert "the connection to PostgreSQL failed" in err and "sekret" not in err
