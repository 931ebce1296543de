"""`analyst add`, `budget set` and `config check` warn (and still do what was asked) when
an analyst's query at their default ε can never fit their budget: with Gaussian noise
the default ε=1 is ρ=0.5, about ε=5.2 at δ=1e-6, more than a budget of ε=1. The warning
names the largest default that fits, as the ledger charges it. Run in-process on a real
configuration and SQLite state store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accountant import AnalystBudget, Epsilon, Mechanism
from accountant.ledger import NOTHING_SPENT, session_cost
from tests.admin.cli import run

WARNING = "warning: gus: a query at the default ε=1 with Gaussian noise (ρ=0.5, that is ε=5.2"


def _fits(default: str) -> bool:
    budget = AnalystBudget(
        total=Epsilon(1), default_per_query=Epsilon(default), mechanism=Mechanism.GAUSSIAN
    )
    cost = session_cost(budget.default_per_query, gaussian=True)
    return NOTHING_SPENT.plus(cost).epsilon_nano(budget.delta) <= budget.total.nano


def test_analyst_add_warns_when_the_default_query_cannot_fit(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    c = ("--config", str(config))
    code, out, err = run(
        capsys, monkeypatch, "analyst", "add", "gus", "--epsilon-total", "1",
        "--mechanism", "gaussian", *c, stdin="pw\n",
    )  # fmt: skip
    assert code == 0 and "gus: analyst added" in out, err  # a warning, not a refusal
    assert WARNING in err
    assert "costs more than the whole budget of ε=1" in err
    assert "change it with `dpproxy budget set gus` and --epsilon-default 0.22" in err
    assert "--mechanism laplace or a larger --epsilon-total" in err
    assert _fits("0.22") and not _fits("0.23")  # the largest with two digits
    # budget set warns likewise, and not once the default fits.
    code, _, err = run(capsys, monkeypatch, "budget", "set", "gus", "--epsilon-total", "2", *c)
    assert code == 0 and "a query at the default ε=1" in err and "0.41 (the most" in err
    code, _, err = run(capsys, monkeypatch, "budget", "set", "gus", "--epsilon-default", "0.4", *c)
    assert code == 0 and "warning" not in err, err
    code, out, _ = run(capsys, monkeypatch, "budget", "show", "gus", "--json", *c)
    assert json.loads(out)[0]["per_query_default"] == "0.4"


def test_a_laplace_analyst_gets_no_warning(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = run(
        capsys, monkeypatch, "analyst", "add", "lap", "--epsilon-total", "1",
        "--config", str(config), stdin="pw\n",
    )  # fmt: skip
    assert code == 0 and err == "", err


def test_config_check_warns_about_configured_and_stored_analysts(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = config.read_text()
    bob = text[text.index("[analysts.bob]") :].split("\n\n")[0]
    gaussian = bob.replace("[analysts.bob]", "[analysts.gus]")
    gaussian = gaussian.replace("epsilon_per_query_max = 1.0", 'mechanism = "gaussian"')
    config.write_text(text.replace(bob, f"{bob}\n\n{gaussian}"))
    code, out, err = run(capsys, monkeypatch, "config", "check", str(config))
    assert code == 0 and "valid configuration" in out, err
    assert "[analysts.gus]" not in out  # ε=0.5 is ρ=0.125: ε≈2.4, within 3
    config.write_text(config.read_text().replace("epsilon_total = 3.0", "epsilon_total = 1.0"))
    code, out, err = run(capsys, monkeypatch, "config", "check", str(config))
    assert code == 0 and "valid configuration" in out, err
    assert "warning: [analysts.gus]: a query at the default ε=0.5 with Gaussian noise" in out
    assert "costs more than the whole budget of ε=1" in out
    # A stored analyst's budget is checked too (it wins over the file).
    code, _, err = run(
        capsys, monkeypatch, "analyst", "add", "gus2", "--epsilon-total", "1",
        "--mechanism", "gaussian", "--config", str(config), stdin="pw\n",
    )  # fmt: skip
    assert code == 0, err
    code, out, err = run(capsys, monkeypatch, "config", "check", str(config))
    assert code == 0, err
    assert 'warning: analyst "gus2": a query at the default ε=1 with Gaussian noise' in out
    assert "`dpproxy budget set gus2` and --epsilon-default 0.22" in out


def test_config_check_names_the_config_keys_to_change(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = config.read_text()
    bob = text[text.index("[analysts.bob]") :].split("\n\n")[0]
    changed = bob.replace("epsilon_total = 3.0", "epsilon_total = 1.0")
    changed = changed.replace("epsilon_default = 0.5", "epsilon_default = 1.0")
    changed = changed.replace("epsilon_per_query_max = 1.0", 'mechanism = "gaussian"')
    config.write_text(text.replace(bob, changed))
    code, out, err = run(capsys, monkeypatch, "config", "check", str(config))
    assert code == 0, err
    assert "warning: [analysts.bob]: a query at the default ε=1 with Gaussian noise" in out
    assert 'set epsilon_default = 0.22 (the most that fits), mechanism = "laplace"' in out
