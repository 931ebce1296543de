"""The state store in PostgreSQL, so that several dpproxy processes (on several hosts) share
one ledger, one set of analysts and budgets, and one audit log.

The tables are those of the SQLite state file (same names, columns and SQL, see
``accountant.sqlite``), in a schema of their own (``dpproxy`` unless configured), created
on first use. Times are ISO text in the "C" collation, so they sort and compare exactly as
in SQLite; the audit hash chain is computed from the same values and verifies the same.

- Atomic charges: every write transaction first takes a transaction-level advisory lock
  (``pg_advisory_xact_lock``) keyed on the schema, so writers run one at a time across all
  processes and hosts, as SQLite's ``BEGIN IMMEDIATE`` does on one host. They run in READ
  COMMITTED: each statement after the lock sees everything committed before it.
- Durable: sessions set ``synchronous_commit = on``; a commit returns once PostgreSQL has
  flushed it to its write-ahead log (the server must run with ``fsync = on``).
- Append-only: triggers refuse UPDATE, DELETE and TRUNCATE of ``audit_log`` and DELETE and
  TRUNCATE of ``reservations``.
- Owners: each open store holds a session-level advisory lock on a random 63-bit key (its
  owner id) for as long as its connection lives. PostgreSQL drops the lock when the
  process dies or its connection is lost, so recovery finishes only reservations whose
  owner's lock is free.
- The schema is checked at every open: a schema holding other tables, or dpproxy tables
  of another version, is refused with a message saying what to do.

Sessions need a direct connection or a pooler in *session* mode: advisory session locks
and ``SET`` do not survive a transaction-mode pooler.
"""

from __future__ import annotations

import re
import secrets
import time
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, LiteralString

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql as pg_sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus

from accountant.connection import Connection, Cursor
from accountant.errors import StateStoreError
from accountant.sqlite import APPLICATION_ID, GENESIS_HASH, SCHEMA_VERSION

DEFAULT_SCHEMA = "dpproxy"
APPLICATION = "dpproxy"
#: The first advisory-lock key of dpproxy's write lock ("dppx"); the second is the schema's.
LOCK_CLASS = APPLICATION_ID
_SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_$]{0,62}")

#: The schema at version 3 (the SQLite file's version 3, which PostgreSQL started at).
BASE_VERSION = 3
_SCHEMA = f"""
CREATE TABLE schema_version (
    application TEXT NOT NULL CHECK (application = '{APPLICATION}'),
    version INTEGER NOT NULL
);
CREATE TABLE reservations (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    analyst TEXT NOT NULL,
    client_address TEXT NOT NULL,
    sql TEXT NOT NULL,
    started_at TEXT COLLATE "C" NOT NULL,
    reserved_at TEXT COLLATE "C" NOT NULL,
    epsilon_nano BIGINT NOT NULL CHECK (epsilon_nano >= 0),
    rho_nano BIGINT NOT NULL DEFAULT 0 CHECK (rho_nano >= 0),
    laplace_rho_nano BIGINT NOT NULL DEFAULT 0 CHECK (laplace_rho_nano >= 0),
    remaining_nano BIGINT NOT NULL CHECK (remaining_nano >= 0),
    owner TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('reserved', 'finished')),
    audit_id BIGINT,
    CHECK (epsilon_nano > 0 OR rho_nano > 0)
);
CREATE INDEX reservations_spent ON reservations (analyst, epsilon_nano, rho_nano);
CREATE INDEX reservations_open ON reservations (status) WHERE status = 'reserved';
CREATE INDEX reservations_time ON reservations (reserved_at);
CREATE TABLE analysts (
    name TEXT COLLATE "C" PRIMARY KEY,
    verifier TEXT NOT NULL,
    total_nano BIGINT NOT NULL CHECK (total_nano > 0),
    default_nano BIGINT NOT NULL CHECK (default_nano > 0),
    cap_nano BIGINT CHECK (cap_nano IS NULL OR cap_nano > 0),
    reset_after BIGINT NOT NULL DEFAULT 0,
    removed INTEGER NOT NULL DEFAULT 0 CHECK (removed IN (0, 1)),
    created_at TEXT COLLATE "C" NOT NULL,
    updated_at TEXT COLLATE "C" NOT NULL,
    delta TEXT NOT NULL DEFAULT '0.000001',
    mechanism TEXT NOT NULL DEFAULT 'laplace' CHECK (mechanism IN ('laplace', 'gaussian')),
    period TEXT NOT NULL DEFAULT 'never'
        CHECK (period IN ('never', 'daily', 'weekly', 'monthly'))
);
CREATE TABLE audit_log (
    id BIGINT PRIMARY KEY,
    time TEXT COLLATE "C" NOT NULL,
    started_at TEXT COLLATE "C" NOT NULL,
    analyst TEXT NOT NULL,
    client_address TEXT NOT NULL,
    sql TEXT NOT NULL,
    decision TEXT NOT NULL,
    reason TEXT,
    epsilon_nano BIGINT NOT NULL,
    remaining_nano BIGINT,
    row_count BIGINT,
    duration_ms DOUBLE PRECISION,
    reservation_id BIGINT,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    actor TEXT,
    rho_nano BIGINT
);
CREATE INDEX audit_log_time ON audit_log (time);
CREATE INDEX audit_log_analyst_time ON audit_log (analyst, time);
CREATE TABLE audit_head (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    last_id BIGINT NOT NULL,
    last_hash TEXT NOT NULL
);
INSERT INTO audit_head (singleton, last_id, last_hash) VALUES (1, 0, '{GENESIS_HASH}');
CREATE TABLE global_budget (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    total_nano BIGINT NOT NULL CHECK (total_nano > 0),
    delta TEXT NOT NULL
);
CREATE TABLE answer_cache_epoch (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    epoch BIGINT NOT NULL
);
INSERT INTO answer_cache_epoch (singleton, epoch) VALUES (1, 0);
CREATE FUNCTION refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING MESSAGE = TG_ARGV[0], ERRCODE = 'restrict_violation';
END
$$;
CREATE TRIGGER reservations_no_delete BEFORE DELETE ON reservations
    FOR EACH ROW EXECUTE FUNCTION refuse_change('charges are never deleted');
CREATE TRIGGER reservations_no_truncate BEFORE TRUNCATE ON reservations
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_change('charges are never deleted');
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION refuse_change('the audit log is append-only');
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION refuse_change('the audit log is append-only');
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION refuse_change('the audit log is append-only');
INSERT INTO schema_version (application, version) VALUES ('{APPLICATION}', {BASE_VERSION});
"""

#: Upgrades from version ``n - 1`` to ``n`` (the same changes as the SQLite migrations),
#: applied in order inside the write transaction of the first open.
MIGRATIONS: dict[int, str] = {
    # Version 4: reservations may also charge δ (partition selection), ``delta_femto`` in
    # whole 10⁻¹⁵ units; audit records carry it (NULL when zero, hashed only when set).
    4: """
ALTER TABLE reservations ADD COLUMN delta_femto BIGINT NOT NULL DEFAULT 0
    CHECK (delta_femto >= 0);
ALTER TABLE audit_log ADD COLUMN delta_femto BIGINT;
""",
}


@dataclass(frozen=True)
class PostgresState:
    """Where a PostgreSQL state store lives: a connection string and a schema name."""

    dsn: str = field(repr=False)
    schema: str = DEFAULT_SCHEMA

    def __post_init__(self) -> None:
        check_dsn(self.dsn)
        check_schema_name(self.schema)

    def __str__(self) -> str:
        """The server, database and schema, without the password (for messages)."""
        parts = conninfo_to_dict(self.dsn)
        user = f"{parts['user']}@" if parts.get("user") else ""
        port = f":{parts['port']}" if parts.get("port") else ""
        return (
            f"postgresql://{user}{parts.get('host', '')}{port}/{parts.get('dbname', '')}"
            f" (schema {self.schema})"
        )

    def __repr__(self) -> str:
        return f"PostgresState({str(self)!r})"

    @property
    def lock_key(self) -> int:
        """The second key of the write lock: the schema's (int4) checksum."""
        return zlib.crc32(self.schema.encode("utf-8")) - 2**31


def check_dsn(dsn: str) -> None:
    """Refuse a connection string that is not a ``postgresql://`` URL libpq can read."""
    if not dsn.startswith(("postgresql://", "postgres://")):
        raise ValueError(
            "must be a PostgreSQL URL like postgresql://dpproxy@db.internal:5432/ledger"
        )
    try:
        conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise ValueError(f"is not a valid PostgreSQL URL ({exc})") from None


def check_schema_name(schema: str) -> None:
    if not _SCHEMA_NAME.fullmatch(schema) or schema.startswith("pg_"):
        raise ValueError(
            f"{schema!r} is not a usable schema name: use lower-case letters, digits and _ "
            "(at most 63, not starting with a digit or pg_), e.g. dpproxy"
        )


@lru_cache(maxsize=256)
def _placeholders(sql: str) -> LiteralString:
    """SQLite's ``?`` placeholders as psycopg's ``%s`` (literal ``%`` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


class _Adapter:
    """A psycopg connection seen as an ``accountant.connection.Connection``."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> Cursor:
        return self._conn.execute(_placeholders(sql), list(parameters))


def translate(name: str, exc: psycopg.Error) -> StateStoreError:
    """A StateStoreError that names the state database and says how to fix ``exc``."""
    text = str(exc).strip().replace("\n", " ")
    if isinstance(exc, pg_errors.LockNotAvailable | pg_errors.QueryCanceled):
        return StateStoreError(
            name,
            f"it stayed locked by another dpproxy process for too long ({text})",
            "look for a stuck dpproxy process or a session holding an advisory lock "
            "(pg_locks), or raise the lock timeout",
        )
    if isinstance(exc, pg_errors.InsufficientPrivilege):
        return StateStoreError(
            name,
            f"the database role lacks a privilege ({text})",
            "grant it CREATE on the database (or create the schema for it) for the first "
            "start, then USAGE and CREATE on the schema and SELECT, INSERT, UPDATE on its tables",
        )
    if isinstance(exc, pg_errors.ReadOnlySqlTransaction):
        return StateStoreError(
            name,
            f"the server accepts no writes ({text})",
            "point [state] dsn at the primary server, not at a standby",
        )
    if isinstance(
        exc,
        pg_errors.UndefinedTable
        | pg_errors.UndefinedColumn
        | pg_errors.UndefinedFunction
        | psycopg.IntegrityError
        | psycopg.DataError,
    ):
        return StateStoreError(
            name,
            f"its tables are damaged or were changed by something else ({text})",
            "restore the schema from a backup (pg_dump); starting a new one would forget all "
            "recorded spending",
        )
    if isinstance(exc, psycopg.OperationalError):
        return StateStoreError(
            name,
            f"the connection to PostgreSQL failed ({text})",
            "check that the server is running and reachable and the [state] dsn (host, port, "
            "user, password, database); dpproxy reconnects at its next request",
        )
    return StateStoreError(name, f"unexpected PostgreSQL error ({text})", "see the server log")


class PostgresDatabase:
    """One connection to the state schema: a store (an owner) or a read-only reader."""

    def __init__(self, state: PostgresState, timeout: float, *, owner: bool) -> None:
        self._state = state
        self._timeout = timeout
        self._owner_key = secrets.randbits(63) if owner else None
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = False

    @classmethod
    def open(cls, state: PostgresState, timeout: float) -> PostgresDatabase:
        """Connect as a new owner, creating or checking the schema."""
        db = cls(state, timeout, owner=True)
        try:
            db._ensure_connected()
            with db.transaction(write=True):
                db._prepare_schema(db._ensure_connected())
        except BaseException:
            db.close()
            raise
        return db

    @classmethod
    def open_reader(cls, state: PostgresState, timeout: float) -> PostgresDatabase:
        """A connection that only reads (no owner, no schema changes)."""
        db = cls(state, timeout, owner=False)
        try:
            db._ensure_connected()
        except BaseException:
            db.close()
            raise
        return db

    @property
    def name(self) -> str:
        return str(self._state)

    @property
    def owner(self) -> str:
        if self._owner_key is None:
            raise StateStoreError(self.name, "a read-only connection owns nothing", "open a store")
        return str(self._owner_key)

    @contextmanager
    def transaction(self, *, write: bool, durable: bool = True) -> Iterator[Connection]:
        conn = self._ensure_connected()
        try:
            if write:
                conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
                if not durable:  # committed without waiting for the WAL flush
                    conn.execute("SET LOCAL synchronous_commit TO off")
                conn.execute(
                    "SELECT pg_advisory_xact_lock(%s::int4, %s::int4)", (LOCK_CLASS, self._lock)
                )
            else:
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield _Adapter(conn)
            conn.execute("COMMIT")
        except BaseException as exc:
            if not conn.broken and conn.info.transaction_status != TransactionStatus.IDLE:
                with suppress(psycopg.Error):  # keep the original error, not the rollback's
                    conn.execute("ROLLBACK")
            if isinstance(exc, psycopg.Error):
                raise translate(self.name, exc) from exc
            raise

    def owner_is_alive(self, owner: str) -> bool:
        """Try the owner's lock for the rest of this transaction: free means dead."""
        if not owner.isdigit():
            return False
        conn = self._ensure_connected()
        row = conn.execute("SELECT pg_try_advisory_xact_lock(%s::int8)", (int(owner),)).fetchone()
        return row is None or not row[0]

    def forget_dead_owners(self) -> None:
        """Nothing to clean up: PostgreSQL released the locks of dead owners."""

    def close(self) -> None:
        self._closed = True
        if self._conn is not None:
            with suppress(psycopg.Error):
                self._conn.close()
            self._conn = None

    # -- internals -----------------------------------------------------------------------

    @property
    def _lock(self) -> int:
        return self._state.lock_key

    def _ensure_connected(self) -> psycopg.Connection[Any]:
        """The connection, opened again (with the same owner) if it was lost."""
        if self._closed:
            raise StateStoreError(self.name, "this store was closed", "open it again")
        if self._conn is not None and not self._conn.closed and not self._conn.broken:
            return self._conn
        if self._conn is not None:
            with suppress(psycopg.Error):
                self._conn.close()
            self._conn = None
        try:
            self._conn = self._connect()
        except psycopg.Error as exc:
            raise translate(self.name, exc) from exc
        return self._conn

    def _connect(self) -> psycopg.Connection[Any]:
        given = conninfo_to_dict(self._state.dsn)
        extra: dict[str, Any] = {}
        if "connect_timeout" not in given:
            extra["connect_timeout"] = max(2, round(min(self._timeout, 30)))
        if "application_name" not in given:
            extra["application_name"] = "dpproxy-state"
        conn = psycopg.connect(self._state.dsn, autocommit=True, **extra)
        try:
            timeout = pg_sql.Literal(f"{max(1, round(self._timeout * 1000))}ms")
            conn.execute("SET synchronous_commit = on")
            conn.execute(pg_sql.SQL("SET lock_timeout = {}").format(timeout))
            # A frozen process must not hold the write lock of every server forever.
            conn.execute("SET idle_in_transaction_session_timeout = '60s'")
            conn.execute(
                pg_sql.SQL("SET search_path = {}").format(pg_sql.Identifier(self._state.schema))
            )
            if self._owner_key is not None:
                self._lock_owner(conn)
            else:  # a reader answers logins on the event loop: never wait long
                conn.execute(pg_sql.SQL("SET statement_timeout = {}").format(timeout))
        except BaseException:
            conn.close()
            raise
        return conn

    def _lock_owner(self, conn: psycopg.Connection[Any]) -> None:
        """Hold this owner's session lock (again, after a reconnection: a recovery may be
        probing it for a moment)."""
        deadline = time.monotonic() + self._timeout
        while True:
            row = conn.execute(
                "SELECT pg_try_advisory_lock(%s::int8)", (self._owner_key,)
            ).fetchone()
            if row is not None and row[0]:
                return
            if time.monotonic() > deadline:
                raise StateStoreError(
                    self.name,
                    "another session holds this store's owner lock",
                    "open the store again (it will get a new owner id)",
                )
            time.sleep(0.05)

    def _prepare_schema(self, conn: psycopg.Connection[Any]) -> None:
        """Create the schema and its tables if absent or empty; else check they are
        dpproxy's, of this version (upgrading older ones). Inside the write lock, so
        processes starting together create it once."""
        schema = self._state.schema
        exists = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,))
        if exists.fetchone() is None:  # (IF NOT EXISTS would still need CREATE on the database)
            conn.execute(pg_sql.SQL("CREATE SCHEMA {}").format(pg_sql.Identifier(schema)))
        (tables,) = _one(
            conn,
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f')",
            schema,
        )
        if tables == 0:
            conn.execute(_SCHEMA)
            self._migrate(conn, BASE_VERSION)
            return
        (marked,) = _one(
            conn,
            "SELECT count(*) FROM information_schema.columns WHERE table_schema = %s"
            " AND table_name = 'schema_version' AND column_name IN ('application', 'version')",
            schema,
        )
        version = None
        if marked == 2:
            (version,) = _one(
                conn, "SELECT max(version) FROM schema_version WHERE application = %s", APPLICATION
            )
        if version is None:
            raise StateStoreError(
                self.name,
                "this schema holds other tables, not a dpproxy state store",
                "set [state] schema to a new name (dpproxy creates it) or to dpproxy's own",
            )
        if BASE_VERSION <= version < SCHEMA_VERSION:
            self._migrate(conn, version)
        elif version != SCHEMA_VERSION:
            newer = version > SCHEMA_VERSION
            raise StateStoreError(
                self.name,
                f"its schema version is {version}, this dpproxy understands {SCHEMA_VERSION}",
                "upgrade dpproxy" if newer else "restore the schema from a backup",
            )

    def _migrate(self, conn: psycopg.Connection[Any], version: int) -> None:
        for target in range(version + 1, SCHEMA_VERSION + 1):
            if target not in MIGRATIONS:
                raise StateStoreError(
                    self.name,
                    f"this dpproxy cannot upgrade a PostgreSQL state store to version {target}",
                    "report this as a bug in dpproxy",
                )
            conn.execute(MIGRATIONS[target])
            conn.execute("UPDATE schema_version SET version = %s", (target,))


def _one(conn: psycopg.Connection[Any], query: LiteralString, *params: Any) -> Any:
    """The row of an aggregate query (which always returns one)."""
    row = conn.execute(query, params).fetchone()
    return (None,) if row is None else row
