"""Loading the configuration file: valid files load, bad ones say where and how to fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from proxy.demo import ANALYST_TEMPLATE, CONFIG_TEMPLATE
from proxy.protocol.scram import make_verifier
from proxy.settings import ConfigError, load_settings

VERIFIER = make_verifier("secret", iterations=4096)


def demo_config(tmp_path: Path, extra: str = "", analysts: str | None = None) -> Path:
    if analysts is None:
        analysts = ANALYST_TEMPLATE.format(
            name="alice", verifier=VERIFIER, total=10.0, default=1.0, cap=5.0
        )
    text = (
        CONFIG_TEMPLATE.format(
            host="127.0.0.1",
            port=6432,
            database="demo.duckdb",
            state="state.sqlite",
            analysts=analysts,
        )
        + extra
    )
    path = tmp_path / "dpproxy.toml"
    path.write_text(text)
    return path


def error_of(path: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    return str(caught.value)


def test_demo_config_loads_with_paths_resolved(tmp_path: Path) -> None:
    settings = load_settings(demo_config(tmp_path))
    assert settings.backend.path == tmp_path / "demo.duckdb"
    assert settings.state.path == tmp_path / "state.sqlite"
    assert settings.tables["visits"].max_rows_per_unit == 30
    budget = settings.analysts["alice"].budget()
    assert budget.total.plain == "10" and budget.default_per_query.plain == "1"


def test_missing_file(tmp_path: Path) -> None:
    message = error_of(tmp_path / "nope.toml")
    assert "nope.toml" in message and "dpproxy demo" in message


def test_invalid_toml(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[server\nport = 1")
    assert "not valid TOML" in error_of(path)


def test_unknown_key_is_named(tmp_path: Path) -> None:
    message = error_of(demo_config(tmp_path, extra="\n[tables.visits.columns.stay]\nlowr = 1\n"))
    assert "tables.visits.columns.stay.lowr" in message and "unknown setting" in message


def test_plain_text_password_is_refused(tmp_path: Path) -> None:
    analysts = ANALYST_TEMPLATE.format(name="eve", verifier="hunter2", total=1, default=1, cap=1)
    message = error_of(demo_config(tmp_path, analysts=analysts))
    assert "analysts.eve.password" in message and "dpproxy passwd" in message


def test_budget_order_is_checked(tmp_path: Path) -> None:
    analysts = ANALYST_TEMPLATE.format(name="eve", verifier=VERIFIER, total=1, default=2, cap=2)
    message = error_of(demo_config(tmp_path, analysts=analysts))
    assert "analysts.eve" in message and "epsilon_" in message


def test_bad_bounds_are_named(tmp_path: Path) -> None:
    extra = "\n[tables.visits.columns.visit_id]\nlower = 5\nupper = 1\n"
    message = error_of(demo_config(tmp_path, extra=extra))
    assert "tables.visits.columns.visit_id" in message and "greater than upper" in message


def test_protected_table_needs_a_unit(tmp_path: Path) -> None:
    message = error_of(demo_config(tmp_path, extra="\n[tables.lab]\nmax_rows_per_unit = 2\n"))
    assert "tables.lab" in message and "privacy_unit" in message
