"""Commands whose output goes to a pipe whose reader stops early (`dpproxy audit list |
head -1`, `| true`) end quietly as other Unix tools do: exit status 141 (as if ended by
SIGPIPE), nothing on stderr, no traceback. Run as a user runs them: the real command in a
subprocess whose standard output is a pipe already closed by its reader."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from proxy.admin.common import EXIT_READER_GONE
from tests.integration.server import dpproxy, write_config

COMMANDS = [
    ("audit", "list"),
    ("audit", "list", "--format", "csv"),
    ("audit", "show", "1"),
    ("audit", "verify"),
    ("audit", "export"),
    ("analyst", "list"),
    ("analyst", "list", "--json"),
    ("budget", "show"),
    ("budget", "show", "alice"),
    ("budget", "global"),
    ("config", "check"),
    ("config", "schema"),
]


def _to_a_closed_pipe(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[bytes]:
    """``dpproxy ARGS`` with its standard output a pipe whose reader has gone."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        return subprocess.run(
            [sys.executable, "-m", "proxy.cli", *args],
            stdout=writer,
            stderr=subprocess.PIPE,
            input=None if stdin is None else stdin.encode(),
            timeout=60,
            check=False,
        )
    finally:
        os.close(writer)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = write_config(tmp_path_factory.mktemp("pipes"), backend="")
    shown = dpproxy("budget", "show", "--config", str(config))  # seeds: audit records 1, 2
    assert shown.returncode == 0, shown.stderr
    return config


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_a_reader_that_leaves_ends_the_command_quietly(
    seeded: Path, command: tuple[str, ...]
) -> None:
    result = _to_a_closed_pipe(*command, "--config", str(seeded))
    assert result.stderr == b""  # before: a BrokenPipeError traceback
    assert result.returncode == EXIT_READER_GONE == 141


def test_passwd_to_a_closed_pipe_ends_quietly() -> None:
    result = _to_a_closed_pipe("passwd", stdin="secret\n")
    assert (result.returncode, result.stderr) == (EXIT_READER_GONE, b"")


def test_a_reader_that_reads_everything_gets_everything(seeded: Path) -> None:
    result = dpproxy("audit", "list", "--json", "--config", str(seeded))
    assert result.returncode == 0 and len(result.stdout.splitlines()) == 2, result.stderr
