"""Bad input to the admin commands and the configuration: a clear error that names the
rule, exit status 2 for a bad command line or configuration, and nothing changed."""

from __future__ import annotations

import argparse
import json
import re
import tomllib
from pathlib import Path

import pytest

from accountant import AdminChange, AnalystBudget, Decision, Epsilon, StateStore
from accountant.analysts import InvalidAnalystName
from proxy.cli import build_parser, main
from proxy.demo import toml_escape
from tests.admin.cli import run

ROOT = Path(__file__).resolve().parents[2]
ADMIN_DOC = (ROOT / "docs" / "admin.md").read_text()
README = (ROOT / "README.md").read_text()
NAME_RULE = "an analyst name is 1 to 63 bytes of UTF-8"
SMALLEST = "below the smallest ε dpproxy keeps, 0.000000001 (1e-9)"


def analysts(config: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, str]]:
    code = main(["analyst", "list", "--json", "--config", str(config)])
    out = capsys.readouterr().out
    assert code == 0
    return {row["analyst"]: row for row in json.loads(out)}


def audit_count(config: Path) -> int:
    with StateStore.open(config.parent / "state.sqlite") as store:
        return len(store.audit_records())


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "the name is empty"),
        ("*", "'*' is reserved"),
        ("a\tb", "contains a control character"),
        ("bob\n", "contains a control character"),
        ("x" * 5000, "is 5000 bytes long"),
        ("é" * 32, "is 64 bytes long"),  # 32 characters, but PostgreSQL counts bytes
        (" carol", "starts or ends with a space"),
    ],
)
def test_analyst_add_refuses_names_no_client_can_use(
    config: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    why: str,
) -> None:
    c = ("--config", str(config))
    before = analysts(config, capsys)
    records = audit_count(config)
    code, out, err = run(
        capsys, monkeypatch, "analyst", "add", name, "--epsilon-total", "1", *c, stdin="pw\n"
    )
    assert code == 2, err
    assert why in err and NAME_RULE in err and '"*"' in err
    assert "Traceback" not in err and "x" * 41 not in err  # a 5000-character name is cut
    assert analysts(config, capsys) == before and audit_count(config) == records


def test_the_longest_name_postgresql_allows_is_accepted(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    name = "é" * 31 + "x"  # 63 bytes
    code, _, err = run(
        capsys,
        monkeypatch,
        *("analyst", "add", name, "--epsilon-total", "1", "--config", str(config)),
        stdin="pw\n",
    )
    assert code == 0, err
    assert name in analysts(config, capsys)


def test_the_state_store_refuses_bad_names_too(tmp_path: Path) -> None:
    budget = AnalystBudget(total=Epsilon(1), default_per_query=Epsilon(1))
    change = AdminChange("root@host", "test")
    with StateStore.open(tmp_path / "state.sqlite") as store:
        with pytest.raises(InvalidAnalystName, match="reserved"):
            store.add_analyst("*", "v", budget, change)
        with pytest.raises(InvalidAnalystName, match="empty"):
            store.seed_analysts({"": ("v", budget), "ok": ("v", budget)}, change)
        assert store.analysts() == []


@pytest.mark.parametrize("name", ['"*"', '""', '"a\\u0007b"', '"' + "n" * 64 + '"'])
def test_configured_analyst_names_follow_the_same_rule(
    config: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    name: str,
) -> None:
    config.write_text(config.read_text().replace("[analysts.bob]", f"[analysts.{name}]"))
    code, _, err = run(capsys, monkeypatch, "config", "check", str(config))
    assert code == 2 and str(config) in err and NAME_RULE in err and "Traceback" not in err
    code, _, err = run(capsys, monkeypatch, "analyst", "list", "--config", str(config))
    assert code == 2 and NAME_RULE in err
    assert not (config.parent / "state.sqlite").exists()  # nothing seeded


@pytest.mark.parametrize(
    "command",
    [
        ("analyst", "add", "carol", "--epsilon-total", "1"),
        ("analyst", "passwd", "bob"),
        ("passwd",),
    ],
)
def test_a_password_with_a_nul_character_is_refused(
    config: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    command: tuple[str, ...],
) -> None:
    c = () if command == ("passwd",) else ("--config", str(config))
    if c:
        analysts(config, capsys)  # seeds alice and bob
    records = audit_count(config) if c else 0
    code, out, err = run(capsys, monkeypatch, *command, *c, stdin="pass\x00word\n")
    assert code == 1 and "NUL character" in err and "no PostgreSQL client" in err
    assert "SCRAM" not in out
    if c:
        assert "carol" not in analysts(config, capsys) and audit_count(config) == records


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("analyst", "add", "carol", "--epsilon-total", "1e-10"), "--epsilon-total"),
        (
            ("analyst", "add", "carol", "--epsilon-total", "1", "--epsilon-default", "1e-10"),
            "--epsilon-default",
        ),
        (("budget", "set", "bob", "--epsilon-total", "0.0000000001"), "--epsilon-total"),
        (("budget", "set", "bob", "--epsilon-per-query-max", "1e-10"), "--epsilon-per-query-max"),
        (("budget", "grant", "bob", "1e-10"), "EPS"),
        (("budget", "global", "--epsilon-total", "1e-10"), "--epsilon-total"),
    ],
)
def test_an_epsilon_below_the_smallest_is_refused_not_rounded_up(
    config: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
    flag: str,
) -> None:
    c = ("--config", str(config))
    before = analysts(config, capsys)
    records = audit_count(config)
    code, _, err = run(capsys, monkeypatch, *args, *c, stdin="pw\n")
    assert code == 2 and SMALLEST in err and f"argument {flag}" in err
    assert analysts(config, capsys) == before and audit_count(config) == records


def test_an_epsilon_with_more_than_nine_decimals_is_refused(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    c = ("--config", str(config))
    code, _, err = run(
        capsys, monkeypatch, "budget", "set", "bob", "--epsilon-total", "3.0000000001", *c
    )
    assert code == 2 and "more than 9 decimals" in err and "e.g. 3" in err
    assert analysts(config, capsys)["bob"]["total"] == "3"
    code, _, err = run(capsys, monkeypatch, "budget", "set", "bob", "--epsilon-total", "2.5", *c)
    assert code == 0, err  # nine decimals or fewer: exact


@pytest.mark.parametrize(
    "args", [("budget", "set", "bob"), ("budget", "global", "--epsilon-total", "5")]
)
def test_a_delta_below_the_ledgers_unit_is_refused(
    config: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
) -> None:
    c = ("--config", str(config))
    for tiny in ("1e-16", "1e-400"):  # 1e-400 is 0.0 as a float: Gaussian ε would be infinite
        code, _, err = run(capsys, monkeypatch, *args, "--delta", tiny, *c)
        assert code == 2 and "below the smallest δ dpproxy accounts, 1e-15" in err
    code, out, _ = run(capsys, monkeypatch, "budget", "global", *c)
    assert "no global budget" in out and analysts(config, capsys)["bob"]["delta"] == "1e-6"


def test_configured_amounts_follow_the_same_rule(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    text = config.read_text()
    for old, new, words in [
        ("epsilon_total = 3.0", "epsilon_total = 1e-10", "analysts.bob: epsilon_total = 1e-10"),
        ("epsilon_default = 0.5", "epsilon_default = 0.1234567891", "more than 9 decimals"),
        ("epsilon_default = 0.5", "epsilon_default = 0.5\ndelta = 1e-20", "1e-15"),
    ]:
        config.write_text(text.replace(old, new, 1))
        code, _, err = run(capsys, monkeypatch, "config", "check", str(config))
        assert code == 2 and words in err, err


def test_budget_global_refuses_a_delta_it_would_ignore(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    c = ("--config", str(config))
    for extra in ((), ("--none",)):
        code, out, err = run(capsys, monkeypatch, "budget", "global", "--delta", "1e-7", *extra, *c)
        assert code == 2 and "--delta" in err and "--epsilon-total" in err, err
        assert "nothing was changed" in err and out == ""
    code, out, _ = run(capsys, monkeypatch, "budget", "global", *c)
    assert "no global budget" in out
    code, out, _ = run(
        capsys, monkeypatch, "budget", "global", "--epsilon-total", "5", "--delta", "1e-7", *c
    )
    assert code == 0 and "ε=5 at δ=1e-7" in out


def test_analyst_add_shows_the_cap_analyst_list_shows(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    c = ("--config", str(config))
    code, out, err = run(
        capsys, monkeypatch, "analyst", "add", "carol", "--epsilon-total", "2", *c, stdin="pw\n"
    )
    assert code == 0, err
    assert "max per query 2 (the total)" in out and "none" not in out
    assert analysts(config, capsys)["carol"]["per_query_max"] == "2"
    code, out, _ = run(capsys, monkeypatch, "budget", "set", "carol", "--epsilon-total", "4", *c)
    assert "to total 4, default per query 1, max per query 4 (the total)" in out
    code, out, _ = run(
        capsys, monkeypatch, "budget", "set", "carol", "--epsilon-per-query-max", "3", *c
    )
    assert re.search(r"to total 4, default per query 1, max per query 3 \(audit record", out)


def test_config_check_warns_about_missing_tls_files(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config.write_text(
        config.read_text().replace(
            "[server]\n", '[server]\ntls_cert = "cert.pem"\ntls_key = "key.pem"\n', 1
        )
    )
    code, out, err = run(capsys, monkeypatch, "config", "check", str(config))
    assert code == 0, err
    cert = config.parent / "cert.pem"
    assert f"warning: [server] tls_cert: {cert} does not exist or is not a file" in out
    assert "`dpproxy serve` refuses to start" in out
    cert.write_text("not a certificate")
    (config.parent / "key.pem").write_text("not a key")
    code, out, _ = run(capsys, monkeypatch, "config", "check", str(config))
    assert code == 0 and "cannot be used together" in out


def test_config_check_warns_about_an_unresolvable_host(
    config: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config.write_text(
        config.read_text().replace('host = "127.0.0.1"', 'host = "nonexistent.invalid"')
    )
    code, out, _ = run(capsys, monkeypatch, "config", "check", str(config))
    assert code == 0
    assert "warning: [server] host nonexistent.invalid is not an address" in out


@pytest.mark.parametrize(
    ("host", "words"),
    [
        ("a\\u0000b", "server.host: contains a control character"),
        ("a..b", "server.host: a..b is not a valid host name"),
        ("x" * 64 + ".example", "each dot-separated part is 1 to 63 characters"),
    ],
)
def test_a_host_that_cannot_be_a_name_is_a_config_error(
    config: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    host: str,
    words: str,
) -> None:
    config.write_text(config.read_text().replace('host = "127.0.0.1"', f'host = "{host}"'))
    code, _, err = run(capsys, monkeypatch, "config", "check", str(config))
    assert code == 2 and words in err, err


def test_non_utf8_config_names_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe[server]\n")
    for args in (("config", "check", str(binary)), ("budget", "show", "--config", str(binary))):
        code, _, err = run(capsys, monkeypatch, *args)
        assert code == 2 and f"{binary}: not a UTF-8 text file" in err and "save it as UTF-8" in err
    assert binary.read_bytes() == b"\xff\xfe[server]\n"


@pytest.mark.parametrize("value", ['a"b', "back\\slash", "tab\there", "new\nline", "del\x7f", "é"])
def test_demo_values_are_written_as_valid_toml(value: str) -> None:
    assert tomllib.loads(f'key = "{toml_escape(value)}"') == {"key": value}


# -- the documentation names every option and decision ---------------------------------


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    """``{"budget set": parser, "serve": parser, ...}`` for every dpproxy command."""
    parser = build_parser()
    top = next(a for a in parser._actions if a.dest == "command")
    found: dict[str, argparse.ArgumentParser] = {}
    for name, sub in top.choices.items():  # type: ignore[union-attr]
        nested = [a for a in sub._actions if a.dest.endswith("_command")]
        if nested:
            for action, leaf in nested[0].choices.items():
                found[f"{name} {action}"] = leaf
        else:
            found[name] = sub
    return found


#: Options every command takes, documented once (test_the_options_of_every_command_...).
EVERY_COMMAND = ("--help", "--config", "--log-level")


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return [
        option
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--") and option not in EVERY_COMMAND
    ]


def _lines_naming(text: str, command: str) -> str:
    return "\n".join(line for line in text.splitlines() if f"`dpproxy {command}" in line)


def test_every_admin_option_is_in_admin_md() -> None:
    """Each admin command's options appear where admin.md names the command (or, for
    ``[filters]``, in the paragraph on filters)."""
    filters = ADMIN_DOC[ADMIN_DOC.index("Filters: ") :].split("\n\n")[0]
    for command, parser in _subcommands().items():
        if command in ("serve", "demo", "passwd"):
            continue
        text = _lines_naming(ADMIN_DOC, command)
        assert text, f"docs/admin.md does not name `dpproxy {command}`"
        if "[filters]" in text:
            text += filters
        for option in _options(parser):
            assert re.search(rf"{re.escape(option)}\b", text), (
                f"docs/admin.md does not document `dpproxy {command} {option}`"
            )


def test_every_serve_demo_and_passwd_option_is_in_the_readme() -> None:
    for command in ("serve", "demo", "passwd"):
        text = _lines_naming(README, command)
        for option in _options(_subcommands()[command]):
            assert re.search(rf"{re.escape(option)}\b", text), f"README lacks {command} {option}"


def test_every_option_of_every_command_is_in_the_readme_command_table() -> None:
    """The README's command table lists each command with all the options its --help
    shows, as docs/admin.md does: neither may fall behind the other or the parser."""
    table = README[README.index("| command | what it does |") :].split("\n\n")[0]
    for command, parser in _subcommands().items():
        text = _lines_naming(table, command)
        assert text, f"the README's command table does not name `dpproxy {command}`"
        for option in _options(parser):
            assert re.search(rf"{re.escape(option)}\b", text), (
                f"the README's command table lacks `dpproxy {command} {option}`"
            )


def test_the_options_of_every_command_and_of_dpproxy_itself_are_documented() -> None:
    """--log-level (before or after the command) and --version: in the README's command
    table, admin.md's introduction and operations.md; every command takes --log-level."""
    operations = (ROOT / "docs" / "operations.md").read_text()
    table = README[README.index("| command | what it does |") :].split("\n\n")[0]
    intro = ADMIN_DOC.split("\n## ")[0]
    top = build_parser()
    for option in ("--log-level", "--version"):
        assert option in [o for a in top._actions for o in a.option_strings]
        for name, text in (("README", table), ("admin.md", intro), ("operations.md", operations)):
            assert f"dpproxy {option}" in text, f"{name} does not document dpproxy {option}"
    assert "after the command" in intro and "after the command" in table
    for command, parser in _subcommands().items():
        taken = [o for a in parser._actions for o in a.option_strings]
        assert "--log-level" in taken, f"`dpproxy {command}` does not take --log-level"


@pytest.mark.parametrize(
    "argv",
    [
        ["serve", "--log-level", "debug"],
        ["--log-level", "debug", "serve"],
        ["demo", "--no-serve", "--log-level", "debug"],
        ["budget", "show", "--log-level", "debug"],
        ["--log-level", "error", "audit", "list", "--log-level", "debug"],
    ],
)
def test_log_level_is_accepted_before_and_after_the_command(argv: list[str]) -> None:
    assert build_parser().parse_args(argv).log_level == "debug"


def test_log_level_before_the_command_is_kept_when_not_given_after() -> None:
    assert build_parser().parse_args(["--log-level", "error", "serve"]).log_level == "error"
    assert build_parser().parse_args(["serve"]).log_level == "info"


def test_the_readme_names_the_commands_without_config() -> None:
    without = sorted(
        command
        for command, parser in _subcommands().items()
        if "--config" not in [o for a in parser._actions for o in a.option_strings]
    )
    assert without == ["demo", "passwd"]
    sentence = README[README.index("## Commands") :].split("\n\n")[1]
    assert all(f"`{command}`" in sentence for command in without), sentence


def test_every_decision_is_in_the_decision_table() -> None:
    table = ADMIN_DOC[ADMIN_DOC.index("| decision | charged | meaning |") :].split("\n\n")[0]
    for decision in Decision:
        assert f"| `{decision.value}` |" in table, f"decision {decision.value} undocumented"
