"""Start a real `dpproxy serve` process on a free port and talk to it as users do."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb
import psycopg
import pytest

from proxy import cli
from proxy.demo import ANALYST_TEMPLATE, CONFIG_TEMPLATE
from proxy.demo_data import DemoSize, generate, load_postgres, write_duckdb
from proxy.protocol.scram import make_verifier

PSQL = shutil.which("psql") or "/usr/bin/psql"
#: A psycopg connection whose rows are tuples.
Connection = psycopg.Connection[tuple[object, ...]]
PASSWORDS = {"alice": "alice-pw", "bob": "bob-pw"}
# alice can ask many questions; bob's budget runs out after six queries of ε=0.5.
BUDGETS = {"alice": (200.0, 1.0, 5.0), "bob": (3.0, 0.5, 1.0)}


def write_config(
    directory: Path, *, backend: str, lock_timeout_seconds: float | None = None
) -> Path:
    analysts = "\n".join(
        ANALYST_TEMPLATE.format(
            name=name, verifier=make_verifier(PASSWORDS[name]), total=t, default=d, cap=c
        )
        for name, (t, d, c) in BUDGETS.items()
    )
    text = CONFIG_TEMPLATE.format(
        host="127.0.0.1",
        port=0,
        database="demo.duckdb",
        state="state.sqlite",
        analysts=analysts,
    )
    text = text.replace('engine = "duckdb"', backend, 1) if backend else text
    # These tests count charges of repeated queries: no answer cache (tests/proxy covers it).
    text = text.replace("[backend]\n", "[backend]\nanswer_cache_seconds = 0\n", 1)
    if lock_timeout_seconds is not None:  # tests of a locked store wait less than 30 s
        timeout = f"lock_timeout_seconds = {lock_timeout_seconds}\n"
        text = text.replace("[state]\n", "[state]\n" + timeout, 1)
    path = directory / "dpproxy.toml"
    path.write_text(text)
    return path


def dpproxy(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proxy.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def dpproxy_in_process(*args: str) -> subprocess.CompletedProcess[str]:
    """What ``dpproxy(*args)`` gives, from the same CLI code run in this process: a second
    faster (no interpreter to start and no modules to import), for tests that ask the
    admin commands many times; ``dpproxy`` is what a user runs. No stdin."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(args))
    return subprocess.CompletedProcess(["dpproxy", *args], code, out.getvalue(), err.getvalue())


@dataclass
class RunningServer:
    process: subprocess.Popen[str]
    port: int
    config: Path

    def dsn(self, user: str, password: str | None = None) -> str:
        secret = PASSWORDS[user] if password is None else password
        return f"postgresql://{user}:{secret}@127.0.0.1:{self.port}/demo"

    def psql(self, user: str, *commands: str) -> subprocess.CompletedProcess[str]:
        args = [PSQL, "-X", "-v", "ON_ERROR_STOP=1", self.dsn(user)]
        for command in commands:
            args += ["-c", command]
        env = {**os.environ, "PGCONNECT_TIMEOUT": "10"}
        return subprocess.run(
            args, capture_output=True, text=True, timeout=60, env=env, check=False
        )

    def stop(self) -> str:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.stderr.read() if self.process.stderr else ""


def start(config: Path) -> RunningServer:
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "serve", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    assert process.stdout is not None
    line = process.stdout.readline()
    while "listening on" not in line:
        if process.poll() is not None or time.monotonic() > deadline:
            error = process.stderr.read() if process.stderr else ""
            raise RuntimeError(f"dpproxy did not start: {line}{error}")
        line = process.stdout.readline()
    port = int(line.strip().rsplit(":", 1)[1])
    return RunningServer(process, port, config)


def demo_database(directory: Path, patients: int) -> Path:
    """A demo DuckDB file of ``patients`` patients in ``directory``."""
    path = directory / "demo.duckdb"
    write_duckdb(generate(DemoSize(patients=patients)), path)
    return path


@contextmanager
def demo_server(
    engine: str,
    database: Path,
    directory: Path,
    *,
    pg_dsn: str | None,
    patients: int,
    lock_timeout_seconds: float | None = None,
) -> Iterator[RunningServer]:
    """`dpproxy serve` over the demo data on DuckDB (``database``) or PostgreSQL (loaded
    into a schema of its own, dropped afterwards); fails if the server logged a traceback."""
    (directory / "demo.duckdb").symlink_to(database)
    backend, schema = "", f"dpproxy_it_{uuid.uuid4().hex[:10]}"
    if engine == "postgres":
        if pg_dsn is None:
            raise ValueError("the postgres engine needs a DSN")
        load_postgres(generate(DemoSize(patients=patients)), pg_dsn, schema=schema)
        backend = f'engine = "postgres"\ndsn = "{pg_dsn}"\nschema = "{schema}"\n#'
    config = write_config(directory, backend=backend, lock_timeout_seconds=lock_timeout_seconds)
    running = start(config)
    try:
        yield running
    finally:
        log = running.stop()
        if pg_dsn is not None and engine == "postgres":
            with psycopg.connect(pg_dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    if "Traceback" in log:
        raise AssertionError(f"dpproxy logged an error:\n{log}")


def wait_until(condition: Callable[[], bool], what: str, seconds: float = 60.0) -> None:
    """Return as soon as ``condition()`` holds; fail after ``seconds`` (a bound for a
    test that would otherwise hang, not a measurement)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {seconds} s for {what}")
        time.sleep(0.02)


@contextmanager
def fresh_demo_server(
    factory: pytest.TempPathFactory,
    name: str,
    engine: str = "duckdb",
    *,
    patients: int,
    pg_dsn: str | None = None,
    lock_timeout_seconds: float | None = None,
) -> Iterator[RunningServer]:
    """`demo_server` over a new demo of ``patients`` patients, its data and configuration in
    temporary directories named after ``name``."""
    data = factory.mktemp(f"{name}-data")
    demo_database(data, patients)
    with demo_server(
        engine,
        data / "demo.duckdb",
        factory.mktemp(name),
        pg_dsn=pg_dsn,
        patients=patients,
        lock_timeout_seconds=lock_timeout_seconds,
    ) as running:
        yield running


def session_loop(
    server: RunningServer, gaussian: bool, answered: list[int], stop: threading.Event
) -> None:
    """Spend alice's budget with ε=0.05 COUNTs (Laplace, or Gaussian) until it is refused,
    ``stop`` is set or the server goes away; one entry in ``answered`` per answer."""
    try:
        with psycopg.connect(server.dsn("alice"), autocommit=True, connect_timeout=10) as conn:
            conn.execute("SET dpproxy.epsilon = 0.05")
            if gaussian:
                conn.execute("SET dpproxy.mechanism = gaussian")
            while not stop.is_set():
                try:
                    conn.execute("SELECT COUNT(*) FROM visits").fetchall()
                except psycopg.errors.ConfigurationLimitExceeded:
                    return  # budget spent
                answered.append(1)
    except psycopg.OperationalError:
        return  # the server was killed


def slow_visits_duckdb(path: Path) -> None:
    """Make ``visits`` of the DuckDB file at ``path`` a view that takes minutes to read
    (every row 10^8 times), for tests of cancels and timeouts."""
    with duckdb.connect(str(path)) as conn:
        conn.execute("ALTER TABLE visits RENAME TO visits_data")
        conn.execute(
            "CREATE VIEW visits AS SELECT v.* FROM visits_data v, range(100000000) AS r(i)"
        )


def slow_visits_postgres(dsn: str, schema: str) -> None:
    """Make ``schema.visits`` a view that sleeps a minute before its first row."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE {schema}.visits RENAME TO visits_data")
        conn.execute(
            f"CREATE VIEW {schema}.visits AS SELECT v.* FROM {schema}.visits_data v "
            "CROSS JOIN (SELECT pg_sleep(60)) AS s"
        )
