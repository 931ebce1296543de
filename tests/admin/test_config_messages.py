"""What `dpproxy config check` (and `serve`, which loads the file alike) says about a
configuration it refuses: the key and what to write instead, never pydantic's own wording
("Input should be ...") or the names of the code's classes; and what it, `serve` and the
admin commands say about a state store or a database they cannot use. Run in-process (the
admin tests' helper) or as a subprocess, on real files, SQLite and PostgreSQL."""

from __future__ import annotations

import copy
import re
import socket
import tomllib
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import pytest
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from proxy.demo_data import DemoSize, generate, write_duckdb
from proxy.settings import (
    AnalystSettings,
    BackendSettings,
    ServerSettings,
    Settings,
    StateSettings,
)
from proxy.settings_errors import describe
from rewriter.policy import ColumnPolicy, TablePolicy
from tests.admin.cli import run
from tests.integration.server import dpproxy

PYDANTIC_WORDING = re.compile(r"Input should|instance of|<class |TablePolicy|ColumnPolicy")


def _with(config: Path, old: str, new: str) -> None:
    text = config.read_text()
    assert old in text, old
    config.write_text(text.replace(old, new, 1))


def _refusal(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> str:
    code, out, err = run(capsys, monkeypatch, "config", "check", str(config))
    assert code == 2 and "valid configuration" not in out, (out, err)
    assert not PYDANTIC_WORDING.search(err), err
    return err


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            'domain = ["F", "M"]',
            'domain = "F"',
            "  tables.patients.columns.sex.domain: expected an array (values in square "
            'brackets, separated by commas), got "F" (a string); write e.g. domain = ["F"]',
        ),
        (
            "[tables.patients]\n",
            '[[tables.people]]\nprivacy_unit = "person_id"\n\n[tables.patients]\n',
            "  tables.people: expected a table, got an array of tables; write [tables.people] "
            "(one pair of brackets), not [[tables.people]]",
        ),
        (
            "epsilon_total = 200.0",
            "epsilon_total = -5",
            "  analysts.alice.epsilon_total: must be greater than 0, got -5; e.g. "
            "epsilon_total = 1 (Total ε the analyst may spend)",
        ),
        (
            'engine = "duckdb"',
            'engine = "sqlite"',
            '  backend.engine: must be "duckdb" or "postgres", got "sqlite" (a string); e.g. '
            'engine = "duckdb"',
        ),
        (
            "port = 0",
            "port = 70000",
            "  server.port: must be between 0 and 65535, got 70000; e.g. port = 6432",
        ),
        (
            "epsilon_default = 1.0",
            "epsilon_defualt = 1.0",
            "  analysts.alice.epsilon_defualt: unknown setting (did you mean epsilon_default?); "
            "check its spelling against docs/configuration.md",
        ),
        (
            'host = "127.0.0.1"',
            "host = [1]",
            '  server.host: expected text in quotes, got an array; e.g. host = "…"',
        ),
        (
            'path = "state.sqlite"',
            "path = [1]",
            '  state.path: expected a file name in quotes, got an array; e.g. path = "…"',
        ),
        (
            'domain = ["F", "M"]',
            'domain = ["F", "F", "M"]',
            '  tables.patients.columns.sex: domain lists "F" more than once; list each value '
            'once: domain = ["F", "M"]',
        ),
        (
            "lower = 1920",
            "domain = [1, 1.0, 2]\nlower = 1920",
            "  tables.patients.columns.birth_year: domain lists 1 more than once (1 and 1.0, "
            "or 0.0 and -0.0, are one value); list each value once: domain = [1, 2]",
        ),
    ],
)
def test_a_refused_value_says_the_key_and_what_to_write(
    config: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    old: str,
    new: str,
    expected: str,
) -> None:
    _with(config, old, new)
    err = _refusal(config, capsys, monkeypatch)
    assert [line for line in err.splitlines() if line.startswith(expected)], err


def test_a_missing_section_or_setting_says_what_to_add(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = config.read_text()
    backend = text[text.index("[backend]") : text.index("[state]")]
    config.write_text(text.replace(backend, "").replace("epsilon_total = 3.0\n", ""))
    err = _refusal(config, capsys, monkeypatch)
    assert (
        "  backend: required section is missing; add [backend] (see docs/configuration.md)" in err
    )
    assert (
        "  analysts.bob.epsilon_total: required setting is missing; add epsilon_total = … "
        "(Total ε the analyst may spend)"
    ) in err


def test_a_scram_verifier_cut_short_is_called_damaged(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = config.read_text()
    verifier = re.search(r'password = "(SCRAM-SHA-256[^"]*)"', text)
    assert verifier
    cut = verifier.group(1).rsplit(":", 1)[0]  # without its ":<ServerKey>"
    config.write_text(text.replace(verifier.group(1), cut, 1))
    err = _refusal(config, capsys, monkeypatch)
    assert "plain-text" not in err  # before: "never a plain-text password"
    assert (
        "analysts.alice.password: this SCRAM-SHA-256 verifier is damaged or incomplete (its "
        ":<ServerKey> part is missing)"
    ) in err
    assert "copy all of what `dpproxy passwd` printed, or run it again" in err
    _with(config, cut, "hunter2")  # a password, not a verifier: said as before
    err = _refusal(config, capsys, monkeypatch)
    assert "never a plain-text password" in err


# -- every setting, every kind of value pydantic refuses ---------------------------------

SECTIONS: list[tuple[tuple[str, ...], type[BaseModel]]] = [
    (("server",), ServerSettings),
    (("backend",), BackendSettings),
    (("state",), StateSettings),
    (("analysts", "alice"), AnalystSettings),
    (("tables", "visits"), TablePolicy),
    (("tables", "visits", "columns", "cost"), ColumnPolicy),
]


def _without_none(annotation: object) -> object:
    if get_origin(annotation) in (Union, types.UnionType):
        kept = [a for a in get_args(annotation) if a is not type(None)]
        return kept[0] if len(kept) == 1 else annotation
    return annotation


def _wrong_values(field: FieldInfo) -> list[object]:
    """Values of the right TOML type that the field refuses: out of its bounds, not one of
    its choices; and of a TOML type pydantic (not value_type_problems) refuses."""
    annotation = _without_none(field.annotation)
    wrong: list[object] = []
    for rule in field.metadata:
        for name, step in (("gt", 0), ("ge", -1), ("lt", 0), ("le", 1)):
            bound = getattr(rule, name, None)
            if isinstance(bound, int | float):
                wrong.append(bound + step if step else bound)
    if get_origin(annotation) is Literal:
        wrong.append("nonsense")
    if get_origin(annotation) is list:
        wrong.append("text")
    if get_origin(annotation) is dict:
        wrong.append([{"key": 1}])
    if annotation in (str, Path):
        wrong.append([1])
    return wrong


def _cases(raw: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    cases = []
    for loc, model in SECTIONS:
        for name, field in model.model_fields.items():
            key = field.alias or name
            for value in _wrong_values(field):
                changed = copy.deepcopy(raw)
                table = changed
                for part in loc:
                    table = table.setdefault(part, {})
                table[key] = value
                cases.append((".".join((*loc, key)), changed))
    return cases


def test_no_setting_is_refused_in_pydantics_words(config: Path) -> None:
    raw = tomllib.loads(config.read_text())
    cases = _cases(raw)
    assert len(cases) > 30
    for key, changed in cases:
        with pytest.raises(ValidationError) as refused:
            Settings.model_validate(changed)
        text = describe(refused.value, Settings)
        assert f"  {key}: " in text, (key, text)
        assert not PYDANTIC_WORDING.search(text), (key, text)
        line = next(line for line in text.splitlines() if line.startswith(f"  {key}: "))
        assert re.search(r"must be|expected|(^|; )e\.g\.", line), (key, line)


# -- the state store and the database ------------------------------------------------------


def test_a_state_path_that_is_a_directory_is_called_one(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (config.parent / "store").mkdir()
    _with(config, 'path = "state.sqlite"', 'path = "store"')
    code, out, err = run(capsys, monkeypatch, "config", "check", str(config))
    assert code == 0 and "valid configuration" in out, err
    assert "warning: [state] path: dpproxy state file" in out
    assert "store: it is a directory, not a file; set [state] path to a file" in out
    code, _, err = run(capsys, monkeypatch, "budget", "show", "--config", str(config))
    assert code == 1 and "it is a directory, not a file" in err, err
    assert "disk I/O" not in err and "disk space" not in err  # before: a disk I/O error
    assert [p.name for p in config.parent.iterdir() if p.name.startswith("store")] == ["store"]


def test_config_check_reads_the_state_file_and_says_when_it_is_damaged(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (config.parent / "state.sqlite").write_bytes(b"SQLite format 3\x00" + b"garbage" * 500)
    code, out, err = run(capsys, monkeypatch, "config", "check", str(config))
    assert code == 0 and err == "", err
    assert "warning: [state] path: dpproxy state file" in out  # before: nothing said
    assert "it is damaged or is not a dpproxy state file" in out
    assert "(`dpproxy serve` refuses to start until this is fixed)" in out


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def served(config: Path) -> Path:
    """The admin tests' configuration with a real DuckDB file of the demo's tables."""
    write_duckdb(generate(DemoSize(patients=50), seed=1), config.parent / "demo.duckdb")
    return config


def test_serve_with_an_unreachable_state_dsn_says_it_did_not_start(served: Path) -> None:
    dsn = f"postgresql://postgres@127.0.0.1:{_closed_port()}/postgres"
    _with(served, 'path = "state.sqlite"', f'dsn = "{dsn}"')
    result = dpproxy("serve", "--config", str(served), "--port", "0")
    assert result.returncode == 1, result.stderr
    assert "dpproxy: the server did not start: dpproxy state database" in result.stderr
    assert "check that the server is running and reachable and the [state] dsn" in result.stderr
    assert "reconnects" not in result.stderr  # before: "dpproxy reconnects at its next request"
    assert "Traceback" not in result.stderr


def test_admin_commands_with_an_unreachable_state_dsn_do_not_promise_a_reconnect(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dsn = f"postgresql://postgres@127.0.0.1:{_closed_port()}/postgres"
    _with(config, 'path = "state.sqlite"', f'dsn = "{dsn}"')
    code, _, err = run(capsys, monkeypatch, "budget", "show", "--config", str(config))
    assert code == 1 and "[state] dsn" in err and "reconnects" not in err, err


def test_serve_with_an_unreachable_backend_dsn_names_the_setting(served: Path) -> None:
    dsn = f"postgresql://postgres@127.0.0.1:{_closed_port()}/postgres"
    _with(served, 'engine = "duckdb"', f'engine = "postgres"\ndsn = "{dsn}"')
    _with(served, 'path = "demo.duckdb"\n', "")
    result = dpproxy("serve", "--config", str(served), "--port", "0")
    assert result.returncode == 1, result.stderr
    assert "dpproxy: cannot connect to PostgreSQL: " in result.stderr
    assert "check [backend] dsn (host, port, user, password, database)" in result.stderr
