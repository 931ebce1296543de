"""The admin commands, run in-process: analysts, budgets, audit review, config, report."""

from __future__ import annotations

import csv
import io
import json
from decimal import Decimal
from pathlib import Path

import pytest

from accountant import Attempt, Cost, Decision, Epsilon, Rho, StateStore
from proxy.admin.config import SCHEMA_FILE, schema_text
from proxy.cli import main
from proxy.protocol.scram import ScramExchange
from tests.admin.cli import run

ROOT = Path(__file__).resolve().parents[2]


def test_analysts_and_budgets(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    c = ("--config", str(config))
    code, out, _ = run(capsys, monkeypatch, "analyst", "list", "--json", *c)
    assert code == 0
    assert [r["analyst"] for r in json.loads(out)] == ["alice", "bob"]  # seeded from config

    code, out, err = run(
        capsys, monkeypatch, "analyst", "add", "carol", "--epsilon-total", "2", *c, stdin="pw\n"
    )
    assert code == 0, err
    assert "carol: analyst added" in out and "pw" not in out
    code, _, err = run(capsys, monkeypatch, "analyst", "add", "carol", "--epsilon-total", "1", *c)
    assert code == 1 and "already exists" in err

    assert run(capsys, monkeypatch, "budget", "set", "carol", "--epsilon-total", "4", *c)[0] == 0
    assert run(capsys, monkeypatch, "budget", "grant", "carol", "0.5", *c)[0] == 0
    code, _, err = run(capsys, monkeypatch, "budget", "set", "carol", "--epsilon-default", "9", *c)
    assert code == 1 and "--epsilon-default" in err and "nothing was changed" in err
    code, out, _ = run(capsys, monkeypatch, "budget", "show", "carol", "--json", *c)
    assert (
        json.loads(out)[0] | {"total": "4.5", "spent": "0", "per_query_default": "1"}
        == (json.loads(out)[0])
    )

    with StateStore.open(_state(config)) as store:
        store.reserve(Attempt("carol", "127.0.0.1", "SELECT 1"), Epsilon(1))
    code, out, _ = run(capsys, monkeypatch, "budget", "show", *c)
    assert "carol" in out and "3.5" in out  # a table for people
    assert run(capsys, monkeypatch, "budget", "reset", "carol", *c)[0] == 0
    code, out, _ = run(capsys, monkeypatch, "budget", "show", "carol", "--json", *c)
    assert json.loads(out)[0]["spent"] == "0"

    assert run(capsys, monkeypatch, "analyst", "passwd", "carol", *c, stdin="new\n")[0] == 0
    with StateStore.open(_state(config)) as store:
        carol = store.analyst("carol")
        assert carol is not None
        ScramExchange(carol.verifier)
    assert run(capsys, monkeypatch, "analyst", "remove", "carol", *c)[0] == 0
    code, _, err = run(capsys, monkeypatch, "budget", "show", "carol", *c)
    assert code == 1 and "dpproxy analyst add carol" in err

    code, out, _ = run(capsys, monkeypatch, "audit", "list", "--decision", "admin", "--json", *c)
    admin = [json.loads(line) for line in out.splitlines()]
    assert len(admin) == 8  # 2 seeds, add, set, grant, reset, passwd, remove
    assert all(r["actor"] and r["sql"].startswith("dpproxy ") for r in admin)
    assert "passwd carol" in admin[-2]["sql"] and "new" not in admin[-2]["sql"].split()
    code, out, _ = run(capsys, monkeypatch, "audit", "verify", *c)
    assert code == 0 and "intact: 8 records" in out


def test_audit_filters_and_formats(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    c = ("--config", str(config))
    run(capsys, monkeypatch, "analyst", "list", *c)  # seeds alice and bob
    with StateStore.open(_state(config)) as store:
        r = store.reserve(
            Attempt("alice", "10.0.0.9:5000", "SELECT COUNT(*) FROM visits"), Epsilon(1)
        )
        store.complete(r, decision="accepted", reason=None, rows=1, duration_ms=12.5)
        store.record_refusal(
            Attempt("bob", "10.0.0.8:6000", "SELECT * FROM visits"),
            decision=Decision.REJECTED,
            reason="SELECT * would return individual rows",
            budget=None,
        )
    code, out, _ = run(
        capsys, monkeypatch, "audit", "export", "--format", "csv", "--decision", "accepted", *c
    )
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [(r["analyst"], r["epsilon"], r["remaining"], r["rows"]) for r in rows] == [
        ("alice", "1", "199", "1")
    ]
    assert rows[0]["client_address"] == "10.0.0.9:5000" and rows[0]["duration_ms"] == "12.5"
    code, out, _ = run(
        capsys, monkeypatch, "audit", "list", "--analyst", "bob", "--format", "json", *c
    )
    records = json.loads(out)
    assert [r["decision"] for r in records] == ["admin", "rejected"]
    assert run(capsys, monkeypatch, "audit", "list", "--since", "2999-01-01", *c)[1].startswith(
        "no audit records"
    )
    code, out, _ = run(
        capsys, monkeypatch, "audit", "list", "--until", "2000-01-01", "--format", "jsonl", *c
    )
    assert out == ""
    out_file = config.parent / "audit.jsonl"
    assert run(capsys, monkeypatch, "audit", "export", "--out", str(out_file), *c)[0] == 0
    assert len(out_file.read_text().splitlines()) == 4
    code, out, _ = run(capsys, monkeypatch, "audit", "show", "4", *c)
    assert "SELECT * FROM visits" in out and "individual rows" in out
    code, _, err = run(capsys, monkeypatch, "audit", "show", "99", *c)
    assert code == 1 and "audit list" in err
    code, _, err = run(capsys, monkeypatch, "audit", "list", "--since", "yesterday", *c)
    assert code == 1 and "2026-01-31" in err


def test_delta_in_budget_audit_and_report(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The δ of partition selection, exactly as the ledger holds it, in every admin view;
    CSV keeps one header when records with and without δ (or ρ) are mixed."""
    c = ("--config", str(config))
    run(capsys, monkeypatch, "analyst", "list", *c)  # seeds alice and bob
    with StateStore.open(_state(config)) as store:
        for sql, cost in [
            ("SELECT COUNT(*) FROM visits", Cost.pure(Epsilon(1))),
            ("SELECT d, COUNT(*) FROM v GROUP BY d", Cost(Epsilon(1), Rho.zero(), Decimal("2e-9"))),
            ("SELECT AVG(cost) FROM visits", Cost.zcdp(Rho("0.125"))),
        ]:
            r = store.reserve(Attempt("alice", "10.0.0.9:5000", sql), cost)
            store.complete(r, decision="accepted", reason=None, rows=1, duration_ms=1.0)
    code, out, _ = run(capsys, monkeypatch, "budget", "show", "alice", "--json", *c)
    shown = json.loads(out)[0]
    assert (shown["delta"], shown["delta_spent"], shown["delta_remaining"]) == (
        "1e-6",
        "2e-9",
        "9.98e-7",
    )
    code, out, _ = run(capsys, monkeypatch, "budget", "show", *c)
    assert "δ left" in out and "9.98e-7" in out
    code, out, err = run(capsys, monkeypatch, "audit", "export", "--format", "csv", *c)
    assert code == 0, err
    rows = [r for r in csv.DictReader(io.StringIO(out)) if r["decision"] == "accepted"]
    assert [(r["delta"], r["rho"]) for r in rows] == [("0", "0"), ("2e-9", "0"), ("0", "0.125")]
    code, out, _ = run(capsys, monkeypatch, "audit", "list", "--analyst", "alice", *c)
    header = out.splitlines()[0].split()
    assert header.index("δ") == header.index("left") + 1 and "2e-9" in out
    page = config.parent / "report.html"
    assert run(capsys, monkeypatch, "report", "--out", str(page), *c)[0] == 0
    assert "<th class=n>δ left</th>" in page.read_text()
    assert "<td class=n>2e-9</td><td class=n>9.98e-7</td>" in page.read_text()


def test_report_is_self_contained(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    c = ("--config", str(config))
    run(capsys, monkeypatch, "analyst", "list", *c)
    with StateStore.open(_state(config)) as store:
        for _ in range(3):
            r = store.reserve(Attempt("bob", "x", "SELECT COUNT(*) FROM visits"), Epsilon("0.5"))
            store.complete(r, decision="accepted", reason=None, rows=1, duration_ms=1.0)
        store.record_refusal(
            Attempt("bob", "x", "SELECT <b>"), decision="rejected", reason="<b>bad</b>", budget=None
        )
    page = config.parent / "report.html"
    assert run(capsys, monkeypatch, "report", "--out", str(page), *c)[0] == 0
    html = page.read_text()
    assert html.count("<svg") == 2  # bob: spending and queries per day; alice asked nothing
    assert "Nothing charged in this period" in html
    assert "<b>bad</b>" not in html and "&lt;b&gt;bad&lt;/b&gt;" in html
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "<script" not in html and "intact" in html


def test_config_check(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _ = run(capsys, monkeypatch, "config", "check", str(config))
    assert code == 0 and "valid configuration" in out and "alice, bob" in out
    bad = config.parent / "bad.toml"
    bad.write_text(config.read_text().replace("epsilon_total = 3.0", "epsilon_totl = 3.0"))
    code, _, err = run(capsys, monkeypatch, "config", "check", str(bad))
    assert code == 2
    assert str(bad) in err and "analysts.bob.epsilon_totl" in err and "spelling" in err


def test_schema_file_is_current() -> None:
    assert (ROOT / SCHEMA_FILE).read_text() == schema_text(), (
        "config/dpproxy.schema.json is stale: regenerate it with "
        "`dpproxy config schema > config/dpproxy.schema.json`"
    )


def _state(config: Path) -> Path:
    return config.parent / "state.sqlite"


@pytest.mark.parametrize(
    "command",
    [
        "config check",
        "config schema",
        "analyst add",
        "analyst remove",
        "analyst passwd",
        "analyst list",
        "budget show",
        "budget set",
        "budget grant",
        "budget reset",
        "audit list",
        "audit show",
        "audit export",
        "audit verify",
        "report",
    ],
)
def test_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main([*command.split(), "--help"])
    assert info.value.code == 0
    assert f"usage: dpproxy {command}" in capsys.readouterr().out
