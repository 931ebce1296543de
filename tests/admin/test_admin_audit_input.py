"""`dpproxy audit` with hostile input: record ids past what the store holds, and user
names and SQL (sent by any client, even unauthenticated) carrying terminal escapes."""

from __future__ import annotations

from pathlib import Path

import pytest

from accountant import Attempt, Decision, StateStore
from tests.admin.cli import run

# Sets the terminal's title, clears the screen, colours the text; a bidi override.
ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b[31mred\u202e"
ESCAPED = "\\x1b]0;owned\\x07\\x1b[2J\\x1b[31mred\\u202e"


@pytest.mark.parametrize("record_id", ["99999999999999999999999", str(2**63)])
def test_audit_show_of_an_id_past_the_largest_is_a_clear_error(
    config: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    record_id: str,
) -> None:
    code, out, err = run(capsys, monkeypatch, "audit", "show", record_id, "--config", str(config))
    assert code == 1 and out == ""
    assert f"no audit record {record_id}" in err and "audit list" in err
    assert "Traceback" not in err and "OverflowError" not in err
    # The largest id a store can hold is looked up as any other.
    largest = str(2**63 - 1)
    code, _, err = run(capsys, monkeypatch, "audit", "show", largest, "--config", str(config))
    assert code == 1 and f"no audit record {largest};" in err


def test_audit_tables_escape_control_characters(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with StateStore.open(config.parent / "state.sqlite") as store:
        record = store.record_refusal(
            Attempt(f"mallory{ESCAPES}", "10.0.0.9", f"SELECT '{ESCAPES}'\nFROM visits"),
            decision=Decision.AUTH_FAILED,
            reason=f"unknown user {ESCAPES}",
            budget=None,
        )
    c = ("--config", str(config))
    code, out, _ = run(capsys, monkeypatch, "audit", "list", "--format", "table", *c)
    assert code == 0
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert f"mallory{ESCAPED}"[:40] in out
    code, out, _ = run(capsys, monkeypatch, "audit", "show", str(record.id), *c)
    assert code == 0
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert f"SELECT '{ESCAPED}'\nFROM visits" in out  # the SQL's lines stay lines
    assert f"unknown user {ESCAPED}" in out
    # Scripts get the values as they are (JSON escapes them its own way).
    code, out, _ = run(capsys, monkeypatch, "audit", "show", str(record.id), "--format", "json", *c)
    assert code == 0 and "\\u001b]0;owned" in out
