"""Documentation stays complete: every setting, every command, the example config."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel

from proxy import session
from proxy.cli import build_parser
from proxy.settings import (
    AnalystSettings,
    BackendSettings,
    ServerSettings,
    Settings,
    StateSettings,
    load_settings,
)
from rewriter.policy import ColumnPolicy, TablePolicy

ROOT = Path(__file__).resolve().parents[2]
CONFIG_DOC = (ROOT / "docs" / "configuration.md").read_text()
README = (ROOT / "README.md").read_text()

SECTIONS: dict[str, type[BaseModel]] = {
    "[server]": ServerSettings,
    "[backend]": BackendSettings,
    "[state]": StateSettings,
    "[analysts.NAME]": AnalystSettings,
    "[tables.NAME]": TablePolicy,
    "[tables.NAME.columns.COLUMN]": ColumnPolicy,
}


def section_text(heading: str) -> str:
    match = re.search(rf"^## `{re.escape(heading)}`\n(.*?)(?=^## |\Z)", CONFIG_DOC, re.M | re.S)
    assert match, f"docs/configuration.md has no section for {heading}"
    return match.group(1)


def test_every_setting_is_documented_in_its_section() -> None:
    for heading, model in SECTIONS.items():
        text = section_text(heading)
        for name, field in model.model_fields.items():
            key = field.alias or name
            if key == "columns":
                continue  # documented as its own section
            assert f"| `{key}` |" in text, f"{heading} {key} is not documented"


def test_every_session_setting_is_documented() -> None:
    """Each ``dpproxy.*`` session parameter has a row in the session settings table."""
    table = CONFIG_DOC[CONFIG_DOC.index("## Session settings (SQL)") :]
    names = [
        value
        for name, value in vars(session).items()
        if name.endswith("_PARAMETER") and isinstance(value, str) and value.startswith("dpproxy.")
    ]
    assert "dpproxy.bias_check" in names
    for name in names:
        assert f"| `SET {name}" in table or f"| `SHOW {name}" in table, f"{name} undocumented"


def test_every_top_level_section_is_covered() -> None:
    covered = {"server", "backend", "state", "analysts", "tables"}
    assert set(Settings.model_fields) == covered


def test_example_config_loads(tmp_path: Path) -> None:
    example = ROOT / "config" / "dpproxy.example.toml"
    copy = tmp_path / "dpproxy.toml"
    copy.write_text(example.read_text())
    settings = load_settings(copy)
    assert settings.backend.engine == "duckdb"
    assert set(settings.tables) == {"patients", "visits", "departments"}
    assert "alice" in settings.analysts


def test_every_command_is_in_the_readme() -> None:
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command")
    for name, sub in commands.choices.items():  # type: ignore[union-attr]
        nested = [a for a in sub._actions if a.dest.endswith("_command")]
        if nested:
            for action in nested[0].choices:  # type: ignore[union-attr]
                assert f"`dpproxy {name} {action}" in README, f"{name} {action} not in README"
        else:
            assert f"`dpproxy {name}" in README, f"{name} not in README"


def test_readme_starts_with_the_two_commands() -> None:
    blocks = re.findall(r"```sh\n(.*?)\n```", README, re.S)
    assert blocks[0].endswith("dpproxy demo")
    assert blocks[1].endswith("pytest") and "[test]" in blocks[1]
