"""Running ``dpproxy`` in-process for the admin tests: its exit status and output."""

from __future__ import annotations

import io

import pytest

from proxy.cli import main


def run(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    *args: str,
    stdin: str = "",
) -> tuple[int, str, str]:
    """The exit status, stdout and stderr of ``dpproxy ARGS``; argparse's errors included."""
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    try:
        code = main(list(args))
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err
