"""[state]: a SQLite file, or a PostgreSQL URL and schema shared by several servers."""

from __future__ import annotations

from pathlib import Path

import pytest

from accountant import PostgresState
from proxy.demo import ANALYST_TEMPLATE, CONFIG_TEMPLATE
from proxy.protocol.scram import make_verifier
from proxy.settings import ConfigError, load_settings

VERIFIER = make_verifier("secret", iterations=4096)


def config_with_state(tmp_path: Path, state: str) -> Path:
    """The demo configuration with its [state] section replaced by ``state``."""
    text = CONFIG_TEMPLATE.format(
        host="127.0.0.1",
        port=6432,
        database="demo.duckdb",
        state="state.sqlite",
        analysts=ANALYST_TEMPLATE.format(
            name="alice", verifier=VERIFIER, total=10.0, default=1.0, cap=5.0
        ),
    )
    start = text.index("[state]\n")
    end = text.index("\n", start + len("[state]\n"))
    path = tmp_path / "dpproxy.toml"
    path.write_text(text[:start] + f"[state]\n{state}" + text[end:])
    return path


def error_of(path: Path) -> str:
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    return str(caught.value)


def test_default_is_a_file(tmp_path: Path) -> None:
    settings = load_settings(config_with_state(tmp_path, 'path = "ledger.sqlite"'))
    assert settings.state.location == tmp_path / "ledger.sqlite"
    assert settings.state.describe() == str(tmp_path / "ledger.sqlite")


def test_postgresql_url_and_schema(tmp_path: Path) -> None:
    settings = load_settings(
        config_with_state(
            tmp_path, 'dsn = "postgresql://ledger:pw@db.internal:5433/acct"\nschema = "budgets"'
        )
    )
    location = settings.state.location
    assert isinstance(location, PostgresState)
    assert (location.dsn, location.schema) == (
        "postgresql://ledger:pw@db.internal:5433/acct",
        "budgets",
    )
    assert settings.state.describe() == (
        "postgresql://ledger@db.internal:5433/acct (schema budgets)"
    )


def test_schema_defaults_to_dpproxy(tmp_path: Path) -> None:
    settings = load_settings(config_with_state(tmp_path, 'dsn = "postgres://db/acct"'))
    location = settings.state.location
    assert isinstance(location, PostgresState) and location.schema == "dpproxy"


@pytest.mark.parametrize(
    ("state", "message"),
    [
        (
            'path = "s.sqlite"\ndsn = "postgresql://db/acct"',
            "state: set either path (a SQLite file) or dsn (a PostgreSQL server), not both",
        ),
        ('schema = "dpproxy"', "state: schema applies only to a PostgreSQL state store"),
        ('dsn = "host=db dbname=acct"', "state.dsn: must be a PostgreSQL URL like postgresql://"),
        ('dsn = "postgresql://db/acct?bogus=1"', "state.dsn: is not a valid PostgreSQL URL"),
        (
            'dsn = "postgresql://db/acct"\nschema = "Dp-Proxy"',
            "state.schema: 'Dp-Proxy' is not a usable schema name",
        ),
    ],
)
def test_bad_state_settings_say_how_to_fix(tmp_path: Path, state: str, message: str) -> None:
    assert message in error_of(config_with_state(tmp_path, state))
