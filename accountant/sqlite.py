"""Opening the SQLite state file: durability settings, schema, transactions, error messages.

One file holds the ledger (``reservations``), the analysts and their budgets
(``analysts``, schema version 2; (ε, δ) budgets and ρ charges, version 3; δ charges of
partition selection, version 4) and the audit log (``audit_log`` and its ``audit_head``).
It is opened in WAL mode with ``synchronous=FULL``: a committed
transaction has been fsynced. Writers use ``BEGIN IMMEDIATE`` and wait up to ``timeout``
seconds for each other, across threads and processes (all on one host: WAL needs shared
memory, so the file must not live on a network filesystem).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from accountant.budget import Epsilon
from accountant.errors import StateStoreError
from accountant.zcdp import laplace_rho_nano

SCHEMA_VERSION = 4
#: Marks the file as a dpproxy state file ("dppx").
APPLICATION_ID = 0x64707078
GENESIS_HASH = "0" * 64

_SCHEMA = f"""
CREATE TABLE schema_version (
    version INTEGER NOT NULL
);
CREATE TABLE reservations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    analyst TEXT NOT NULL,
    client_address TEXT NOT NULL,
    sql TEXT NOT NULL,
    started_at TEXT NOT NULL,
    reserved_at TEXT NOT NULL,
    epsilon_nano INTEGER NOT NULL CHECK (epsilon_nano > 0),
    remaining_nano INTEGER NOT NULL CHECK (remaining_nano >= 0),
    owner TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('reserved', 'finished')),
    audit_id INTEGER
);
CREATE INDEX reservations_spent ON reservations (analyst, epsilon_nano);
CREATE INDEX reservations_open ON reservations (status) WHERE status = 'reserved';
CREATE TRIGGER reservations_no_delete BEFORE DELETE ON reservations
BEGIN SELECT RAISE(ABORT, 'charges are never deleted'); END;
CREATE TABLE audit_log (
    id INTEGER PRIMARY KEY,
    time TEXT NOT NULL,
    started_at TEXT NOT NULL,
    analyst TEXT NOT NULL,
    client_address TEXT NOT NULL,
    sql TEXT NOT NULL,
    decision TEXT NOT NULL,
    reason TEXT,
    epsilon_nano INTEGER NOT NULL,
    remaining_nano INTEGER,
    row_count INTEGER,
    duration_ms REAL,
    reservation_id INTEGER,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL
);
CREATE INDEX audit_log_time ON audit_log (time);
CREATE INDEX audit_log_analyst_time ON audit_log (analyst, time);
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TABLE audit_head (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    last_id INTEGER NOT NULL,
    last_hash TEXT NOT NULL
);
INSERT INTO audit_head (singleton, last_id, last_hash) VALUES (1, 0, '{GENESIS_HASH}');
INSERT INTO schema_version (version) VALUES (1);
"""

#: Upgrades from version ``n - 1`` to ``n``, applied in order in one write transaction.
#: Version 2: analysts and their budgets live in the state file (the source of truth for
#: logins and charges); audit records may name the admin (``actor``) who made a change.
#: ``reset_after``: reservations with an id up to it no longer count as spent.
_MIGRATIONS: dict[int, str] = {
    2: """
CREATE TABLE analysts (
    name TEXT PRIMARY KEY,
    verifier TEXT NOT NULL,
    total_nano INTEGER NOT NULL CHECK (total_nano > 0),
    default_nano INTEGER NOT NULL CHECK (default_nano > 0),
    cap_nano INTEGER CHECK (cap_nano IS NULL OR cap_nano > 0),
    reset_after INTEGER NOT NULL DEFAULT 0,
    removed INTEGER NOT NULL DEFAULT 0 CHECK (removed IN (0, 1)),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
ALTER TABLE audit_log ADD COLUMN actor TEXT;
UPDATE schema_version SET version = 2;
""",
    # Version 3: zCDP accounting. A reservation charges pure ε (``epsilon_nano``, Laplace
    # answers; ``laplace_rho_nano`` = ε²/2 rounded up) and/or ρ (``rho_nano``, Gaussian
    # answers); analysts have a δ (exact decimal text), a default mechanism and a budget
    # period; ``global_budget`` (no row: none) caps all analysts' charges together;
    # ``answer_cache_epoch`` is raised by an admin to forget every cached answer; audit
    # records carry the ρ of a charge (hashed only when set, so older records verify).
    3: """
ALTER TABLE reservations RENAME TO reservations_v2;
DROP INDEX reservations_spent;
DROP INDEX reservations_open;
DROP TRIGGER reservations_no_delete;
CREATE TABLE reservations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    analyst TEXT NOT NULL,
    client_address TEXT NOT NULL,
    sql TEXT NOT NULL,
    started_at TEXT NOT NULL,
    reserved_at TEXT NOT NULL,
    epsilon_nano INTEGER NOT NULL CHECK (epsilon_nano >= 0),
    rho_nano INTEGER NOT NULL DEFAULT 0 CHECK (rho_nano >= 0),
    laplace_rho_nano INTEGER NOT NULL DEFAULT 0 CHECK (laplace_rho_nano >= 0),
    remaining_nano INTEGER NOT NULL CHECK (remaining_nano >= 0),
    owner TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('reserved', 'finished')),
    audit_id INTEGER,
    CHECK (epsilon_nano > 0 OR rho_nano > 0)
);
INSERT INTO reservations (id, analyst, client_address, sql, started_at, reserved_at,
    epsilon_nano, rho_nano, laplace_rho_nano, remaining_nano, owner, status, audit_id)
SELECT id, analyst, client_address, sql, started_at, reserved_at, epsilon_nano, 0,
    0, remaining_nano, owner, status, audit_id FROM reservations_v2;
DROP TABLE reservations_v2;
CREATE INDEX reservations_spent ON reservations (analyst, epsilon_nano, rho_nano);
CREATE INDEX reservations_open ON reservations (status) WHERE status = 'reserved';
CREATE TRIGGER reservations_no_delete BEFORE DELETE ON reservations
BEGIN SELECT RAISE(ABORT, 'charges are never deleted'); END;
ALTER TABLE analysts ADD COLUMN delta TEXT NOT NULL DEFAULT '0.000001';
ALTER TABLE analysts ADD COLUMN mechanism TEXT NOT NULL DEFAULT 'laplace'
    CHECK (mechanism IN ('laplace', 'gaussian'));
ALTER TABLE analysts ADD COLUMN period TEXT NOT NULL DEFAULT 'never'
    CHECK (period IN ('never', 'daily', 'weekly', 'monthly'));
CREATE INDEX reservations_time ON reservations (reserved_at);
CREATE TABLE global_budget (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    total_nano INTEGER NOT NULL CHECK (total_nano > 0),
    delta TEXT NOT NULL
);
CREATE TABLE answer_cache_epoch (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    epoch INTEGER NOT NULL
);
INSERT INTO answer_cache_epoch (singleton, epoch) VALUES (1, 0);
ALTER TABLE audit_log ADD COLUMN rho_nano INTEGER;
UPDATE schema_version SET version = 3;
""",
    # ---- Version 4 (schema change for partition selection; mirror it in PostgreSQL) ----
    # A reservation may also charge δ: ``delta_femto``, the δ of partition selection
    # (releasing GROUP BY keys found in the data) in whole 10⁻¹⁵ units, exact (0 for every
    # earlier charge). Audit records carry it too (``delta_femto``, NULL when zero, and
    # hashed only when set, so that older records verify unchanged).
    4: """
ALTER TABLE reservations ADD COLUMN delta_femto INTEGER NOT NULL DEFAULT 0
    CHECK (delta_femto >= 0);
ALTER TABLE audit_log ADD COLUMN delta_femto INTEGER;
UPDATE schema_version SET version = 4;
""",
}


def translate(path: Path, exc: sqlite3.Error) -> StateStoreError:
    """A StateStoreError that names the file and says how to fix ``exc``."""
    code = getattr(exc, "sqlite_errorname", "")
    if code.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return StateStoreError(
            path,
            f"it stayed locked by another process for too long ({exc})",
            "check for a stuck dpproxy process using this file, or raise [state] "
            "lock_timeout_seconds",
        )
    if code.startswith("SQLITE_CANTOPEN"):
        return StateStoreError(
            path,
            f"it cannot be opened ({exc})",
            "check that its directory exists and is writable by the user running dpproxy",
        )
    if code.startswith(("SQLITE_READONLY", "SQLITE_PERM", "SQLITE_IOERR", "SQLITE_FULL")):
        return StateStoreError(
            path,
            f"it cannot be written ({exc})",
            "check disk space and that the file, its directory and its -wal/-shm files are "
            "writable by the user running dpproxy",
        )
    if code.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or isinstance(
        exc, sqlite3.DatabaseError | sqlite3.IntegrityError
    ):
        return StateStoreError(
            path,
            f"it is damaged or is not a dpproxy state file ({exc})",
            "restore it from a backup; starting a new file would forget all recorded spending",
        )
    return StateStoreError(path, f"unexpected SQLite error ({exc})", "see the SQLite message")


def refuse_directory(path: Path) -> None:
    """Refuse a state file ``path`` that is a directory (SQLite would call it a disk I/O
    error), before anything is created next to it."""
    if path.is_dir():
        raise StateStoreError(
            path,
            "it is a directory, not a file",
            f"set [state] path to a file, e.g. {path / 'state.sqlite'} (created on first use)",
        )


@contextmanager
def errors_named(path: Path) -> Iterator[None]:
    """Turn any sqlite3 error raised inside into a StateStoreError naming ``path``."""
    try:
        yield
    except sqlite3.Error as exc:
        raise translate(path, exc) from exc


@contextmanager
def transaction(
    conn: sqlite3.Connection, *, write: bool, durable: bool = True
) -> Iterator[sqlite3.Connection]:
    """One transaction: ``BEGIN IMMEDIATE`` (takes the write lock now) or a read snapshot.

    Commits on success (fsynced, with ``synchronous=FULL``); rolls back on any exception.
    ``durable=False``: committed with ``synchronous=NORMAL``, without an fsync of its own.
    The commit is in the WAL file when this returns, so it survives the process being
    killed; an OS crash or power cut can lose it until the next fsynced commit or
    checkpoint, which makes it durable together with everything written before it (the
    WAL is replayed in order, so only a tail of such commits can ever be lost).
    """
    if not durable:
        conn.execute("PRAGMA synchronous=NORMAL")
    try:
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                with suppress(sqlite3.Error):  # keep the original error, not the rollback's
                    conn.execute("ROLLBACK")
            raise
    finally:
        if not durable:
            conn.execute("PRAGMA synchronous=FULL")


def connect(path: Path, timeout: float) -> sqlite3.Connection:
    """Open (creating if absent) the state file at ``path``, with schema and durability set."""
    with errors_named(path):
        conn = sqlite3.connect(
            str(path), timeout=timeout, isolation_level=None, check_same_thread=False
        )
        try:
            _configure(conn, path, timeout)
        except BaseException:
            conn.close()
            raise
    return conn


def _set_wal(conn: sqlite3.Connection, timeout: float) -> object:
    """Switch to WAL, retrying: SQLite does not wait on its busy handler for this pragma,
    so processes opening a new file together would otherwise fail at once."""
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        try:
            mode: object = conn.execute("PRAGMA journal_mode").fetchone()[0]
            if str(mode).lower() == "wal":
                return mode
            return conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        except sqlite3.OperationalError as exc:
            busy = getattr(exc, "sqlite_errorname", "").startswith(("SQLITE_BUSY", "SQLITE_LOCKED"))
            if not busy or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _configure(conn: sqlite3.Connection, path: Path, timeout: float) -> None:
    mode = _set_wal(conn, timeout)
    if str(mode).lower() != "wal":
        raise StateStoreError(
            path,
            f"SQLite refused write-ahead logging (journal_mode is {mode})",
            "keep the state file on a local filesystem (not a network share)",
        )
    conn.execute("PRAGMA synchronous=FULL")
    with transaction(conn, write=True):
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if app_id == 0 and tables == 0:
            for statement in _statements(_SCHEMA):
                conn.execute(statement)
            _migrate(conn, 1)
            conn.execute(f"PRAGMA application_id={APPLICATION_ID}")
            return
        if app_id != APPLICATION_ID:
            raise StateStoreError(
                path,
                "this SQLite file is not a dpproxy state file",
                "point dpproxy at a new path or at its own state file",
            )
        version = conn.execute("SELECT max(version) FROM schema_version").fetchone()[0]
        if isinstance(version, int) and 1 <= version < SCHEMA_VERSION:
            _migrate(conn, version)
            version = SCHEMA_VERSION
    if version != SCHEMA_VERSION:
        newer = isinstance(version, int) and version > SCHEMA_VERSION
        raise StateStoreError(
            path,
            f"its schema version is {version}, this dpproxy understands {SCHEMA_VERSION}",
            "upgrade dpproxy" if newer else "restore the file from a backup",
        )


def _migrate(conn: sqlite3.Connection, version: int) -> None:
    """Upgrade the schema from ``version`` to SCHEMA_VERSION (inside a write transaction)."""
    for target in range(version + 1, SCHEMA_VERSION + 1):
        for statement in _statements(_MIGRATIONS[target]):
            conn.execute(statement)
        if target == 3:  # ε²/2 of the pure ε charges, in Python (SQLite would overflow)
            rows = conn.execute("SELECT id, epsilon_nano FROM reservations").fetchall()
            conn.executemany(
                "UPDATE reservations SET laplace_rho_nano = ? WHERE id = ?",
                [(laplace_rho_nano(Epsilon.from_nano(nano)), rid) for rid, nano in rows],
            )


def _statements(script: str) -> list[str]:
    """Split the schema script into statements (triggers keep their inner ``;``)."""
    statements: list[str] = []
    current = ""
    for line in script.strip().splitlines():
        current += line + "\n"
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    return statements
