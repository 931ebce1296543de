"""Configuration values of the wrong TOML type, privacy-unit paths the file alone shows
wrong, and `dpproxy demo --schema` without `--postgres`: refused with the key, the file and
the fix, by `dpproxy config check` and by `dpproxy serve` alike (run in-process)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any, get_args, get_origin

import pytest
from pydantic import BaseModel, ValidationError

from proxy.settings import (
    AnalystSettings,
    BackendSettings,
    ServerSettings,
    Settings,
    StateSettings,
    load_settings,
)
from rewriter.policy import ColumnPolicy, TablePolicy
from tests.admin.cli import run

#: (text in the test configuration, what replaces it, the key, words of the message)
WRONG_TYPES = [
    ("epsilon_total = 200.0", "epsilon_total = true", "analysts.alice.epsilon_total", "a number"),
    ("epsilon_total = 200.0", 'epsilon_total = "10"', "analysts.alice.epsilon_total", "quotes"),
    ("port = 0", "port = true", "server.port", "a whole number"),
    ("port = 0", "port = 6432.0", "server.port", "a whole number"),
    ("lower = 0\nupper = 250000", "lower = -1\nupper = true", "income.upper", "a number"),
    ("lower = 0\nupper = 250000", 'lower = 0\nupper = "250000"', "income.upper", "quotes"),
    ("max_rows_per_unit = 30", "max_rows_per_unit = true", "visits.max_rows_per_unit", "whole"),
    ("max_groups_per_unit = 3", 'max_groups_per_unit = "3"', "visits.max_groups_per_unit", "whole"),
    ("[state]\n", "[state]\nlock_timeout_seconds = nan\n", "state.lock_timeout_seconds", "finite"),
    ("epsilon_default = 1.0", "epsilon_default = 1.0\ndelta = true", "alice.delta", "a number"),
    ("epsilon_per_query_max = 5.0", "epsilon_per_query_max = inf", "alice.epsilon_per_", "finite"),
    ("statement_timeout_seconds = 60", "statement_timeout_seconds = inf", "timeout", "finite"),
    ("answer_cache_seconds = 0", "answer_cache_seconds = false", "answer_cache_seconds", "number"),
    ("[backend]\n", '[backend]\npool_size = "4"\n', "backend.pool_size", "a whole number"),
    ("[server]\n", "[server]\nmax_message_bytes = true\n", "max_message_bytes", "whole number"),
    ("[server]\n", "[server]\nrequire_tls = 1\n", "server.require_tls", "true or false"),
    ("public = true", 'public = "true"', "tables.departments.public", "true or false"),
]


def _with(config: Path, old: str, new: str) -> None:
    text = config.read_text()
    assert old in text, old
    config.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(("old", "new", "key", "words"), WRONG_TYPES)
def test_a_value_of_the_wrong_type_is_refused_with_its_key(
    config: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    old: str,
    new: str,
    key: str,
    words: str,
) -> None:
    _with(config, old, new)
    code, out, err = run(capsys, monkeypatch, "config", "check", str(config))
    assert code == 2 and "valid configuration" not in out, out
    assert f"dpproxy: {config}: invalid configuration:" in err
    lines = err.splitlines()[1:]
    # One line, about the value's type: not a bound or an order the converted value broke.
    assert len(lines) == 1 and key in lines[0] and "expected" in lines[0], err
    assert words in lines[0] and "should be" not in err, err


def test_messages_say_what_was_found_and_what_to_write(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _with(config, "epsilon_total = 200.0", 'epsilon_total = "10"')
    _with(config, "epsilon_total = 3.0", "epsilon_total = true")
    _with(config, "[state]\n", "[state]\nlock_timeout_seconds = nan\n")
    _with(config, "lower = 0\nupper = 250000", "lower = false\nupper = true")
    code, _, err = run(capsys, monkeypatch, "config", "check", str(config))
    assert code == 2 and len(err.splitlines()) == 6, err
    for bound in ("lower", "upper"):
        assert (
            f"  tables.patients.columns.income.{bound}: expected a number (without quotes)" in err
        )
    assert (
        '  analysts.alice.epsilon_total: expected a number (without quotes), got "10" '
        "(a string); write the number without quotes"
    ) in err
    assert (
        "  analysts.bob.epsilon_total: expected a number (without quotes), got true "
        "(a boolean); true and false are not numbers"
    ) in err
    assert (
        "  state.lock_timeout_seconds: expected a finite number, got nan "
        "(nan and inf are not allowed)"
    ) in err


def test_serve_refuses_what_config_check_refuses(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _with(config, "epsilon_total = 3.0", "epsilon_total = true")  # was bob's ε=1
    _, _, checked = run(capsys, monkeypatch, "config", "check", str(config))
    code, _, served = run(capsys, monkeypatch, "serve", "--config", str(config))
    assert code == 2 and served == checked and "analysts.bob.epsilon_total: expected" in served
    assert not (config.parent / "state.sqlite").exists()  # nothing seeded


def test_numbers_written_as_toml_numbers_and_dates_as_strings_still_load(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _with(config, "epsilon_total = 200.0", "epsilon_total = 200")  # an integer ε
    _with(config, "lower = 2020-01-01", 'lower = "2020-01-01"')  # documented: ISO strings
    _with(config, "[state]\n", "[state]\nlock_timeout_seconds = 2.5\n")
    code, out, err = run(capsys, monkeypatch, "config", "check", str(config))
    assert code == 0 and "valid configuration" in out, err


def _kinds(annotation: object) -> set[object]:
    args = get_args(annotation)
    if args and get_origin(annotation) not in (list, dict):
        return set().union(*(_kinds(a) for a in args))
    return {annotation}


#: Where each model's table is in the test configuration (an existing entry).
SECTIONS: list[tuple[type[BaseModel], tuple[str, ...]]] = [
    (ServerSettings, ("server",)),
    (BackendSettings, ("backend",)),
    (StateSettings, ("state",)),
    (AnalystSettings, ("analysts", "alice")),
    (TablePolicy, ("tables", "visits")),
    (ColumnPolicy, ("tables", "visits", "columns", "cost")),
]


def _fields_of_kind(*kinds: type) -> list[tuple[type[BaseModel], tuple[str, ...], str]]:
    return [
        (model, where, field.alias or name)
        for model, where in SECTIONS
        for name, field in model.model_fields.items()
        if _kinds(field.annotation) & set(kinds)
    ]


def _validate_with(config: Path, where: tuple[str, ...], key: str, value: object) -> str:
    raw: dict[str, Any] = tomllib.loads(config.read_text())
    table = raw
    for part in where:
        table = table[part]
    table[key] = value
    with pytest.raises(ValidationError) as caught:
        Settings.model_validate(raw)
    return str(caught.value)


@pytest.mark.parametrize(
    ("model", "where", "key"),
    _fields_of_kind(int, float),
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_every_numeric_setting_refuses_booleans_strings_and_nan(
    config: Path, model: type[BaseModel], where: tuple[str, ...], key: str
) -> None:
    loc = ".".join((*where, key))
    finite = "finite number" if float in _kinds(model.model_fields[key].annotation) else "whole"
    for value, words in [
        (True, "got true (a boolean); true and false are not numbers"),
        ("1", 'got "1" (a string); write the number without quotes'),
        (float("nan"), f"expected a {finite}"),
        (float("-inf"), f"expected a {finite}"),
    ]:
        message = _validate_with(config, where, key, value)
        assert f"{loc}\n  " in message and words in message, message


@pytest.mark.parametrize(
    ("model", "where", "key"),
    _fields_of_kind(bool),
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_every_boolean_setting_refuses_numbers_and_strings(
    config: Path, model: type[BaseModel], where: tuple[str, ...], key: str
) -> None:
    for value in (1, 0, "true", "yes"):
        message = _validate_with(config, where, key, value)
        assert ".".join((*where, key)) in message and "expected true or false" in message


def test_the_numeric_and_boolean_settings_are_all_covered() -> None:
    numeric = {key for _, _, key in _fields_of_kind(int, float)}
    assert {"port", "epsilon_total", "delta", "lower", "upper", "max_rows_per_unit"} <= numeric
    assert {key for _, _, key in _fields_of_kind(bool)} == {"require_tls", "public"}


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        (
            'privacy_unit = "patient_id"\nmax_rows_per_unit = 30',
            'privacy_unit = "patient_id -> nosuch.id"\nmax_rows_per_unit = 30',
            'tables.visits.privacy_unit: "patient_id -> nosuch.id": no table "nosuch" has a '
            "[tables.nosuch] section",
        ),
        (
            'privacy_unit = "patient_id"\nmax_rows_per_unit = 30',
            'privacy_unit = "department -> departments.name"\nmax_rows_per_unit = 30',
            '"departments" is public; the path must reach a protected table',
        ),
        (
            'privacy_unit = "patient_id"\nmax_rows_per_unit = 30',
            'privacy_unit = "patient_id -> visits.patient_id"\nmax_rows_per_unit = 30',
            "the foreign-key paths form a cycle (visits -> visits)",
        ),
        (
            'privacy_unit = "patient_id"\nmax_rows_per_unit = 30',
            'privacy_unit = "   "\nmax_rows_per_unit = 30',
            "tables.visits.privacy_unit: is blank",
        ),
        (
            'privacy_unit = "patient_id"\nmax_rows_per_unit = 30',
            'privacy_unit = "patient_id -> nosuch"\nmax_rows_per_unit = 30',
            '"<column> -> <table>.<column>"',
        ),
        # A path written with another arrow: before, config check passed it (a column of
        # that name) and only serve refused it, for the database has no such column.
        (
            'privacy_unit = "patient_id"\nmax_rows_per_unit = 30',
            'privacy_unit = "patient_id => patients"\nmax_rows_per_unit = 30',
            'tables.visits.privacy_unit: "patient_id => patients" is neither a column name nor '
            'a foreign-key path of the form "<column> -> <table>.<column>" (written with ->',
        ),
        (
            'privacy_unit = "patient_id"\nmax_rows_per_unit = 30',
            'privacy_unit = "patient_id → patients.patient_id"\nmax_rows_per_unit = 30',
            "is neither a column name nor a foreign-key path",
        ),
    ],
)
def test_config_check_refuses_a_privacy_unit_path_serve_refuses(
    config: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    old: str,
    new: str,
    words: str,
) -> None:
    _with(config, old, new)
    code, out, checked = run(capsys, monkeypatch, "config", "check", str(config))
    assert code == 2 and "valid configuration" not in out and words in checked, checked
    code, _, served = run(capsys, monkeypatch, "serve", "--config", str(config))
    assert code == 2 and served == checked  # one validation, the same message
    assert not (config.parent / "state.sqlite").exists()


def test_a_cycle_through_two_tables_is_reported_once(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _with(
        config,
        'privacy_unit = "patient_id"\nmax_rows_per_unit = 1',
        'privacy_unit = "patient_id -> visits.patient_id"\nmax_rows_per_unit = 1',
    )
    _with(
        config,
        'privacy_unit = "patient_id"\nmax_rows_per_unit = 30',
        'privacy_unit = "patient_id -> patients.patient_id"\nmax_rows_per_unit = 30',
    )
    code, _, err = run(capsys, monkeypatch, "config", "check", str(config))
    assert code == 2 and err.count("form a cycle") == 1, err
    assert "(patients -> visits -> patients)" in err


@pytest.mark.parametrize(
    "path",
    [
        "patient_id -> patients.patient_id",
        # The spaces are optional, as docs/configuration.md says: the same path.
        "patient_id->patients.patient_id",
        " patient_id ->patients . patient_id ",
    ],
)
def test_a_valid_privacy_unit_path_passes(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    _with(
        config,
        'privacy_unit = "patient_id"\nmax_rows_per_unit = 30',
        f'privacy_unit = "{path}"\nmax_rows_per_unit = 30',
    )
    code, out, err = run(capsys, monkeypatch, "config", "check", str(config))
    assert code == 0 and "valid configuration" in out, err
    visits = load_settings(config).tables["visits"]
    assert visits.unit_link == ("patient_id", "patients", "patient_id")


def test_the_documented_privacy_unit_forms_are_the_accepted_ones() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    row = next(line for line in doc.splitlines() if line.startswith("| `privacy_unit` |"))
    assert "the spaces around it and around the dot are optional" in row
    assert '`"purchase_id => purchases"`' in row


def test_demo_schema_without_postgres_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "demo"
    for schema in (("--schema", "clinic"), ("--schema=public",)):
        code, out, err = run(
            capsys, monkeypatch, "demo", "--dir", str(directory), *schema, "--no-serve"
        )
        assert code == 2 and not out, err
        assert "applies only with --postgres DSN" in err and "leave --schema out" in err
    assert not directory.exists()  # refused before anything was written
