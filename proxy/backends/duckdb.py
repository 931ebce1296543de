"""DuckDB backend: the database file opened read-only, queries run off the event loop.

The file is opened in an in-memory DuckDB of its own (``ATTACH … (READ_ONLY)``), never
with ``duckdb.connect(path)``: that shares one database instance per path within the
process, so opening the file again while the first opening is in use would still read it
through the first instance and its cached pages.

Before each charged query the pipeline calls ``ready``: one ``os.stat`` tells whether the
file is still the one that was opened (device, inode, size, modification and change
times). If not (copied over in place, or replaced by a rename), it is opened again and
checked to declare the same tables, columns, types and keys as when dpproxy started; new
queries then use the new opening, while queries already running on the previous one end
there (it is closed once the last of them has ended). A file that cannot be read, that
no longer matches, or that was modified less than SETTLE_SECONDS ago (a copy may still be
writing it) refuses queries before their charge (NotReady).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import duckdb

from proxy.backends import (
    FOREIGN_KEY,
    PRIMARY_KEY,
    SCHEMA_QUERY,
    STATEMENT_TIMEOUT,
    UNIQUE,
    BackendError,
    CancelToken,
    DeclaredKey,
    DeclaredType,
    KeyCheck,
    NotReady,
    QueryCanceled,
    Schema,
    group_declared,
    single_count,
)
from proxy.backends.collations import COLLATIONS_QUERY, with_collations
from proxy.duckdb_interrupt import Interrupter
from rewriter.planner import Dialect

#: Single-column PRIMARY KEY and UNIQUE constraints of one table.
_KEYS_QUERY = (
    "SELECT constraint_column_names FROM duckdb_constraints() WHERE database_name = "
    "current_database() AND schema_name = ? AND table_name = ? "
    "AND constraint_type IN ('PRIMARY KEY', 'UNIQUE')"
)
#: The PRIMARY KEY, UNIQUE and FOREIGN KEY constraints of a schema's tables (DuckDB
#: refuses a foreign key to another schema's table).
_CONSTRAINTS_QUERY = (
    "SELECT table_name, constraint_type, constraint_column_names, referenced_table, "
    "referenced_column_names FROM duckdb_constraints() WHERE database_name = "
    "current_database() AND schema_name = ? "
    "AND constraint_type IN ('PRIMARY KEY', 'UNIQUE', 'FOREIGN KEY') "
    "ORDER BY table_name, constraint_index"
)
_CONSTRAINT_KINDS = {"PRIMARY KEY": PRIMARY_KEY, "UNIQUE": UNIQUE, "FOREIGN KEY": FOREIGN_KEY}
#: A changed file modified more recently than this is not opened yet: a copy over it may
#: still be writing it (``cp`` writes a large file over seconds, and updates its
#: modification time as it goes); queries are refused, free, until it has been quiet.
SETTLE_SECONDS = 1.0
#: The alias of an attached file whose own name DuckDB cannot give it (``memory.duckdb``:
#: the in-memory database it is attached to is called ``memory`` until it is detached).
_FALLBACK_ALIAS = "data"

#: What tells one version of the file from another: device, inode, size, and the
#: modification and change times in nanoseconds (the change time cannot be set back, so
#: a copy that keeps the size and the modification time, ``cp -p``, still shows).
Identity = tuple[int, int, int, int, int]

logger = logging.getLogger("dpproxy.backends.duckdb")


class _Opening:
    """One opening of the file: its connection, the file's identity just before it was
    opened, and how many statements use it now. A retired opening (the file changed, or
    the backend was closed) is closed when the last statement using it has ended."""

    def __init__(self, connection: duckdb.DuckDBPyConnection, identity: Identity) -> None:
        self.connection = connection
        self.identity = identity
        self.users = 0
        self.retired = False


class DuckDBBackend:
    dialect: Dialect = "duckdb"
    finite_decimals = True  # DuckDB's DECIMAL has no NaN or infinity

    def __init__(
        self, path: Path, *, timeout_seconds: float, settle_seconds: float = SETTLE_SECONDS
    ) -> None:
        if not path.exists():
            raise BackendError(
                f"{path}: no such DuckDB file; fix [backend] path in the configuration"
            )
        self._path = path
        try:
            identity = _identity(path)
        except OSError as error:
            raise BackendError(f"{path}: cannot read the DuckDB file: {_why(error)}") from None
        self._opening = _Opening(_open(path), identity)
        self._timeout = timeout_seconds
        self._settle_ns = int(settle_seconds * 1e9)
        # What dpproxy was started with (the catalog was built from it): the schemas and
        # keys found on the first opening, which every later opening must declare too.
        self._declared: dict[str, Schema] = {}
        self._constraints: dict[str, tuple[DeclaredKey, ...]] = {}
        self._keys: dict[tuple[str, str, str], KeyCheck] = {}
        # The public tables found to hold at most so many rows (rows_within).
        self._row_limits: dict[tuple[str, str], int] = {}
        self._reopening = asyncio.Lock()
        # The identity of a version of the file that could not be used, and why: refused
        # again without opening it again, until the file changes.
        self._refused: tuple[Identity, NotReady] | None = None
        self._closed = False

    async def schema_declared(self, schema: str) -> Schema:
        opening = self._use()
        try:
            declared = _read_schema(opening.connection, schema)
        finally:
            self._leave(opening)
        self._declared.setdefault(schema, declared)
        return declared

    async def schema_keys(self, schema: str) -> tuple[DeclaredKey, ...]:
        opening = self._use()
        try:
            keys = _read_keys(opening.connection, schema)
        except duckdb.Error as error:
            raise BackendError(
                f"DuckDB: cannot read the keys of schema {schema}: {error}"
            ) from None
        finally:
            self._leave(opening)
        self._constraints.setdefault(schema, keys)
        return keys

    async def key_check(self, schema: str, table: str, column: str) -> KeyCheck:
        """A declared key, else the data itself: the file is open read-only, which locks
        out writers, so rows unique now stay unique while dpproxy runs (a file replaced
        or rewritten by other means is not used before a restart: see ``ready``)."""
        opening = self._use()
        try:
            found = await asyncio.to_thread(_key_check, opening.connection, schema, table, column)
        finally:
            self._leave(opening)
        self._keys.setdefault((schema, table, column), found)
        return found

    async def rows_within(self, schema: str, table: str, limit: int) -> bool:
        """Counted again whenever a changed file is opened (``ready``)."""
        opening = self._use()
        try:
            within = await asyncio.to_thread(_rows_within, opening.connection, schema, table, limit)
        finally:
            self._leave(opening)
        if within:
            self._row_limits.setdefault((schema, table), limit)
        return within

    async def ready(self, token: CancelToken) -> None:
        """Before a charge: one os.stat of the file; if it is not the version that was
        opened, open it again (see the module's docstring). NotReady if the file cannot
        be read or no longer declares what dpproxy was started with."""
        if self._closed:
            raise NotReady("the DuckDB backend is closed")
        if self._stat() == self._opening.identity:
            return
        async with self._reopening:  # one reopening at a time; the others wait for it
            found = self._stat()
            if found == self._opening.identity:
                return  # opened again while this one waited
            if self._refused is not None and self._refused[0] == found:
                refused = self._refused[1]
                raise NotReady(str(refused), needs_restart=refused.needs_restart)
            # A modification time in the future was set, not written by a copy going on.
            if 0 <= time.time_ns() - found[3] < self._settle_ns:
                raise NotReady(
                    f"{self._path} changed less than {self._settle_ns / 1e9:g} s ago and may "
                    "still be being written; it is opened once it has been left alone that long"
                )
            declared = _StartedWith(
                dict(self._declared),
                dict(self._keys),
                dict(self._row_limits),
                dict(self._constraints),
            )
            try:
                opening = await asyncio.to_thread(_open_checked, self._path, found, declared)
            except NotReady as refusal:  # logged by the pipeline
                self._refused = (found, refusal)
                raise
            if self._closed:
                _close(opening.connection)
                raise NotReady("the DuckDB backend is closed")
            previous, self._opening, self._refused = self._opening, opening, None
            self._retire(previous)
            logger.warning(
                "%s changed since it was opened: opened it again; queries already running "
                "end on the previous version, new ones read the new one",
                self._path,
            )

    def _stat(self) -> Identity:
        try:
            return _identity(self._path)
        except OSError as error:
            raise NotReady(f"{self._path}: cannot read the DuckDB file: {_why(error)}") from None

    def _use(self) -> _Opening:
        """The current opening, counted as used until ``_leave`` (on the event loop)."""
        if self._closed:
            raise BackendError("the DuckDB backend is closed")
        opening = self._opening
        opening.users += 1
        return opening

    def _leave(self, opening: _Opening) -> None:
        opening.users -= 1
        if opening.retired and opening.users == 0:
            _close(opening.connection)

    def _retire(self, opening: _Opening) -> None:
        opening.retired = True
        if opening.users == 0:
            _close(opening.connection)

    async def fetch_all(self, sql: str, token: CancelToken) -> list[tuple[object, ...]]:
        """``sql``'s rows. A cancel request (``token``) or the server's statement timeout
        (which fires ``token`` with STATEMENT_TIMEOUT) stops it, at whatever moment it
        comes before the query has ended, with QueryCanceled (``token.reason`` says why)."""
        opening = self._use()
        try:
            cursor = opening.connection.cursor()
        except duckdb.Error as error:
            self._leave(opening)
            raise BackendError(f"DuckDB: {error}") from None
        stop = Interrupter(cursor)
        token.bind(stop.fire)
        loop = asyncio.get_running_loop()
        timer = loop.call_later(self._timeout, token.cancel, STATEMENT_TIMEOUT)
        # Shielded: a cancelled task must not keep _run from ever starting (the cursor
        # would stay open and a fired stop would interrupt it for ever).
        try:
            work = loop.run_in_executor(None, _run, cursor, sql, token, stop)
        except BaseException:
            timer.cancel()
            token.bind(None)
            stop.end()
            cursor.close()
            self._leave(opening)
            raise
        work.add_done_callback(_consume)
        # The opening is left once the query has ended and closed its cursor, whoever
        # awaits it (a retired opening is closed then).
        work.add_done_callback(lambda _: self._leave(opening))
        try:
            return await asyncio.shield(work)
        except duckdb.InterruptException:
            if token.canceled:
                raise QueryCanceled(f"canceled due to {token.reason}") from None
            raise BackendError("DuckDB: interrupted") from None
        except duckdb.Error as error:
            raise BackendError(f"DuckDB: {error}") from None
        except asyncio.CancelledError:
            # The task was cancelled (a shutdown): stop the thread's query too, and return
            # once it has ended and closed its cursor (before the backend may be closed).
            stop.fire()
            await asyncio.wait((work,))
            raise
        finally:
            timer.cancel()
            token.bind(None)

    async def close(self) -> None:
        """Close the file (at once, or when the statements still running have ended)."""
        self._closed = True
        self._retire(self._opening)


def _identity(path: Path) -> Identity:
    stat = os.stat(path)
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


def _why(error: OSError) -> str:
    return error.strerror or str(error)


def _open(path: Path) -> duckdb.DuckDBPyConnection:
    """``path`` attached read-only, alone, to an in-memory DuckDB of its own, without
    access to other files (external access is turned off once it is attached, and the
    configuration locked). Raises BackendError."""
    # Spill files where DuckDB puts them for a database file opened directly.
    connection = duckdb.connect(":memory:", config={"temp_directory": f"{path}.tmp"})
    try:
        before = {name for (name,) in connection.execute(_DATABASES_QUERY).fetchall()}
        literal = "'" + str(path).replace("'", "''") + "'"
        try:
            connection.execute(f"ATTACH {literal} (READ_ONLY)")
        except duckdb.BinderException:  # its name is taken (memory.duckdb): another one
            connection.execute(f"ATTACH {literal} AS {_FALLBACK_ALIAS} (READ_ONLY)")
        added = {name for (name,) in connection.execute(_DATABASES_QUERY).fetchall()} - before
        if len(added) != 1:
            raise BackendError(f"{path}: attaching it added {len(added)} databases, not 1")
        connection.execute(f"USE {_quoted(str(added.pop()))}")
        connection.execute("DETACH memory")
        connection.execute("SET enable_external_access = false")
        connection.execute("SET lock_configuration = true")
    except duckdb.Error as error:
        _close(connection)
        raise BackendError(f"{path}: cannot open as a DuckDB database: {error}") from None
    except BaseException:
        _close(connection)
        raise
    return connection


_DATABASES_QUERY = "SELECT database_name FROM duckdb_databases() WHERE NOT internal"


def _close(connection: duckdb.DuckDBPyConnection) -> None:
    try:
        connection.close()
    except duckdb.Error as error:
        logger.warning("closing a DuckDB connection failed: %s", error)


@dataclass(frozen=True)
class _StartedWith:
    """What the catalog was built from, which every later opening of the file must hold."""

    schemas: Mapping[str, Schema]
    keys: Mapping[tuple[str, str, str], KeyCheck]
    row_limits: Mapping[tuple[str, str], int]  # (schema, table) -> at most so many rows
    constraints: Mapping[str, tuple[DeclaredKey, ...]]  # the catalog shows them


def _open_checked(path: Path, found: Identity, started: _StartedWith) -> _Opening:
    """``path`` opened again (in a worker thread), after its identity changed to
    ``found``: it must declare the schemas and keys dpproxy was started with, its public
    tables must stay within their row limits, and it must not have changed meanwhile.
    Raises NotReady."""
    try:
        connection = _open(path)
    except BackendError as error:
        raise NotReady(str(error)) from None
    try:
        _check_unchanged(connection, path, started)
        try:
            now = _identity(path)
        except OSError as error:
            raise NotReady(f"{path}: cannot read the DuckDB file: {_why(error)}") from None
        if now != found:
            raise NotReady(
                f"{path} changed again while it was being opened (is it still being "
                "written?); replace it by renaming a complete file over it"
            )
    except BaseException:
        _close(connection)
        raise
    return _Opening(connection, found)


def _check_unchanged(
    connection: duckdb.DuckDBPyConnection, path: Path, started: _StartedWith
) -> None:
    restart = (
        "the policies and the catalog were built from the file dpproxy started with: "
        "restart dpproxy to use the new one (or put the old one back)"
    )
    for schema, expected in started.schemas.items():
        try:
            found = _read_schema(connection, schema)
        except duckdb.Error as error:
            raise NotReady(f"{path}: cannot read its tables: {error}") from None
        difference = _difference(expected, found)
        if difference is not None:
            raise NotReady(
                f"{path} changed since dpproxy started: {difference}; {restart}",
                needs_restart=True,
            )
    for schema, expected_keys in started.constraints.items():
        try:
            found_keys = _read_keys(connection, schema)
        except duckdb.Error as error:
            raise NotReady(f"{path}: cannot read its keys: {error}") from None
        if set(found_keys) != set(expected_keys):
            tables = sorted({key.table for key in set(found_keys) ^ set(expected_keys)})
            raise NotReady(
                f"{path} changed since dpproxy started: the PRIMARY KEY, UNIQUE or FOREIGN "
                f"KEY constraints of {', '.join(tables)} differ; {restart}",
                needs_restart=True,
            )
    for (schema, table), limit in started.row_limits.items():
        try:
            within = _rows_within(connection, schema, table, limit)
        except BackendError as error:
            raise NotReady(f"{path}: cannot count the rows of {table}: {error}") from None
        if not within:
            raise NotReady(
                f"{path} changed since dpproxy started: public table {table} now holds more "
                f"than {limit} rows ([backend] max_public_rows), and queries may read it only "
                f"while it holds fewer; {restart}",
                needs_restart=True,
            )
    for (schema, table, column), check in started.keys.items():
        if check is not KeyCheck.DECLARED:
            raise NotReady(
                f"{path} changed since dpproxy started: {table}.{column}, a key dpproxy "
                "relies on (of a foreign-key path or a public table), has no declared key, "
                "and its rows were found unique in the file dpproxy started with, which must "
                f"be checked again; {restart}",
                needs_restart=True,
            )
        try:
            still = _declared_key(connection, schema, table, column)
        except duckdb.Error as error:
            raise NotReady(f"{path}: cannot read its keys: {error}") from None
        if not still:
            raise NotReady(
                f"{path} changed since dpproxy started: {table}.{column}, a key dpproxy "
                f"relies on (of a foreign-key path or a public table), is no longer a declared "
                f"key; {restart}",
                needs_restart=True,
            )


def _difference(expected: Schema, found: Schema) -> str | None:
    """The first difference between two schemas, in words; None if they are the same."""
    for table in expected:
        if table not in found:
            return f"table {table} is gone"
    for table in found:
        if table not in expected:
            return f"table {table} is new"
    for table, columns in expected.items():
        if dict(columns) == dict(found[table]):
            continue
        for column, was in columns.items():
            now = found[table].get(column)
            if now is None:
                return f"column {table}.{column} is gone"
            if now != was:
                return f"column {table}.{column} is {_spelled(now)}, was {_spelled(was)}"
        for column in found[table]:
            if column not in columns:
                return f"column {table}.{column} is new"
        return f"the columns of table {table} differ"
    return None


def _spelled(declared: DeclaredType) -> str:
    spelled = declared.name
    if declared.collation is not None:
        spelled += f" COLLATE {declared.collation}"
    return spelled + (" NOT NULL" if declared.not_null else "")


def _read_schema(connection: duckdb.DuckDBPyConnection, schema: str) -> Schema:
    cursor = connection.cursor()
    try:
        rows = cursor.execute(SCHEMA_QUERY.format(placeholder="?"), [schema]).fetchall()
        statements = cursor.execute(COLLATIONS_QUERY, [schema]).fetchall()
    finally:
        cursor.close()
    declared = group_declared([tuple(row) for row in rows])
    return with_collations(declared, [tuple(row) for row in statements])


def _read_keys(connection: duckdb.DuckDBPyConnection, schema: str) -> tuple[DeclaredKey, ...]:
    """The constraints of ``schema``'s tables (DuckDB names none as declared: a name given
    with CONSTRAINT is dropped, so the catalog names them as PostgreSQL would)."""
    cursor = connection.cursor()
    try:
        rows = cursor.execute(_CONSTRAINTS_QUERY, [schema]).fetchall()
    finally:
        cursor.close()
    keys = []
    for table, kind, columns, referenced, referenced_columns in rows:
        keys.append(
            DeclaredKey(
                str(table),
                _CONSTRAINT_KINDS[str(kind)],
                _names(columns),
                referenced_table=None if referenced is None else str(referenced),
                referenced_columns=_names(referenced_columns),
            )
        )
    return tuple(keys)


def _names(value: object) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(str(name) for name in value)


def _declared_key(
    connection: duckdb.DuckDBPyConnection, schema: str, table: str, column: str
) -> bool:
    cursor = connection.cursor()
    try:
        for (names,) in cursor.execute(_KEYS_QUERY, [schema, table]).fetchall():
            if isinstance(names, list) and [str(n).lower() for n in names] == [column.lower()]:
                return True
    finally:
        cursor.close()
    return False


def _rows_within(
    connection: duckdb.DuckDBPyConnection, schema: str, table: str, limit: int
) -> bool:
    """In a worker thread: whether ``table`` holds at most ``limit`` rows."""
    name = f"{_quoted(schema)}.{_quoted(table)}"
    cursor = connection.cursor()
    try:
        rows = cursor.execute(
            f"SELECT COUNT(*) FROM (SELECT 1 FROM {name} LIMIT {int(limit) + 1}) AS s"
        ).fetchall()
    except duckdb.Error as error:
        raise BackendError(f"DuckDB: {error}") from None
    finally:
        cursor.close()
    return single_count(rows, f"the rows of {schema}.{table}") <= limit


def _key_check(
    connection: duckdb.DuckDBPyConnection, schema: str, table: str, column: str
) -> KeyCheck:
    """In a worker thread."""
    try:
        if _declared_key(connection, schema, table, column):
            return KeyCheck.DECLARED
        cursor = connection.cursor()
        try:
            name = f"{_quoted(schema)}.{_quoted(table)}"
            repeated = cursor.execute(
                f"SELECT 1 FROM {name} WHERE {_quoted(column)} IS NOT NULL "
                f"GROUP BY {_quoted(column)} HAVING COUNT(*) > 1 LIMIT 1"
            ).fetchall()
        finally:
            cursor.close()
    except duckdb.Error as error:
        raise BackendError(f"DuckDB: {error}") from None
    return KeyCheck.DUPLICATED if repeated else KeyCheck.VERIFIED


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _consume(work: asyncio.Future[list[tuple[object, ...]]]) -> None:
    """Retrieve the outcome of a query whose task was cancelled (else asyncio logs it)."""
    if not work.cancelled():
        work.exception()


def _run(
    cursor: duckdb.DuckDBPyConnection, sql: str, token: CancelToken, stop: Interrupter
) -> list[tuple[object, ...]]:
    """In a worker thread; closes the cursor when done (it is not shared with the loop).
    A stop fired before the check below means the query never starts; one fired later
    interrupts it (see proxy.backends.interrupt)."""
    try:
        if token.canceled or stop.fired:
            raise QueryCanceled(f"canceled due to {token.reason}")
        return [tuple(row) for row in cursor.execute(sql).fetchall()]
    finally:
        stop.end()
        cursor.close()
