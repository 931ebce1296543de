"""PostgreSQL's planner and resource parameters and custom ``a.b`` ones (proxy.parameter_table).

Before, every parameter outside a short list was refused (42704), and in the startup
packet ended the connection: asyncpg's ``server_settings={"jit": "off"}``, ``SET
work_mem = '64MB'``, ``-c myapp.tenant=acme``. Now they are checked and shown as the
PostgreSQL test server checks and shows them (same SHOW text, same SQLSTATE and
message), kept through transactions as it keeps them, and otherwise ignored; the
parameters that would change answers are refused with the reason. Real components:
DuckDB, the state store, the PostgreSQL server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import psycopg
import pytest

from accountant import AnalystBudget, Epsilon
from proxy.asker import Asker
from proxy.catalog.translate import SessionValues, translate
from proxy.parameter_table import PARAMETERS
from proxy.pipeline import Pipeline
from proxy.seam import QueryError
from proxy.session import AnalystSession
from tests.proxy.local_pipeline import local_pipeline

Outcome = tuple[str, ...]  # ("ok", last SHOW's value) or ("error", sqlstate, message[, hint])
#: The parameters generated from PostgreSQL's pg_settings that dpproxy keeps and ignores;
#: those it keeps at one value; those it handles itself.
SETTINGS = {
    name: p for name, p in PARAMETERS.items() if p.source == "pg_settings" and p.refused is None
}
REFUSED = {name for name, p in PARAMETERS.items() if p.refused is not None}
HANDLED = {name for name, p in PARAMETERS.items() if p.source == "dpproxy"}


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    made = local_pipeline(tmp_path_factory.mktemp("pg_settings"))
    yield made
    made.ledger.close()


def session(pipeline: Pipeline) -> AnalystSession:
    budget = AnalystBudget(total=Epsilon(10), default_per_query=Epsilon(1))
    return AnalystSession(pipeline, Asker("alice", budget, "127.0.0.1"), "test")


def in_dpproxy(
    pipeline: Pipeline, statements: list[str], s: AnalystSession | None = None
) -> Outcome:
    s = s or session(pipeline)

    async def go() -> Outcome:
        shown: Outcome = ("ok",)
        for sql in statements:
            result = await s.execute(sql)
            if result.rows:
                shown = ("ok", str(result.rows[0][0]))
        return shown

    try:
        return asyncio.run(go())
    except QueryError as error:
        return ("error", error.sqlstate, error.message, error.hint or "")


def in_postgresql(pg_dsn: str, statements: list[str], options: str = "") -> Outcome:
    with psycopg.connect(pg_dsn, autocommit=True, options=options) as conn:
        try:
            shown: Outcome = ("ok",)
            for sql in statements:
                cursor = conn.execute(sql)
                if cursor.description:
                    row = cursor.fetchone()
                    shown = ("ok", str(row[0] if row else None))
            return shown
        except psycopg.Error as error:
            return (
                "error",
                error.sqlstate or "",
                error.diag.message_primary or "",
                error.diag.message_hint or "",
            )


def same(expected: Outcome, got: Outcome) -> bool:
    """Equal, but for a hint dpproxy adds where PostgreSQL gives none."""
    if expected[:3] != got[:3]:
        return False
    return len(expected) < 4 or not expected[3] or expected[3] == got[3]


# Each case: statements separated by ";; ", the last one's SHOW compared.
CASES = [
    # booleans
    "SET jit = off;; SHOW jit",
    "SET jit TO 'OFF';; SHOW jit",
    "SET enable_seqscan = 'f';; SHOW enable_seqscan",
    "SET geqo = y;; SHOW geqo",
    "SET row_security = off;; SHOW row_security",
    "SET check_function_bodies = false;; SHOW check_function_bodies",
    "SET jit = maybe",
    "SET jit = ' on'",
    "SET geqo = 2",
    # integers: units, rounding, strtol's hexadecimal and octal, ranges
    "SET work_mem = '64MB';; SHOW work_mem",
    "SET work_mem = 64;; SHOW work_mem",
    "SET work_mem = '1.5MB';; SHOW work_mem",
    "SET work_mem = '  64  MB  ';; SHOW work_mem",
    "SET work_mem = '0x100';; SHOW work_mem",
    "SET work_mem = '0100';; SHOW work_mem",
    "SET work_mem = '.5MB';; SHOW work_mem",
    "SET work_mem = '1e3';; SHOW work_mem",
    "SET work_mem = 65.5;; SHOW work_mem",
    "SET work_mem = '1.999TB';; SHOW work_mem",
    "SET work_mem = abc",
    "SET work_mem = '64mb'",
    "SET work_mem = '08'",
    "SET work_mem = ' .5MB'",
    "SET work_mem = '10'",
    "SET work_mem = '100B'",
    "SET work_mem = '-0x40'",
    "SET work_mem = '2TB'",
    "SET work_mem = '99999999999999999999'",
    "SET work_mem = 1, 2",
    "SET maintenance_work_mem = '512MB';; SHOW maintenance_work_mem",
    "SET maintenance_work_mem = '1000kB'",
    "SET temp_buffers = 100;; SHOW temp_buffers",
    "SET temp_buffers = '801kB';; SHOW temp_buffers",
    "SET temp_buffers = 99",
    "SET effective_cache_size = 1000;; SHOW effective_cache_size",
    "SET effective_cache_size = '10GB';; SHOW effective_cache_size",
    "SET backend_flush_after = '3MB'",
    "SET log_parameter_max_length_on_error = -1;; SHOW log_parameter_max_length_on_error",
    "SET log_parameter_max_length_on_error = '1.5kB';; SHOW log_parameter_max_length_on_error",
    "SET idle_session_timeout = '30s';; SHOW idle_session_timeout",
    "SET idle_session_timeout = '1.5h';; SHOW idle_session_timeout",
    "SET idle_session_timeout = '1 fortnight'",
    "SET idle_session_timeout = -1",
    "SET tcp_keepalives_idle = '1500ms';; SHOW tcp_keepalives_idle",
    "SET tcp_user_timeout = '1min';; SHOW tcp_user_timeout",
    "SET commit_siblings = '4.5';; SHOW commit_siblings",
    "SET commit_siblings = '5kB'",
    "SET max_parallel_workers_per_gather = 0;; SHOW max_parallel_workers_per_gather",
    "SET max_parallel_workers_per_gather = 1025",
    "SET default_statistics_target = 0",
    "SET statement_timeout = '010';; SHOW statement_timeout",  # through the same reader
    "SET statement_timeout = '0.00001min';; SHOW statement_timeout",
    # reals
    "SET random_page_cost = 1.1;; SHOW random_page_cost",
    "SET random_page_cost = '0x1.8p1';; SHOW random_page_cost",
    "SET random_page_cost = ' 2 ';; SHOW random_page_cost",
    "SET seq_page_cost = 123456789;; SHOW seq_page_cost",
    "SET cpu_tuple_cost = 1e-9;; SHOW cpu_tuple_cost",
    "SET cursor_tuple_fraction = .5;; SHOW cursor_tuple_fraction",
    "SET jit_above_cost = -1;; SHOW jit_above_cost",
    "SET vacuum_cost_delay = '1.5ms';; SHOW vacuum_cost_delay",
    "SET vacuum_cost_delay = '0.1s';; SHOW vacuum_cost_delay",
    "SET random_page_cost = abc",
    "SET random_page_cost = -1",
    "SET random_page_cost = 'infinity'",
    "SET random_page_cost = 'nan'",
    "SET random_page_cost = '1e309'",
    "SET random_page_cost = '1e-320'",
    "SET random_page_cost = '1 ms'",
    "SET vacuum_cost_delay = '1min'",
    "SET geqo_selection_bias = 1.4",
    # enums, with PostgreSQL's hidden spellings
    "SET constraint_exclusion = yes;; SHOW constraint_exclusion",
    "SET synchronous_commit = 'OFF';; SHOW synchronous_commit",
    "SET synchronous_commit = 1;; SHOW synchronous_commit",
    "SET force_parallel_mode = 0;; SHOW force_parallel_mode",
    "SET plan_cache_mode = force_custom_plan;; SHOW plan_cache_mode",
    "SET password_encryption = md5;; SHOW password_encryption",
    "SET constraint_exclusion = bogus",
    "SET plan_cache_mode = 'on'",
    "SET stats_fetch_consistency = yes",
    # defaults, RESET, DEFAULT, transactions
    "SHOW work_mem",
    "SHOW effective_cache_size",
    "SHOW wal_sender_timeout",
    "SET work_mem = '16MB';; RESET work_mem;; SHOW work_mem",
    "SET SESSION work_mem TO '16MB';; SET work_mem TO DEFAULT;; SHOW work_mem",
    "BEGIN;; SET work_mem = '8MB';; SAVEPOINT s;; SET work_mem = '32MB';; "
    "ROLLBACK TO s;; SHOW work_mem",
    "BEGIN;; SET work_mem = '8MB';; ROLLBACK;; SHOW work_mem",
    "BEGIN;; SET LOCAL work_mem = '8MB';; COMMIT;; SHOW work_mem",
    "BEGIN;; SET jit = off;; COMMIT;; SHOW jit",
    "SET jit = off;; RESET ALL;; SHOW jit",
    # custom parameters: strings; once defined, empty when undone
    "SET myapp.tenant = 'acme';; SHOW myapp.tenant",
    "SET myapp.tenant = acme;; SHOW myapp.tenant",
    "SET myapp.n = 007;; SHOW myapp.n",
    "SET myapp.n = -1.5e3;; SHOW myapp.n",
    "SET a.b.c = 'deep';; SHOW a.b.c",
    "SET myapp.x = 1, 2",
    'SET "a.b-c" = 1',
    'SET "foo." = 1',
    'SET "foo.$a" = 1',
    "SHOW myapp.unset",
    "RESET myapp.reset;; SHOW myapp.reset",
    "SET myapp.t TO DEFAULT;; SHOW myapp.t",
    "BEGIN;; SET myapp.t = 'x';; ROLLBACK;; SHOW myapp.t",
    "BEGIN;; SET myapp.t = 'x';; COMMIT;; SHOW myapp.t",
    "SET myapp.t = 'a';; BEGIN;; SET LOCAL myapp.t = 'x';; COMMIT;; SHOW myapp.t",
    "SET LOCAL myapp.t = 1;; SHOW myapp.t",
    "SET myapp.t = 'x';; DISCARD ALL;; SHOW myapp.t",
    "BEGIN;; SET myapp.t = 'x';; SAVEPOINT s;; SET myapp.u = 'y';; ROLLBACK TO s;; SHOW myapp.u",
]


@pytest.mark.postgres
def test_values_are_checked_and_shown_as_postgresql_does(pipeline: Pipeline, pg_dsn: str) -> None:
    differences = []
    for case in CASES:
        statements = case.split(";; ")
        expected = in_postgresql(pg_dsn, statements)
        got = in_dpproxy(pipeline, statements)
        if not same(expected, got):
            differences.append((case, expected, got))
    assert differences == []


@pytest.mark.postgres
def test_the_table_is_postgresql_15s(pg_dsn: str) -> None:
    """Every user-settable parameter of PostgreSQL is accepted, refused with a reason, or
    handled on its own; the accepted ones have PostgreSQL's kind, unit, range, values and
    default (tcp_*: a Unix socket's 0; over TCP PostgreSQL shows the socket's values)."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT name, vartype, unit, min_val, max_val, enumvals, current_setting(name) "
            "FROM pg_settings WHERE context = 'user'"
        ).fetchall()
    user = {str(row[0]).lower(): row for row in rows}
    assert set(user) == (set(user) & HANDLED) | set(SETTINGS) | REFUSED
    assert not set(SETTINGS) & (REFUSED | HANDLED)
    for name, setting in SETTINGS.items():
        _, kind, unit, lowest, highest, values, default = user[name]
        assert (setting.kind, setting.unit) == (kind, unit), name
        if kind in ("integer", "real"):
            assert (f"{setting.lowest:g}", f"{setting.highest:g}") == (
                f"{float(lowest):g}",
                f"{float(highest):g}",
            ), name
        assert setting.visible == (tuple(values) if values else ()), name
        assert setting.default == ("0" if name.startswith("tcp_") else default), name


@pytest.mark.postgres
def test_refused_parameters_say_why_and_dpproxy_names_stay_strict(
    pipeline: Pipeline, pg_dsn: str
) -> None:
    # (SHOW, RESET and SET to the one value dpproxy keeps: tests/proxy/test_fixed_settings.py)
    for sql in ("SET transform_null_equals = on", "SET array_nulls = off", "SET exit_on_error = 1"):
        assert in_postgresql(pg_dsn, [sql])[0] == "ok", sql  # PostgreSQL takes it
        outcome = in_dpproxy(pipeline, [sql])
        assert outcome[:2] == ("error", "0A000"), outcome
        assert "dpproxy supports only" in outcome[2] and "leave" in outcome[3]
    unknown = in_dpproxy(pipeline, ["SET dpproxy.epsilonn = 1"])
    message = 'unrecognized configuration parameter "dpproxy.epsilonn"'
    assert unknown[:3] == ("error", "42704", message) and "dpproxy.epsilon" in unknown[3]
    for sql in ("SET session_replication_role = replica", "SET shared_buffers = '1GB'"):
        assert in_dpproxy(pipeline, [sql])[:2] == ("error", "42704"), sql


@pytest.mark.postgres
def test_startup_parameters_and_options_set_them(pipeline: Pipeline, pg_dsn: str) -> None:
    options = "-c work_mem=64MB -c myapp.tenant=acme -c enable-seqscan=off"
    s = session(pipeline)
    s.apply_startup_parameters({"user": "alice", "options": options, "jit": "off"})
    for name in ("work_mem", "myapp.tenant", "enable_seqscan"):
        statements = [f"SET {name} TO DEFAULT", f"SHOW {name}"]  # RESET: the startup value
        assert in_dpproxy(pipeline, statements, s) == in_postgresql(pg_dsn, statements, options)
    assert in_dpproxy(pipeline, ["SHOW jit"], s) == ("ok", "off")
    for bad in ({"work_mem": "lots"}, {"options": "-c jit=maybe"}, {"a.b-c": "1"}):
        with pytest.raises(QueryError) as caught:
            session(pipeline).apply_startup_parameters({"user": "alice", **bad})
        assert caught.value.sqlstate in ("22023", "42602"), caught.value.message


def test_show_all_current_setting_and_pg_settings_know_them(pipeline: Pipeline) -> None:
    s = session(pipeline)
    in_dpproxy(pipeline, ["SET work_mem = '64MB'", "SET myapp.tenant = 'acme'"], s)
    rows = asyncio.run(s.execute("SHOW ALL")).rows
    shown = {str(row[0]): row[1] for row in rows}
    assert shown["work_mem"] == "64MB" and shown["jit"] == "on"
    assert "myapp.tenant" not in shown  # custom parameters are not listed, as in PostgreSQL
    values = SessionValues("alice", "db", "15", {"work_mem": "64MB", "myapp.tenant": "acme"})
    for sql, wanted in [
        ("SELECT current_setting('myapp.tenant')", "'acme'"),
        ("SELECT current_setting('work_mem')", "'64MB'"),
        ("SELECT current_setting('myapp.other', true)", "CAST(NULL AS TEXT)"),
        ("SELECT setting FROM pg_settings", "'work_mem'"),
    ]:
        translation = translate(sql, values)
        assert translation is not None and wanted in translation.sql, (sql, translation)
    listing = translate("SELECT name FROM pg_settings", values)
    assert listing is not None and "myapp.tenant" not in listing.sql
