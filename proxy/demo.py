"""`dpproxy demo`: write a synthetic medical database, a commented config, and serve it."""

from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import psycopg
from psycopg.conninfo import conninfo_to_dict

from proxy.admin.common import CommandError, UsageError
from proxy.demo_data import TABLES, DemoSize, generate, load_postgres, summary, write_duckdb
from proxy.demo_defaults import CONFIG_FILE, DEFAULT_SEED
from proxy.protocol.scram import make_verifier
from proxy.settings import BackendSettings, Settings, load_settings

DATABASE_FILE = "demo.duckdb"
STATE_FILE = "state.sqlite"
#: Patients of a new demo unless --patients says otherwise.
DEFAULT_PATIENTS = 10_000
#: The second line of a demo's configuration: what `dpproxy demo` made, so that a later
#: `dpproxy demo --patients N` or `--seed S` on the same directory can be checked.
DATA_LINE = "# Demo data: {patients} patients, seed {seed} (options of the first `dpproxy demo`)."
_DATA_PATTERN = re.compile(r"^# Demo data: ([0-9,]+) patients, seed (-?[0-9]+) ", re.M)


@dataclass(frozen=True)
class PostgresTarget:
    """Load the demo data into this PostgreSQL database (``dpproxy demo --postgres``)."""

    dsn: str
    schema: str = "public"


DUCKDB_BACKEND = """\
engine = "duckdb"           # "duckdb" (a file, opened read-only) or "postgres" (dsn = ...)
path = "{database}"
"""
POSTGRES_BACKEND = """\
engine = "postgres"         # loaded by `dpproxy demo --postgres` (use a read-only role)
dsn = "{dsn}"
schema = "{schema}"
"""


@dataclass(frozen=True)
class DemoAnalyst:
    name: str
    password: str
    epsilon_total: float
    epsilon_default: float
    epsilon_per_query_max: float


# Demo credentials only: printed on start so that a new user can connect at once.
DEMO_ANALYSTS = (
    DemoAnalyst("alice", "alice-demo", 10.0, 1.0, 5.0),
    DemoAnalyst("bob", "bob-demo", 3.0, 0.5, 1.0),
)

CONFIG_TEMPLATE = """\
# dpproxy configuration for the demo database (written by `dpproxy demo`).
# Every setting is described in docs/configuration.md. Relative paths are resolved
# against the directory of this file.

[server]
host = "{host}"          # address to listen on
port = {port}                 # PostgreSQL clients connect here

[backend]
engine = "duckdb"           # "duckdb" (a file, opened read-only) or "postgres" (dsn = ...)
path = "{database}"
statement_timeout_seconds = 60

[state]
path = "{state}"       # budgets spent and the audit log (SQLite); back it up

# Analysts. These sections only seed the state store: afterwards change passwords and
# budgets live with `dpproxy analyst ...` and `dpproxy budget ...` (see docs/admin.md).
# password is a SCRAM-SHA-256 verifier (make one with `dpproxy passwd`), never
# the password itself. epsilon_total is all the ε the analyst may ever spend;
# epsilon_default is what one query spends unless the session runs SET dpproxy.epsilon;
# epsilon_per_query_max caps one query.
{analysts}
# Tables. A protected table names the column identifying the person (privacy_unit) and
# how many of one person's rows count at most (max_rows_per_unit): counts and sums are
# computed per person first and each person's partial is clamped to that many rows.
# SUM and AVG need bounds: values are clamped to [lower, upper].

[tables.patients]
privacy_unit = "patient_id"
max_rows_per_unit = 1        # one row per patient

[tables.patients.columns.sex]
domain = ["F", "M"]

[tables.patients.columns.birth_year]
lower = 1920
upper = 2025

[tables.patients.columns.income]
lower = 0
upper = 250000

[tables.visits]
privacy_unit = "patient_id"
max_rows_per_unit = 30       # 99% of patients have fewer visits; a few have over 100
max_groups_per_unit = 3      # in a GROUP BY, one patient counts in at most 3 groups

[tables.visits.columns.department]
# GROUP BY department releases exactly these values (a public list), empty ones included.
domain = ["Cardiology", "Emergency", "General Medicine", "Neurology", "Obstetrics",
          "Oncology", "Orthopedics", "Pediatrics"]

[tables.visits.columns.cost]
lower = 0
upper = 20000

[tables.visits.columns.length_of_stay]
lower = 0
upper = 30

[tables.visits.columns.visit_date]
# The demo's visits run from 2020 to 2024. Date bounds let SUM/AVG use
# EXTRACT(year FROM visit_date); dates outside are clamped to them. (month, quarter,
# dow and the other fields with a fixed range need no bounds.)
lower = 2020-01-01
upper = 2024-12-31

[tables.departments]
public = true                # a lookup table without personal data, joined on its key

[tables.departments.columns.building]
domain = ["Cancer Center", "Children's Pavilion", "Heart Center", "Main Building",
          "Neuroscience Institute", "West Wing", "Women's Health Pavilion"]
"""

ANALYST_TEMPLATE = """\
[analysts.{name}]
password = "{verifier}"
epsilon_total = {total}
epsilon_default = {default}
epsilon_per_query_max = {cap}
"""


class Progress:
    """Prints progress messages once the work has taken more than a second."""

    def __init__(self, delay: float = 1.0) -> None:
        self._start = time.monotonic()
        self._delay = delay
        self._pending: list[str] = []
        self.shown = False

    def __call__(self, message: str) -> None:
        self._pending.append(message)
        if time.monotonic() - self._start >= self._delay:
            for line in self._pending:
                print(f"  {line}", file=sys.stderr, flush=True)
            self._pending.clear()
            self.shown = True


def prepare(
    directory: Path,
    *,
    host: str,
    port: int,
    patients: int | None = None,
    seed: int | None = None,
    postgres: PostgresTarget | None = None,
) -> bool:
    """Create the demo in ``directory`` unless it is there already. True if created.

    With ``postgres``, the data goes into that PostgreSQL database (its demo tables are
    replaced) and the configuration points there instead of at a DuckDB file.

    An existing demo (its configuration file) is reused exactly as it is, never rewritten:
    ``patients``, ``seed`` and ``postgres`` (None: not given, the defaults for a new demo)
    must then agree with it, or the command is refused with what is there and how to make
    a new demo (``check_reuse``).
    """
    if directory.exists() and not directory.is_dir():
        raise UsageError(
            f"--dir {directory}: is a file, not a directory; give a directory for the demo "
            "(it is created if missing), e.g. --dir dpproxy-demo"
        )
    config = directory / CONFIG_FILE
    database = directory / DATABASE_FILE
    if config.exists():
        check_reuse(directory, patients=patients, seed=seed, postgres=postgres)
        return False
    patients = DEFAULT_PATIENTS if patients is None else patients
    seed = DEFAULT_SEED if seed is None else seed
    _make_directory(directory)
    if database.exists():
        # A demo interrupted before its configuration was written is made again; any other
        # file of that name is not ours to delete.
        if not _holds_the_demo_tables(database):
            raise UsageError(
                f"--dir {directory}: {database.name} exists but is not a dpproxy demo "
                "database; move it away, or choose another directory for the demo"
            )
        database.unlink()
    progress = Progress()
    started = time.monotonic()
    data = generate(DemoSize(patients=patients), seed=seed, progress=progress)
    if postgres is None:
        write_duckdb(data, database, progress=progress)
        where = str(database)
    else:
        try:
            load_postgres(data, postgres.dsn, schema=postgres.schema, progress=progress)
        except psycopg.Error as error:
            raise CommandError(
                f"cannot load the demo into PostgreSQL ({error}); check the DSN, that the "
                "server is up and that the role may create tables"
            ) from None
        where = f"PostgreSQL schema {postgres.schema}"
    counts = summary(data)
    if progress.shown:
        print(f"  done in {time.monotonic() - started:.1f} s", file=sys.stderr)
    analysts = "\n".join(
        ANALYST_TEMPLATE.format(
            name=a.name,
            verifier=make_verifier(a.password),
            total=a.epsilon_total,
            default=a.epsilon_default,
            cap=a.epsilon_per_query_max,
        )
        for a in DEMO_ANALYSTS
    )
    text = CONFIG_TEMPLATE.format(
        host=toml_escape(host),
        port=port,
        database=DATABASE_FILE,
        state=STATE_FILE,
        analysts=analysts,
    )
    if postgres is not None:
        text = text.replace(
            DUCKDB_BACKEND.format(database=DATABASE_FILE),
            POSTGRES_BACKEND.format(
                dsn=toml_escape(postgres.dsn), schema=toml_escape(postgres.schema)
            ),
        )
    first, _, rest = text.partition("\n")
    text = f"{first}\n{DATA_LINE.format(patients=patients, seed=seed)}\n{rest}"
    try:
        config.write_text(text, encoding="utf-8")
    except (OSError, UnicodeError) as error:
        config.unlink(missing_ok=True)  # never leave half a configuration to be reused
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        raise CommandError(f"{config}: cannot write the demo's configuration: {reason}") from None
    sizes = ", ".join(f"{n:,} {table}" for table, n in counts.items())
    print(f"wrote {where} ({sizes}) and {config}", file=sys.stderr)
    return True


def check_reuse(
    directory: Path,
    *,
    patients: int | None,
    seed: int | None,
    postgres: PostgresTarget | None,
) -> None:
    """Refuse options that contradict the demo already in ``directory`` (its engine, its
    PostgreSQL database and schema, its number of patients, its seed); nothing is written.
    The configuration is read as `dpproxy serve` reads it (an invalid one is refused with
    its own error), and a DuckDB demo whose database file is gone is not made again: the
    state store next to it keeps the budgets spent on that data."""
    config = directory / CONFIG_FILE
    settings = load_settings(config)
    backend = settings.backend
    served = served_database(backend)

    def refuse(problem: str, reuse: str) -> UsageError:
        return UsageError(
            f"--dir {directory}: {problem}; to reuse that demo as it is, {reuse}; for a new "
            "demo, give another --dir (dpproxy never rewrites an existing demo: its state "
            "store keeps the budgets spent and the audit log)"
        )

    if postgres is not None:
        if backend.engine != "postgres":
            raise refuse(
                f"holds a demo served from DuckDB ({served}), and --postgres asks for one in "
                "PostgreSQL",
                "leave out --postgres",
            )
        if not _same_dsn(backend.dsn or "", postgres.dsn):
            raise refuse(
                f"holds a demo served from {served}, and --postgres names another database",
                "leave out --postgres (or give the DSN of its configuration)",
            )
        if backend.schema_or_default != postgres.schema:
            raise refuse(
                f"holds a demo in PostgreSQL schema {backend.schema_or_default}, and this "
                f"command asks for schema {postgres.schema}",
                f"leave out --postgres, or give --schema {backend.schema_or_default}",
            )
    recorded = _recorded_data(config)
    if patients is not None:
        found = recorded[0] if recorded is not None else _duckdb_patients(settings)
        if found is None:
            raise refuse(
                "holds a demo whose number of patients its configuration does not record, "
                "and --patients applies only to a new demo",
                "leave out --patients",
            )
        if found != patients:
            raise refuse(
                f"holds a demo of {found:,} patients, and --patients {patients:,} asks for "
                "another (--patients applies only to a new demo)",
                "leave out --patients",
            )
    if seed is not None:
        if recorded is None:
            raise refuse(
                "holds a demo whose seed its configuration does not record, and --seed "
                "applies only to a new demo",
                "leave out --seed",
            )
        if recorded[1] != seed:
            raise refuse(
                f"holds a demo made with --seed {recorded[1]}, and --seed {seed} asks for "
                "other data (--seed applies only to a new demo)",
                "leave out --seed",
            )
    if backend.engine == "duckdb" and backend.path is not None and not backend.path.exists():
        raise UsageError(
            f"--dir {directory}: its configuration {config} serves {backend.path}, which is "
            "missing; restore that file (dpproxy does not make the data again: the budgets "
            "spent on it stay in the state store), or give another --dir for a new demo"
        )
    print(
        f"reusing the demo in {directory} as it is ({served}, with its budgets and audit "
        "log); give another --dir for a new one",
        file=sys.stderr,
    )


def _same_dsn(configured: str, given: str) -> bool:
    """Whether two PostgreSQL connection strings name the same connection (their parsed
    parameters are equal; as written, when either cannot be parsed)."""
    try:
        return conninfo_to_dict(configured) == conninfo_to_dict(given)
    except psycopg.Error:
        return configured == given


def _recorded_data(config: Path) -> tuple[int, int] | None:
    """(patients, seed) as the demo's configuration records them (DATA_LINE), or None for
    a configuration without that line (written by an older dpproxy, or by hand)."""
    try:
        text = config.read_text(encoding="utf-8")
    except (OSError, UnicodeError):
        return None
    found = _DATA_PATTERN.search(text)
    if found is None:
        return None
    return int(found.group(1).replace(",", "")), int(found.group(2))


def _duckdb_patients(settings: Settings) -> int | None:
    """The rows of the demo's patients table in its DuckDB file, or None if unknown."""
    path = settings.backend.path
    if settings.backend.engine != "duckdb" or path is None or not path.exists():
        return None
    try:
        with duckdb.connect(str(path), read_only=True) as conn:
            row = conn.execute("SELECT count(*) FROM patients").fetchone()
    except duckdb.Error:
        return None
    return None if row is None else int(row[0])


def _holds_the_demo_tables(database: Path) -> bool:
    """Whether ``database`` is a DuckDB file holding exactly the demo's tables."""
    try:
        with duckdb.connect(str(database), read_only=True) as conn:
            found = {str(name) for (name,) in conn.execute("SHOW TABLES").fetchall()}
    except duckdb.Error:
        return False
    return found == {spec.name for spec in TABLES}


def _make_directory(directory: Path) -> None:
    """Create ``directory`` (and its parents) for a new demo; refuse one this user cannot
    write, before spending time on the data."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(
            f"--dir {directory}: cannot create it: {error.strerror}; give a directory you "
            "may write, e.g. --dir dpproxy-demo"
        ) from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise UsageError(
            f"--dir {directory}: this user may not write there; give a directory you may "
            "write, e.g. --dir dpproxy-demo"
        )


def toml_escape(value: str) -> str:
    """``value`` for the inside of a TOML basic string ("..."): quotes, backslashes and
    control characters escaped, so that a --host or --postgres DSN cannot break the file."""
    out = []
    for ch in value:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\u{ord(ch):04X}")
        else:
            out.append(ch)
    return "".join(out)


def served_database(backend: BackendSettings) -> str:
    """What the server serves, for the banner: the DuckDB file, or the PostgreSQL server,
    database and schema (never the password)."""
    if backend.engine == "duckdb":
        return str(backend.path)
    try:
        parts = conninfo_to_dict(backend.dsn or "")
    except psycopg.Error:
        parts = {}
    user = f"{parts['user']}@" if parts.get("user") else ""
    port = f":{parts['port']}" if parts.get("port") else ""
    where = f"{user}{parts.get('host') or 'localhost'}{port}/{parts.get('dbname') or ''}"
    return f"PostgreSQL postgresql://{where} (schema {backend.schema_or_default})"


def connection_banner(directory: Path, served: str, host: str, port: int) -> str:
    """What `dpproxy demo` prints once it listens; ``served`` is ``served_database``'s."""
    shown_host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host  # noqa: S104
    lines = [
        f"dpproxy demo is serving {served} on {shown_host}:{port}",
        "Connect as an analyst (demo passwords):",
    ]
    for a in DEMO_ANALYSTS:
        lines.append(
            f'  psql "postgresql://{a.name}:{a.password}@{shown_host}:{port}/demo"'
            f"   (ε={a.epsilon_total:g} in all, {a.epsilon_default:g} per query)"
        )
    config = directory / CONFIG_FILE
    lines += [
        "Then try:  SELECT COUNT(*) FROM visits;",
        f"Admin:     dpproxy budget show --config {config}",
        f"           dpproxy audit list --config {config}",
        "Stop with Ctrl-C.",
    ]
    return "\n".join(lines)
