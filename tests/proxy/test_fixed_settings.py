"""PostgreSQL compatibility of parameters dpproxy keeps at one value, current_setting()
and the pg_settings view, compared with the PostgreSQL test server.

Before: SHOW and RESET of xmloption, transform_null_equals and the other parameters
dpproxy does not honour (refused in proxy.parameter_table) gave 0A000 where PostgreSQL shows and
resets the default, and SET to the value dpproxy behaves as anyway (pg_dump's ``SET
xmloption = content`` and ``SET default_tablespace = ''``) was refused too;
``current_setting(x, 'true')`` was refused (42704) and ``current_setting(NULL)`` was
refused where PostgreSQL answers NULL; pg_settings showed work_mem's setting as '4MB'
with no unit where PostgreSQL shows '4096' and 'kB'. Now they answer as PostgreSQL
does; SET to any other value is still refused (0A000), with the reason. Real
components: DuckDB, the state store, the catalog responder, the PostgreSQL server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import psycopg
import pytest

from accountant import AnalystBudget, Epsilon
from proxy.asker import Asker
from proxy.catalog.responder import CatalogResponder
from proxy.parameter_table import PARAMETERS
from proxy.pipeline import Pipeline
from proxy.seam import QueryError
from proxy.session import AnalystSession
from tests.proxy.local_pipeline import local_pipeline

pytestmark = pytest.mark.postgres

Outcome = tuple[object, ...]  # ("ok", rows) or ("error", sqlstate, message)
#: The parameters dpproxy keeps at one value, and the others generated from pg_settings.
FIXED = {name: p for name, p in PARAMETERS.items() if p.refused is not None}
SETTINGS = {
    name: p for name, p in PARAMETERS.items() if p.source == "pg_settings" and p.refused is None
}


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    made = local_pipeline(tmp_path_factory.mktemp("fixed_settings"))
    yield made
    made.ledger.close()


@pytest.fixture(scope="module")
def responder(pipeline: Pipeline) -> Iterator[CatalogResponder]:
    made = CatalogResponder(pipeline.catalog)
    yield made
    made.close()


def in_dpproxy(
    pipeline: Pipeline, responder: CatalogResponder, statements: list[str], options: str = ""
) -> Outcome:
    budget = AnalystBudget(total=Epsilon(10), default_per_query=Epsilon(1))
    s = AnalystSession(
        pipeline, Asker("alice", budget, "127.0.0.1"), "test", responders=(responder,)
    )

    async def go() -> Outcome:
        rows: list[tuple[object, ...]] = []
        for sql in statements:
            rows = [tuple(row) for row in (await s.execute(sql)).rows]
        return ("ok", rows)

    try:
        s.apply_startup_parameters({"user": "alice", "options": options})
        return asyncio.run(go())
    except QueryError as error:
        return ("error", error.sqlstate, error.message)


def in_postgresql(pg_dsn: str, statements: list[str], options: str = "") -> Outcome:
    try:
        with psycopg.connect(pg_dsn, autocommit=True, options=options) as conn:
            rows: list[tuple[object, ...]] = []
            for sql in statements:
                cursor = conn.execute(sql)
                rows = [tuple(row) for row in cursor.fetchall()] if cursor.description else []
            return ("ok", rows)
    except psycopg.Error as error:
        return ("error", error.sqlstate or "", error.diag.message_primary or "")


def differences(
    pipeline: Pipeline, responder: CatalogResponder, pg_dsn: str, cases: list[str]
) -> list[tuple[str, Outcome, Outcome]]:
    found = []
    for case in cases:
        statements = case.split(";; ")
        expected = in_postgresql(pg_dsn, statements)
        got = in_dpproxy(pipeline, responder, statements)
        if expected != got:
            found.append((case, expected, got))
    return found


def boot_values(pg_dsn: str) -> dict[str, tuple[str, str]]:
    """PostgreSQL's built-in default (boot_val; reset_val for timezone_abbreviations,
    whose default is set at start) and kind of each parameter: what SHOW gives without a
    configuration file (the test server's sets default_text_search_config)."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT name, coalesce(boot_val, reset_val), vartype FROM pg_settings"
        ).fetchall()
    return {str(name): (str(boot), str(kind)) for name, boot, kind in rows}


def test_fixed_parameters_show_and_reset_postgresql_s_default(
    pipeline: Pipeline, responder: CatalogResponder, pg_dsn: str
) -> None:
    boot = boot_values(pg_dsn)
    for name, setting in FIXED.items():
        assert (setting.default, setting.kind) == boot[name], name
        for statements in ([f"SHOW {name}"], [f"RESET {name}", f"SHOW {name}"]):
            got = in_dpproxy(pipeline, responder, statements)
            assert got == ("ok", [(setting.default,)]), (name, got)
        got = in_dpproxy(pipeline, responder, [f"SELECT current_setting('{name}')"])
        assert got == ("ok", [(setting.default,)]), (name, got)
    # Every other default is PostgreSQL's too (this server's configuration file sets
    # default_text_search_config).
    cases = [
        f"RESET {name};; SHOW {name}" for name in FIXED if name != "default_text_search_config"
    ]
    assert differences(pipeline, responder, pg_dsn, cases) == []


# SET to the value dpproxy behaves as: accepted and shown as PostgreSQL shows it. pg_dump's
# preamble sets xmloption, default_tablespace and row_security.
ACCEPTED = [
    "SET xmloption = content;; SHOW xmloption",
    "SET xmloption TO 'CONTENT';; SHOW xmloption",
    "SET default_tablespace = '';; SHOW default_tablespace",
    "SET transform_null_equals = off;; SHOW transform_null_equals",
    "SET transform_null_equals = 'false';; SHOW transform_null_equals",
    "SET array_nulls = on;; SHOW array_nulls",
    "SET quote_all_identifiers = no;; SHOW quote_all_identifiers",
    "SET backslash_quote = safe_encoding;; SHOW backslash_quote",
    "SET default_text_search_config = 'pg_catalog.simple';; SHOW default_text_search_config",
    "SET default_text_search_config = 'Simple';; SHOW default_text_search_config",
    "SET gin_fuzzy_search_limit = '0x0';; SHOW gin_fuzzy_search_limit",
    "SET xmlbinary = base64;; SHOW xmlbinary",
    "SET exit_on_error = 0;; SHOW exit_on_error",
    "SET restrict_nonsystem_relation_kind = '';; SHOW restrict_nonsystem_relation_kind",
    "SET temp_tablespaces = '';; SHOW temp_tablespaces",
    "SET local_preload_libraries = '';; SHOW local_preload_libraries",
    "SET default_transaction_deferrable = off;; SHOW default_transaction_deferrable",
    "SET debug_pretty_print = on;; SHOW debug_pretty_print",
    "SET trace_sort = off;; SHOW trace_sort",
    "BEGIN;; SET LOCAL xmloption = content;; COMMIT;; SHOW xmloption",
    "SET xmloption TO DEFAULT;; SHOW xmloption",
    # Values PostgreSQL refuses are refused alike (22023, its message).
    "SET xmloption = bogus",
    "SET transform_null_equals = maybe",
    "SET gin_fuzzy_search_limit = -1",
    "SET xmloption = content, document",
]


def test_set_to_dpproxy_s_own_value_is_accepted_as_postgresql_does(
    pipeline: Pipeline, responder: CatalogResponder, pg_dsn: str
) -> None:
    assert differences(pipeline, responder, pg_dsn, ACCEPTED) == []


# Values PostgreSQL takes that dpproxy does not behave as: refused, with the reason and
# the value it takes; nothing changes.
REFUSED = [
    ("SET xmloption = document", "dpproxy supports only xmloption = content, not document"),
    ("SET transform_null_equals = on", "dpproxy supports only transform_null_equals = off"),
    ("SET array_nulls = off", "dpproxy supports only array_nulls = on, not off"),
    ("SET backslash_quote = on", "dpproxy supports only backslash_quote = safe_encoding"),
    ("SET quote_all_identifiers = 1", "dpproxy supports only quote_all_identifiers = off"),
    ("SET default_text_search_config = english", "pg_catalog.simple', not english"),
    ("SET gin_fuzzy_search_limit = 10", "dpproxy supports only gin_fuzzy_search_limit = 0"),
    ("SET default_tablespace = pg_default", "dpproxy supports only default_tablespace = ''"),
    ("SET exit_on_error = on", "dpproxy supports only exit_on_error = off"),
    ("SET timezone_abbreviations = 'Default'", 'parameter "timezone_abbreviations"'),
    ("SET timezone_abbreviations = 'Australia'", 'parameter "timezone_abbreviations"'),
    ("SET restrict_nonsystem_relation_kind = view", "relation_kind = '', not view"),
]


@pytest.mark.parametrize(("sql", "message"), REFUSED)
def test_set_to_another_value_is_refused_with_the_reason(
    pipeline: Pipeline, responder: CatalogResponder, pg_dsn: str, sql: str, message: str
) -> None:
    name = sql.split()[1]
    assert in_postgresql(pg_dsn, [sql])[0] == "ok"  # PostgreSQL takes it
    got = in_dpproxy(pipeline, responder, [sql])
    assert got[:2] == ("error", "0A000") and message in str(got[2]), got
    # Nothing changes: in a transaction block, the refusal aborts it; ROLLBACK, and the
    # value is still dpproxy's.
    statements = ["BEGIN", sql]
    assert in_dpproxy(pipeline, responder, statements)[:2] == ("error", "0A000")
    budget = AnalystBudget(total=Epsilon(10), default_per_query=Epsilon(1))
    s = AnalystSession(pipeline, Asker("alice", budget, "127.0.0.1"), "test")
    with pytest.raises(QueryError):
        asyncio.run(s.execute(sql))
    assert asyncio.run(s.execute(f"SHOW {name}")).rows == ((FIXED[name].default,),)
    # At connect (PGOPTIONS), the same refusal ends the connection, as an unknown
    # parameter does.
    value = sql.split("=", 1)[1].strip().strip("'")
    refused = in_dpproxy(pipeline, responder, ["SELECT 1"], options=f"-c {name}={value}")
    assert refused[:2] == ("error", "0A000"), refused


def test_accepted_values_at_connect(
    pipeline: Pipeline, responder: CatalogResponder, pg_dsn: str
) -> None:
    options = "-c xmloption=content -c transform_null_equals=off -c exit_on_error=0"
    statements = ["SELECT current_setting('xmloption'), current_setting('exit_on_error')"]
    expected = in_postgresql(pg_dsn, statements, options)
    assert expected == ("ok", [("content", "off")])
    assert in_dpproxy(pipeline, responder, statements, options) == expected


CURRENT_SETTING = [
    "SELECT current_setting('nope.x', 'true') AS v",
    "SELECT current_setting('nope.x', 'on') AS v",
    "SELECT current_setting('nope.x', ' T ') AS v",
    "SELECT current_setting('nope.x', true) AS v",
    "SELECT current_setting('work_mem', 'false') AS v",
    "SELECT current_setting(NULL) AS v",
    "SELECT current_setting(NULL::text, true) AS v",
    "SELECT current_setting('work_mem', NULL) AS v",
    "SELECT current_setting('nope.x', NULL) AS v",
    "SELECT current_setting('nope.x', false) AS v",
    "SELECT current_setting('nope.x', 'no') AS v",
    "SELECT current_setting('nope.x', 'maybe') AS v",
    "SET myapp.t = 'acme';; SELECT current_setting('myapp.t', 'true') AS v",
]


def test_current_setting_takes_missing_ok_and_nulls_as_postgresql_does(
    pipeline: Pipeline, responder: CatalogResponder, pg_dsn: str
) -> None:
    assert differences(pipeline, responder, pg_dsn, CURRENT_SETTING) == []


def pg_settings_rows(names: list[str]) -> str:
    listed = ", ".join(f"'{name}'" for name in names)
    return f"SELECT name, setting, unit FROM pg_settings WHERE name IN ({listed}) ORDER BY name"


def test_pg_settings_shows_setting_and_unit_as_postgresql_does(
    pipeline: Pipeline, responder: CatalogResponder, pg_dsn: str
) -> None:
    """Each of SETTINGS, by default and after SET (tcp_*: PostgreSQL shows the socket's
    values over TCP), and the timeouts; SHOW still shows '4MB'."""
    names = sorted(name for name in SETTINGS if not name.startswith("tcp_"))
    names += ["statement_timeout", "lock_timeout", "idle_in_transaction_session_timeout"]
    sets = [
        "SET work_mem = '64MB'",
        "SET maintenance_work_mem = '1GB'",
        "SET effective_cache_size = '10GB'",
        "SET temp_buffers = '801kB'",
        "SET vacuum_cost_delay = '1.5ms'",
        "SET statement_timeout = '90s'",
        "SET idle_session_timeout = '1.5h'",
        "SET log_parameter_max_length_on_error = -1",
        "SET random_page_cost = 1.1",
        "SET jit = off",
    ]
    cases = [
        pg_settings_rows(names),
        ";; ".join([*sets, pg_settings_rows(names)]),
        "SET work_mem = '64MB';; SHOW work_mem",
        "SELECT unit FROM pg_settings WHERE name = 'work_mem'",
    ]
    assert differences(pipeline, responder, pg_dsn, cases) == []
