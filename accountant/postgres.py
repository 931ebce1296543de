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
  of another version, is refused with a message saying what to do
  (``accountant.postgres_schema``).
- Bounded waits: PostgreSQL's own timeouts (``lock_timeout``, ``statement_timeout``) need
  a server that answers, and TCP keepalives do not notice a peer that acknowledges packets
  but never replies (a hung server, a stalled proxy or network path). Every operation (one
  transaction, with the connection it may open first) therefore also has a deadline on
  this side, the timeout plus a grace period (``accountant.deadline``): when it passes, a
  watchdog thread shuts the socket down, the waiting call fails at once, the connection is
  discarded (the next operation opens a new one) and the caller gets a StateStoreError
  (:class:`~accountant.errors.WriteOutcomeUnknown` if COMMIT had been sent).

Sessions need a direct connection or a pooler in *session* mode: advisory session locks
and ``SET`` do not survive a transaction-mode pooler.
"""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from functools import lru_cache
from typing import Any, LiteralString

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql as pg_sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus

from accountant.connection import Connection, Cursor
from accountant.deadline import Deadline
from accountant.errors import StateStoreError, WriteOutcomeUnknown
from accountant.postgres_schema import prepare_schema
from accountant.postgres_state import PostgresState
from accountant.sqlite import APPLICATION_ID

#: The first advisory-lock key of dpproxy's write lock ("dppx"); the second is the schema's.
LOCK_CLASS = APPLICATION_ID


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
            "(pg_locks), or raise [state] lock_timeout_seconds",
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
            "user, password, database)",
            later="a running dpproxy server reconnects at its next request",
        )
    return StateStoreError(name, f"unexpected PostgreSQL error ({text})", "see the server log")


class PostgresDatabase:
    """One connection to the state schema: a store (an owner) or a read-only reader.

    Not for concurrent use: callers serialize operations (StateStore and StateReader each
    hold a lock)."""

    def __init__(
        self, state: PostgresState, timeout: float, *, owner: bool, bounded: bool = True
    ) -> None:
        self._state = state
        self._timeout = timeout
        self._bounded_reads = bounded
        self._owner_key = secrets.randbits(63) if owner else None
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = False
        self._deadline = Deadline(str(state), timeout, enabled=bounded)

    @classmethod
    def open(cls, state: PostgresState, timeout: float) -> PostgresDatabase:
        """Connect as a new owner, creating or checking the schema."""
        db = cls(state, timeout, owner=True)
        try:
            with db.transaction(write=True):
                prepare_schema(db._ensure_connected(), state.schema, db.name)
        except BaseException:
            db.close()
            raise
        return db

    @classmethod
    def open_reader(
        cls, state: PostgresState, timeout: float, *, bounded: bool = True
    ) -> PostgresDatabase:
        """A connection that only reads (no owner, no schema changes). ``bounded=False``
        (admin commands reading the whole audit log, which an interrupt stops): reads take
        as long as they need, with neither statement_timeout nor a client-side deadline."""
        db = cls(state, timeout, owner=False, bounded=bounded)
        try:
            with db._deadline.operation(db._discard):
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
        with self._deadline.operation(self._discard):
            conn = self._ensure_connected()
            committing = False
            try:
                if write:
                    conn.execute("BEGIN ISOLATION LEVEL READ COMMITTED")
                    if not durable:  # committed without waiting for the WAL flush
                        conn.execute("SET LOCAL synchronous_commit TO off")
                    conn.execute(
                        "SELECT pg_advisory_xact_lock(%s::int4, %s::int4)",
                        (LOCK_CLASS, self._lock),
                    )
                else:
                    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                yield _Adapter(conn)
                committing = True
                conn.execute("COMMIT")
            except BaseException as exc:
                lost = conn.broken or conn.closed
                if not lost and conn.info.transaction_status != TransactionStatus.IDLE:
                    with suppress(psycopg.Error):  # keep the original error, not the rollback's
                        conn.execute("ROLLBACK")
                if not isinstance(exc, psycopg.Error):
                    raise
                error = self._translate(exc)
                if lost:
                    self._discard()
                if committing and write and lost:
                    raise WriteOutcomeUnknown(
                        self.name,
                        f"{error.problem}; the connection was lost after COMMIT was sent, so "
                        "this write may or may not have been committed",
                        error.fix,
                        later=error.later,
                    ) from exc
                raise error from exc

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
        self._discard()
        self._deadline.stop()

    # -- internals -----------------------------------------------------------------------

    @property
    def _lock(self) -> int:
        return self._state.lock_key

    def _translate(self, exc: psycopg.Error) -> StateStoreError:
        """``translate``, saying so when the deadline cut the connection."""
        cut = self._deadline.cut_error()
        if cut is not None:
            return cut
        return translate(self.name, exc)

    def _discard(self) -> None:
        """Close the connection (if any); the next operation opens a new one."""
        self._deadline.watch(None)
        if self._conn is not None:
            with suppress(psycopg.Error):
                self._conn.close()
            self._conn = None

    def _ensure_connected(self) -> psycopg.Connection[Any]:
        """The connection, opened again (with the same owner) if it was lost."""
        if self._closed:
            raise StateStoreError(self.name, "this store was closed", "open it again")
        if self._conn is not None and not self._conn.closed and not self._conn.broken:
            return self._conn
        self._discard()
        try:
            self._conn = self._connect()
        except psycopg.Error as exc:
            raise self._translate(exc) from exc
        except OSError as exc:  # (no descriptor left to watch it with)
            raise StateStoreError(
                self.name,
                f"cannot watch a new connection ({exc})",
                "raise the limit of open files of the user running dpproxy",
            ) from exc
        return self._conn

    def _connect(self) -> psycopg.Connection[Any]:
        given = conninfo_to_dict(self._state.dsn)
        extra: dict[str, Any] = {}
        left = self._deadline.seconds_left()
        if left <= 0:
            raise StateStoreError(
                self.name,
                f"no time was left to connect within {self._deadline.limit:g} s",
                "check the server and the network between them; dpproxy opens a new "
                "connection at its next request",
            )
        # Within the operation's deadline (psycopg enforces it while connecting; libpq
        # waits at least 2 s). A smaller connect_timeout in the dsn applies as given.
        wanted = max(2, math.ceil(min(left, 30)))
        if "connect_timeout" not in given or _connect_seconds(given) > wanted:
            extra["connect_timeout"] = wanted
        if "application_name" not in given:
            extra["application_name"] = "dpproxy-state"
        conn = psycopg.connect(self._state.dsn, autocommit=True, **extra)
        try:
            self._deadline.watch(conn)
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
            elif self._bounded_reads:  # a reader answers logins: never wait long
                conn.execute(pg_sql.SQL("SET statement_timeout = {}").format(timeout))
        except BaseException:
            self._deadline.watch(None)
            conn.close()
            raise
        return conn

    def _lock_owner(self, conn: psycopg.Connection[Any]) -> None:
        """Hold this owner's session lock (again, after a reconnection: a recovery may be
        probing it for a moment)."""
        deadline = time.monotonic() + min(self._timeout, self._deadline.seconds_left() - 0.5)
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


def _connect_seconds(given: dict[str, Any]) -> float:
    """The dsn's connect_timeout in seconds (0 or unreadable: no limit)."""
    try:
        seconds = float(given["connect_timeout"])
    except (KeyError, TypeError, ValueError):
        return math.inf
    return seconds if seconds > 0 else math.inf
