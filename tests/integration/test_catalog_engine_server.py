"""The catalog engine within a real `dpproxy serve`, with psycopg and psql: a graceful
shutdown by a signal to the server's process group, an answer too large to send, and an
engine that does not start.

- SIGTERM to the process group (a service manager, `kill -TERM -PGID`) reached the engine
  too, which died: the catalog query under way failed (53000) while the server was
  finishing its statements. Now the engine ignores it, and the query is answered.
- A catalog answer is refused (54000, with a hint) past MAX_ANSWER_BYTES as sent by the
  engine; before, 40 MB came whole and took the server's memory up by four times that.
- An engine killed while it starts is a 53000 with a hint for the analyst and one line in
  the server's log, and the server goes on (the next catalog query starts another).
- An engine killed for one analyst's catalog query (one that would not stop) no longer
  fails the other analysts' catalog queries running on it: they are sent again to the
  next engine (before: 53000).

The log is read as the server writes it. Memory is the server's peak resident set
(VmHWM); bounds have wide margins.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest

from proxy.catalog.engine_process import MAX_ANSWER_BYTES
from tests.integration.server import PASSWORDS, PSQL, demo_database, write_config

pytestmark = pytest.mark.integration

PATIENTS = 100
MB = 1024 * 1024
#: About 0.8 s of DuckDB's work (a cross join) on an idle machine, answered with its count.
WORK = (
    "SELECT count(*) FROM generate_series(1, 12000) AS a(x), "
    "generate_series(1, 12000) AS b(y) WHERE x + y > 12000"
)
WORK_ANSWER = 12000 * 12000 - 12000 * 11999 // 2
#: 16 values as long as can be sent (the frame's other bytes take 352).
LARGEST_VALUE = (MAX_ANSWER_BYTES - 352) // 16
#: What the server's peak resident set may grow by for an answer just under the limit
#: (measured: about 90 MB).
UNDER_LIMIT_GROWTH = 200 * MB

Connection = psycopg.Connection[tuple[object, ...]]


@dataclass
class Server:
    """A `dpproxy serve` whose log (standard error) is read line by line as it comes."""

    process: subprocess.Popen[str]
    port: int
    log: list[str] = field(default_factory=list)

    def dsn(self, user: str) -> str:
        return f"postgresql://{user}:{PASSWORDS[user]}@127.0.0.1:{self.port}/demo"

    def connect(self, user: str = "alice") -> Connection:
        return psycopg.connect(self.dsn(user), autocommit=True, connect_timeout=10)

    def psql(self, command: str) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PGCONNECT_TIMEOUT": "10"}
        return subprocess.run(
            [PSQL, "-X", "-v", "ON_ERROR_STOP=1", self.dsn("alice"), "-c", command],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=False,
        )

    def engines(self) -> set[int]:
        found = set()
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue  # it ended meanwhile
                if int(stat[1]) == self.process.pid and stat[0] != "Z":  # not yet waited for
                    found.add(int(entry))
        return found

    def peak_bytes(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmHWM")

    def catalog_lines(self) -> list[str]:
        return [line for line in self.log if "catalog engine" in line]


def _read_log(server: Server) -> None:
    assert server.process.stderr is not None
    for line in server.process.stderr:
        server.log.append(line.rstrip("\n"))


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("catalog-engine-data")
    return demo_database(directory, PATIENTS)


def _start(demo: Path, directory: Path, *, own_group: bool = False) -> Server:
    (directory / "demo.duckdb").symlink_to(demo)
    config = write_config(directory, backend="")
    process = subprocess.Popen(
        [sys.executable, "-m", "proxy.cli", "serve", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        process_group=0 if own_group else None,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    while "listening on" not in line:
        if not line:
            error = process.stderr.read() if process.stderr else ""
            raise RuntimeError(f"dpproxy did not start: {error}")
        line = process.stdout.readline()
    server = Server(process, int(line.strip().rsplit(":", 1)[1]))
    threading.Thread(target=_read_log, args=(server,), daemon=True).start()
    return server


def _stopped(server: Server) -> int:
    if server.process.poll() is None:
        server.process.send_signal(signal.SIGTERM)
    try:
        return server.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.process.kill()
        raise


@pytest.fixture(scope="module")
def server(demo: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    running = _start(demo, tmp_path_factory.mktemp("catalog-engine"))
    try:
        yield running
    finally:
        _stopped(running)
        assert not [line for line in running.log if "Traceback" in line], running.log


def test_a_catalog_query_under_way_is_answered_when_the_server_group_gets_sigterm(
    demo: Path, tmp_path: Path
) -> None:
    server = _start(demo, tmp_path, own_group=True)
    try:
        with server.connect() as conn:
            assert conn.execute("SELECT 1").fetchall() == [(1,)]  # the engine is ready
            answers: list[object] = []

            def run() -> None:
                try:
                    answers.append(conn.execute(WORK).fetchall())
                except psycopg.Error as error:
                    answers.append(error)

            running = threading.Thread(target=run)
            running.start()
            time.sleep(0.2)  # under way (it runs for 0.8 s or more)
            os.killpg(server.process.pid, signal.SIGTERM)  # the server and its engine
            running.join(timeout=30)
        # Before: 53000, "dpproxy's catalog engine ended while the query ran".
        assert answers == [[(WORK_ANSWER,)]]
        assert _stopped(server) == 0
        assert server.catalog_lines() == []  # the engine did not end before the server
        assert not [line for line in server.log if "Traceback" in line], server.log
    finally:
        if server.process.poll() is None:
            server.process.kill()


def test_an_answer_too_large_to_send_is_refused_and_the_server_does_not_grow(
    server: Server,
) -> None:
    with server.connect() as conn:
        assert conn.execute("SELECT 1").fetchall() == [(1,)]
        before = server.peak_bytes()
        for sql in (
            f"SELECT repeat('x', {MB}) FROM generate_series(1, 40)",  # 40 MB
            "SELECT repeat('€', 6000000)",  # 6 million characters, 18 MB of UTF-8
        ):
            with pytest.raises(psycopg.errors.ProgramLimitExceeded) as refused:
                conn.execute(sql).fetchall()
            assert str(refused.value).startswith(
                "catalog query stopped: its answer is larger than 16 MB"
            )
            assert "fewer rows" in (refused.value.diag.message_hint or "")
        # Before: answered, the server's peak up by about 160 MB.
        assert server.peak_bytes() - before < 20 * MB
        answer = conn.execute(
            f"SELECT repeat('x', {LARGEST_VALUE}) AS v FROM generate_series(1, 16)"
        ).fetchall()
        assert len(answer) == 16 and all(v == "x" * LARGEST_VALUE for (v,) in answer)
        assert server.peak_bytes() - before < UNDER_LIMIT_GROWTH
    done = server.psql(f"SELECT repeat('x', {MB}) FROM generate_series(1, 17)")
    assert done.returncode != 0
    assert "ERROR:  catalog query stopped: its answer is larger than 16 MB" in done.stderr
    assert "HINT:  ask for fewer rows" in done.stderr


def test_an_engine_that_does_not_start_is_a_clear_error_and_the_server_goes_on(
    server: Server,
) -> None:
    with server.connect() as conn:
        assert conn.execute("SELECT 2").fetchall() == [(2,)]
        engines = server.engines()
        logged = len(server.log)
        killed: list[int] = []

        def kill_the_next_engine() -> None:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not killed:
                for pid in server.engines() - engines:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                time.sleep(0.001)

        for pid in engines:
            os.kill(pid, signal.SIGKILL)  # the next catalog query starts another...
        while any(Path(f"/proc/{pid}").exists() for pid in engines):
            time.sleep(0.01)  # ... once the server has seen it end (and waited for it)
        killer = threading.Thread(target=kill_the_next_engine)
        killer.start()  # ... which is killed before it is ready
        with pytest.raises(psycopg.errors.InsufficientResources) as failed:
            conn.execute("SELECT 3").fetchall()
        killer.join()
        assert str(failed.value).startswith(
            "catalog query stopped: the catalog engine did not start: "
            "it was killed (SIGKILL) before it was ready"
        )
        assert "tell your dpproxy admin" in (failed.value.diag.message_hint or "")
        # The server goes on: catalog queries (a new engine) and DP queries.
        assert conn.execute("SELECT 4").fetchall() == [(4,)]
        count = conn.execute("SELECT COUNT(*) FROM patients").fetchall()
        assert len(count) == 1
    new_lines = [line for line in server.log[logged:] if "catalog engine" in line]
    assert len(new_lines) == 2, new_lines  # the engine that ended, the one that did not start
    why = "catalog engine did not start: it was killed (SIGKILL) before it was ready"
    assert new_lines[1].endswith(why)


def test_other_analysts_queries_are_answered_when_one_has_the_engine_killed(
    server: Server,
) -> None:
    with server.connect("alice") as alice, server.connect("bob") as bob:
        assert alice.execute("SELECT 7").fetchall() == [(7,)]
        (engine,) = server.engines()
        os.kill(engine, signal.SIGSTOP)  # nothing stops on it now, as under levenshtein()
        answers: list[object] = []

        def ask() -> None:
            try:
                answers.append(bob.execute("SELECT 6 * 8 AS answer").fetchall())
            except psycopg.Error as error:
                answers.append(error)

        asking = threading.Thread(target=ask)
        asking.start()
        alice.execute("SET statement_timeout = '300ms'")
        with pytest.raises(psycopg.errors.QueryCanceled, match="statement timeout"):
            alice.execute("SELECT 8 AS culprit").fetchall()  # killed 2 s after its cancel
        asking.join(timeout=60)
        # Before: 53000, "dpproxy's catalog engine ended while the query ran".
        assert answers == [[(48,)]]
        alice.execute("RESET statement_timeout")
        assert alice.execute("SELECT 9").fetchall() == [(9,)]
    assert engine not in server.engines()
