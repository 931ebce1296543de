"""`dpproxy budget set --delta/--mechanism/--period` (kept by later changes) and
`dpproxy budget global`."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from proxy.cli import main
from tests.integration.server import write_config


def run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str
) -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_delta_mechanism_period_and_global_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    c = ("--config", str(write_config(tmp_path, backend="")))
    code, out, err = run(
        capsys,
        monkeypatch,
        *("budget", "set", "alice", "--delta", "1e-7", "--mechanism", "gaussian"),
        *("--period", "monthly", *c),
    )
    assert code == 0, err
    assert "delta 1e-7, gaussian, refreshed monthly" in out
    assert run(capsys, monkeypatch, "budget", "grant", "alice", "1", *c)[0] == 0
    code, out, _ = run(capsys, monkeypatch, "analyst", "list", "--json", *c)
    alice = next(r for r in json.loads(out) if r["analyst"] == "alice")
    assert (alice["delta"], alice["mechanism"], alice["period"]) == ("1e-7", "gaussian", "monthly")
    code, _, err = run(capsys, monkeypatch, "budget", "set", "alice", "--delta", "0", *c)
    assert code == 1 and "delta" in err and "nothing was changed" in err

    code, out, _ = run(capsys, monkeypatch, "budget", "global", *c)
    assert code == 0 and "no global budget" in out
    code, out, _ = run(capsys, monkeypatch, "budget", "global", "--epsilon-total", "3", *c)
    assert code == 0 and "global budget set to ε=3 at δ=1e-6" in out and "3 left" in out
    code, out, _ = run(capsys, monkeypatch, "budget", "global", "--none", *c)
    assert code == 0 and "global budget removed" in out
