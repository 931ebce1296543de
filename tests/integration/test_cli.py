"""The `dpproxy` command as an admin and a new user run it."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from proxy.protocol.scram import ScramExchange
from tests.integration.server import PSQL, dpproxy

pytestmark = pytest.mark.integration


def test_help_for_every_command() -> None:
    for args in (
        ["--help"],
        ["serve", "--help"],
        ["demo", "--help"],
        ["budget", "show", "--help"],
        ["audit", "list", "--help"],
        ["audit", "verify", "--help"],
        ["passwd", "--help"],
    ):
        result = dpproxy(*args)
        assert result.returncode == 0 and "usage: dpproxy" in result.stdout, args


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["demo", "--port", "70000"], "port must be between 0 and 65535"),
        (["demo", "--patients", "zero"], "expected a whole number"),
        (["audit", "list", "--limit", "0"], "expected a positive number"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_arguments_say_what_to_do(args: list[str], words: str) -> None:
    result = dpproxy(*args)
    assert result.returncode == 2 and words in result.stderr


def test_missing_config_is_explained(tmp_path: Path) -> None:
    result = dpproxy("budget", "show", "--config", str(tmp_path / "none.toml"))
    assert result.returncode == 2
    assert "no such configuration file" in result.stderr and "dpproxy demo" in result.stderr


def test_a_port_in_use_is_explained(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = dpproxy(
            "demo", "--dir", str(tmp_path / "demo"), "--patients", "50", "--port", str(port)
        )
    assert result.returncode == 2, result.stderr
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in result.stderr
    assert "Traceback" not in result.stderr


def test_passwd_reads_stdin_and_prints_a_verifier() -> None:
    result = dpproxy("passwd", stdin="s3cret\n")
    assert result.returncode == 0
    verifier = result.stdout.strip()
    assert verifier.startswith("SCRAM-SHA-256$4096:") and "s3cret" not in verifier
    ScramExchange(verifier)  # parses
    assert dpproxy("passwd", stdin="\n").returncode == 1


def test_demo_as_a_new_user_runs_it(tmp_path: Path) -> None:
    """`dpproxy demo` prints URLs; psql connects with them; the admin sees the audit log."""
    directory = tmp_path / "demo"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "proxy.cli",
            "demo",
            "--dir",
            str(directory),
            "--port",
            "0",
            "--patients",
            "500",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        banner: list[str] = []
        deadline = time.monotonic() + 60
        while not banner or not banner[-1].startswith("Stop with Ctrl-C"):
            line = process.stdout.readline()
            assert line or process.poll() is None, process.stderr.read() if process.stderr else ""
            assert time.monotonic() < deadline
            banner.append(line.rstrip("\n"))
        urls = [w.strip('"') for line in banner for w in line.split() if "postgresql://" in w]
        assert [u.split("://")[1].split(":")[0] for u in urls] == ["alice", "bob"]
        env = {**os.environ, "PGCONNECT_TIMEOUT": "10"}
        result = subprocess.run(
            [
                PSQL,
                "-X",
                urls[0],
                "-c",
                "SELECT COUNT(*) FROM visits",
                "-c",
                "SELECT * FROM visits",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )
        assert "(1 row)" in result.stdout
        assert "NOTICE:  dpproxy: this answer cost ε=1; alice has ε=9 left of ε=10" in result.stderr
        assert "ERROR:  SELECT * would return individual rows" in result.stderr
        config = str(directory / "dpproxy.toml")
        listing = dpproxy("audit", "list", "--config", config, "--json")
        records = [json.loads(line) for line in listing.stdout.splitlines()]
        decisions = [r["decision"] for r in records if r["decision"] != "admin"]
        assert decisions == ["accepted", "rejected"]
        budget = json.loads(dpproxy("budget", "show", "alice", "--json", "--config", config).stdout)
        assert budget == [
            {
                "analyst": "alice",
                "total": "10",
                "spent": "1",
                "remaining": "9",
                "per_query_default": "1",
                "per_query_max": "5",
                "delta": "1e-6",
                "delta_spent": "0",
                "delta_remaining": "1e-6",
            }
        ]
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=15)
    assert process.returncode == 0
    # The audit log is tamper-evident.
    config = str(directory / "dpproxy.toml")
    assert dpproxy("audit", "verify", "--config", config).returncode == 0
    with sqlite3.connect(directory / "state.sqlite") as conn:
        conn.execute("DROP TRIGGER IF EXISTS audit_log_no_update")
        triggers = [
            r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        ]
        for name in triggers:
            conn.execute(f"DROP TRIGGER {name}")
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        audit_table = next(t for t in tables if "audit" in t and "head" not in t)
        conn.execute(f"UPDATE {audit_table} SET sql = 'SELECT 1' WHERE id = 1")
    verify = dpproxy("audit", "verify", "--config", config)
    assert verify.returncode == 1 and "BROKEN at record 1" in verify.stdout


@pytest.fixture(scope="module")
def small_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("cli") / "demo"
    result = dpproxy("demo", "--dir", str(directory), "--patients", "50", "--no-serve")
    assert result.returncode == 0, result.stderr
    return directory / "dpproxy.toml"


@pytest.mark.parametrize("host", ["nonexistent.invalid", "999.1.1.1"])
def test_serve_on_a_host_that_does_not_resolve_is_explained(small_demo: Path, host: str) -> None:
    result = dpproxy("serve", "--config", str(small_demo), "--host", host, "--port", "0")
    assert result.returncode == 2, result.stderr
    assert f"dpproxy: cannot listen on {host}" in result.stderr
    assert "Traceback" not in result.stderr and "Unknown error" not in result.stderr


def test_serve_on_a_host_that_cannot_be_a_name_is_explained(small_demo: Path) -> None:
    host = "a" * 64 + ".example"  # a part over 63 characters: the resolver never sees it
    result = dpproxy("serve", "--config", str(small_demo), "--host", host, "--port", "0")
    assert result.returncode == 2, result.stderr
    assert f"dpproxy: --host {host} is not a valid host name" in result.stderr
    assert "1 to 63 characters" in result.stderr and "Traceback" not in result.stderr


def test_demo_on_a_host_that_does_not_resolve_writes_nothing(tmp_path: Path) -> None:
    directory = tmp_path / "demo"
    result = dpproxy("demo", "--dir", str(directory), "--host", "nonexistent.invalid")
    assert result.returncode == 2, result.stderr
    assert "--host nonexistent.invalid is not an address" in result.stderr
    assert "0.0.0.0" in result.stderr and "Traceback" not in result.stderr
    assert not directory.exists()  # no demo with an unusable host in its configuration


def test_a_demo_dir_that_cannot_be_a_directory_is_explained(tmp_path: Path) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("keep me")
    for directory, words in [
        (a_file, "is a file, not a directory"),
        (a_file / "demo", "cannot create it: Not a directory"),
        (Path("/proc/forbidden"), "cannot create it"),
    ]:
        result = dpproxy("demo", "--dir", str(directory), "--patients", "50", "--no-serve")
        assert result.returncode == 2, result.stderr
        assert f"dpproxy: --dir {directory}: {words}" in result.stderr
        assert "--dir dpproxy-demo" in result.stderr and "Traceback" not in result.stderr
    assert a_file.read_text() == "keep me"


def test_a_config_that_is_not_utf8_is_explained(tmp_path: Path) -> None:
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe[server]\n")
    for args in (["config", "check", str(binary)], ["serve", "--config", str(binary)]):
        result = dpproxy(*args)
        assert result.returncode == 2, result.stderr
        assert f"dpproxy: {binary}: not a UTF-8 text file" in result.stderr
        assert "Traceback" not in result.stderr and len(result.stderr.splitlines()) == 1


def test_bad_analysts_and_passwords_are_refused(small_demo: Path) -> None:
    config = ("--config", str(small_demo))
    for name in ("*", "", "x" * 64):
        result = dpproxy("analyst", "add", name, "--epsilon-total", "1", *config, stdin="pw\n")
        assert result.returncode == 2 and "1 to 63 bytes" in result.stderr, result.stderr
    result = dpproxy("passwd", stdin="pass\x00word\n")
    assert result.returncode == 1 and "NUL character" in result.stderr and not result.stdout
    names = [r["analyst"] for r in json.loads(dpproxy("analyst", "list", "--json", *config).stdout)]
    assert names == ["alice", "bob"]


def test_demo_never_deletes_a_database_that_is_not_its_own(tmp_path: Path) -> None:
    directory = tmp_path / "demo"
    directory.mkdir()
    with duckdb.connect(str(directory / "demo.duckdb")) as conn:
        conn.execute("CREATE TABLE mine (x INTEGER)")
        conn.execute("INSERT INTO mine VALUES (42)")
    result = dpproxy("demo", "--dir", str(directory), "--patients", "50", "--no-serve")
    assert result.returncode == 2, result.stderr
    assert "demo.duckdb exists but is not a dpproxy demo database" in result.stderr
    with duckdb.connect(str(directory / "demo.duckdb"), read_only=True) as conn:
        assert conn.execute("SELECT x FROM mine").fetchall() == [(42,)]
    # A demo interrupted before its configuration was written is made again.
    (directory / "demo.duckdb").unlink()
    assert (
        dpproxy("demo", "--dir", str(directory), "--patients", "50", "--no-serve").returncode == 0
    )
    (directory / "dpproxy.toml").unlink()
    again = dpproxy("demo", "--dir", str(directory), "--patients", "50", "--no-serve")
    assert again.returncode == 0 and (directory / "dpproxy.toml").exists()


def test_a_failed_start_leaves_nothing_behind(tmp_path: Path) -> None:
    """`serve` checks that it can listen before it opens (seeds, audits) the state store."""
    directory = tmp_path / "demo"
    created = dpproxy("demo", "--dir", str(directory), "--patients", "50", "--no-serve")
    assert created.returncode == 0, created.stderr
    config = directory / "dpproxy.toml"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        for args, words in [
            (("--host", "999.1.1.1", "--port", "0"), "cannot listen on 999.1.1.1: "),
            (("--port", port), f"cannot listen on 127.0.0.1:{port}: Address already in use"),
            (("--host", "192.0.2.1", "--port", "0"), "192.0.2.1 is not an address of this"),
        ]:
            result = dpproxy("serve", "--config", str(config), *args)
            assert result.returncode == 2 and words in result.stderr, result.stderr
            assert "0.0.0.0" in result.stderr or "another port" in result.stderr
            assert "Traceback" not in result.stderr
            assert sorted(p.name for p in directory.iterdir()) == ["demo.duckdb", "dpproxy.toml"]
    # The same for a host from the configuration file.
    config.write_text(config.read_text().replace('host = "127.0.0.1"', 'host = "999.1.1.1"'))
    result = dpproxy("serve", "--config", str(config))
    assert result.returncode == 2 and "cannot listen on 999.1.1.1: " in result.stderr
    assert "([server] host and port, or --host/--port)" in result.stderr
    assert sorted(p.name for p in directory.iterdir()) == ["demo.duckdb", "dpproxy.toml"]


def test_demo_on_a_port_in_use_writes_nothing(tmp_path: Path) -> None:
    directory = tmp_path / "demo"
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = dpproxy("demo", "--dir", str(directory), "--port", str(port))
    assert result.returncode == 2, result.stderr
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use" in result.stderr
    assert "(--host and --port)" in result.stderr and not directory.exists()


@pytest.mark.postgres
def test_demo_on_postgres_says_what_it_serves(tmp_path: Path, pg_dsn: str, pg_schema: str) -> None:
    """The banner names the PostgreSQL database and schema (never the password), not a
    DuckDB file the demo did not write."""
    dsn = make_conninfo(pg_dsn, password="not-for-the-banner")  # trust authentication
    parts = conninfo_to_dict(dsn)
    directory = tmp_path / "demo"
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "demo", "--dir", str(directory), "--port", "0"]
        + ["--patients", "50", "--postgres", dsn, "--schema", pg_schema],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first, process.stderr.read() if process.stderr else ""
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=15)
    assert first.startswith("dpproxy demo is serving PostgreSQL postgresql://"), first
    assert f"{parts.get('host') or 'localhost'}" in first and f"(schema {pg_schema}) on " in first
    assert "demo.duckdb" not in first and "not-for-the-banner" not in first
    assert not (directory / "demo.duckdb").exists()
