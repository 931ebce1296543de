"""A real `dpproxy serve`: a database that changes or goes away under the running server
costs analysts nothing.

Review: copying another DuckDB file over the served one (``cp other.duckdb demo.duckdb``)
made every later query fail after its charge, or answer from the old file's pages, until
a restart; a PostgreSQL server that could not be reached failed each query after its
charge. Now the server reopens the changed file before the charge, refuses (08006,
"nothing was charged") what it cannot use, and answers again once the database is back;
`dpproxy audit list` and `dpproxy budget show` show charges only for answers.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from proxy.backends.duckdb import SETTLE_SECONDS
from proxy.demo_data import DemoSize, generate, load_postgres, write_duckdb
from tests.integration.server import (
    RunningServer,
    demo_database,
    demo_server,
    dpproxy_in_process,
    start,
    write_config,
)

pytestmark = pytest.mark.integration

PATIENTS = 300
COUNT = "SELECT COUNT(*) FROM patients"
NOTHING_CHARGED = "the database cannot be used now; nothing was charged"


def audit(server: RunningServer) -> list[tuple[str, str]]:
    listing = dpproxy_in_process("audit", "list", "--json", "--config", str(server.config))
    records = [json.loads(line) for line in listing.stdout.splitlines()]
    return [(r["decision"], r["epsilon"]) for r in records if r["decision"] != "admin"]


def spent(server: RunningServer) -> str:
    shown = dpproxy_in_process("budget", "show", "alice", "--json", "--config", str(server.config))
    return str(json.loads(shown.stdout)[0]["spent"])


def copy_in_place(source: Path, target: Path) -> None:
    """As `cp source target`: the same inode, rewritten."""
    inode = target.stat().st_ino
    shutil.copyfile(source, target)
    assert target.stat().st_ino == inode


def test_duckdb_file_copied_over_while_serving(tmp_path: Path) -> None:
    data_dir, run_dir = tmp_path / "data", tmp_path / "run"
    data_dir.mkdir()
    run_dir.mkdir()
    served = demo_database(data_dir, PATIENTS)
    other = tmp_path / "other.duckdb"  # the same tables, other people (another seed)
    write_duckdb(generate(DemoSize(patients=PATIENTS * 10), seed=7), other)
    with demo_server("duckdb", served, run_dir, pg_dsn=None, patients=PATIENTS) as server:
        with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
            conn.execute("SET dpproxy.epsilon = 5")
            first = conn.execute(COUNT).fetchone()
            assert first is not None and float(first[0]) < PATIENTS * 2
            copy_in_place(other, served)
            # Written a moment ago: a copy may still be writing it. Refused, free.
            with pytest.raises(psycopg.errors.ConnectionFailure) as caught:
                conn.execute(COUNT)
            assert caught.value.diag.message_primary == NOTHING_CHARGED
            time.sleep(SETTLE_SECONDS + 0.2)
            second = conn.execute(COUNT).fetchone()
            assert second is not None and float(second[0]) > PATIENTS * 5  # the new file
            served.write_bytes(b"half a file" * 10000)  # a copy gone wrong
            time.sleep(SETTLE_SECONDS + 0.2)
            with pytest.raises(psycopg.errors.ConnectionFailure) as caught:
                conn.execute(COUNT)
            assert caught.value.diag.message_primary == NOTHING_CHARGED
            copy_in_place(other, served)
            time.sleep(SETTLE_SECONDS + 0.2)
            assert conn.execute(COUNT).fetchone() is not None
        assert audit(server) == [
            ("accepted", "5"),
            ("error", "0"),
            ("accepted", "5"),
            ("error", "0"),
            ("accepted", "5"),
        ]
        assert spent(server) == "15"
    # (demo_server fails the test if the server logged a traceback)


class Relay:
    """A TCP relay from a local port to PostgreSQL that can be cut, as a network failure
    (or a stopped server) would, and restored on the same port."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._serve(self._listener)

    def _serve(self, listener: socket.socket) -> None:
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # cut
            try:
                upstream = socket.create_connection(self._target, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._sockets += [client, upstream]
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=_pump, args=(source, sink), daemon=True).start()

    def cut(self) -> None:
        # Wakes the thread blocked in accept() (closing alone would not).
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def restore(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._serve(self._listener)


def _pump(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)


@pytest.fixture
def relayed_pg_server(pg_dsn: str, tmp_path: Path) -> Iterator[tuple[RunningServer, Relay]]:
    schema = f"dpproxy_ready_{uuid.uuid4().hex[:8]}"
    load_postgres(generate(DemoSize(patients=PATIENTS)), pg_dsn, schema=schema)
    info = conninfo_to_dict(pg_dsn)
    relay = Relay(str(info.get("host") or "127.0.0.1"), int(info.get("port") or 5432))
    user, database = info.get("user") or "postgres", info.get("dbname") or "postgres"
    dsn = f"postgresql://{user}@127.0.0.1:{relay.port}/{database}?sslmode=disable"
    backend = f'engine = "postgres"\ndsn = "{dsn}"\nschema = "{schema}"\n#'
    running = start(write_config(tmp_path, backend=backend))
    try:
        yield running, relay
    finally:
        log = running.stop()
        relay.cut()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
        assert "Traceback" not in log, log


@pytest.mark.postgres
def test_postgres_out_of_reach_while_serving(
    relayed_pg_server: tuple[RunningServer, Relay],
) -> None:
    server, relay = relayed_pg_server
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        assert conn.execute(COUNT).fetchone() is not None
        relay.cut()  # the pooled connection dies, and no new one can be made
        for _ in range(2):
            with pytest.raises(psycopg.errors.ConnectionFailure) as caught:
                conn.execute(COUNT)
            assert caught.value.diag.message_primary == NOTHING_CHARGED
            assert "127.0.0.1" not in str(caught.value)
        relay.restore()
        assert conn.execute(COUNT).fetchone() is not None
    assert audit(server) == [
        ("accepted", "1"),
        ("error", "0"),
        ("error", "0"),
        ("accepted", "1"),
    ]
    assert spent(server) == "2"
