"""current_setting('dpproxy.epsilon') and the other dpproxy.* settings in catalog queries
give what SHOW gives, after SET, SET LOCAL, ROLLBACK and RESET too, and pg_settings has a
row for each; current_setting('dpproxy.budget') is refused with a pointer to SHOW, and
set_config() stays refused. Before, current_setting('dpproxy.epsilon') was refused as an
unrecognized parameter (42704) while SHOW answered it.

A real `dpproxy serve` on either backend, with psycopg (simple and extended protocol) and
psql. current_setting() is answered by dpproxy from the session: in a query of protected
data it is refused before anything runs (nothing is charged).
"""

from __future__ import annotations

import psycopg
import pytest

from tests.integration.server import RunningServer

pytestmark = pytest.mark.integration
PATIENTS = 100
DIRECTORY_PREFIX = "dpsettings-"

Connection = psycopg.Connection[tuple[object, ...]]

#: A value of each dpproxy.* setting other than its default, as SET takes it and SHOW
#: shows it.
OTHER_VALUES = {
    "dpproxy.epsilon": "0.25",
    "dpproxy.delta": "1e-10",
    "dpproxy.mechanism": "gaussian",
    "dpproxy.report": "columns",
    "dpproxy.bias_check": "on",
}


def connect(server: RunningServer) -> Connection:
    return psycopg.connect(server.dsn("alice"), autocommit=True, connect_timeout=10)


def dpproxy_names(conn: Connection) -> list[str]:
    """The dpproxy.* settings SHOW ALL lists."""
    rows = conn.execute("SHOW ALL").fetchall()
    return sorted(str(row[0]) for row in rows if str(row[0]).startswith("dpproxy."))


def assert_catalog_gives_what_show_gives(conn: Connection, names: list[str]) -> dict[str, str]:
    shown: dict[str, str] = {}
    settings = dict(
        conn.execute("SELECT name, setting FROM pg_settings WHERE name LIKE 'dpproxy.%'").fetchall()
    )
    for name in names:
        (value,) = conn.execute(f"SHOW {name}").fetchone() or ("?",)
        assert isinstance(value, str)
        given = conn.execute(
            f"SELECT current_setting('{name}'), current_setting('{name}', true), "
            f"pg_catalog.current_setting('{name.upper()}', 'on')"
        ).fetchone()
        assert given == (value, value, value), name
        # Extended protocol: the name as a parameter (as SQLAlchemy sends it).
        assert conn.execute("SELECT current_setting(%s)", [name]).fetchone() == (value,)
        assert settings.get(name) == value, name
        shown[name] = value
    return shown


def test_current_setting_gives_what_show_gives_for_every_dpproxy_setting(
    server: RunningServer,
) -> None:
    with connect(server) as conn:
        names = dpproxy_names(conn)
        assert names == sorted(OTHER_VALUES)  # every one SHOW knows is tested
        defaults = assert_catalog_gives_what_show_gives(conn, names)
        for name, value in OTHER_VALUES.items():
            assert defaults[name] != value
            conn.execute(f"SET {name} = '{value}'")
        assert assert_catalog_gives_what_show_gives(conn, names) == OTHER_VALUES
        for name in names:
            conn.execute(f"RESET {name}")
        assert assert_catalog_gives_what_show_gives(conn, names) == defaults
        # SET LOCAL in a transaction block, then ROLLBACK: back to the defaults.
        conn.execute("BEGIN")
        conn.execute("SET LOCAL dpproxy.epsilon = 0.125")
        assert conn.execute("SELECT current_setting('dpproxy.epsilon')").fetchone() == ("0.125",)
        conn.execute("ROLLBACK")
        assert assert_catalog_gives_what_show_gives(conn, names) == defaults
        conn.execute("SET dpproxy.epsilon = 0.5")
        conn.execute("RESET ALL")
        assert assert_catalog_gives_what_show_gives(conn, names) == defaults


def test_psql_sees_its_set_in_current_setting(server: RunningServer) -> None:
    done = server.psql(
        "alice",
        "SET dpproxy.epsilon = 0.3",
        "SELECT current_setting('dpproxy.epsilon') AS e, current_setting('dpproxy.report') AS r",
    )
    assert done.returncode == 0, done.stderr
    lines = [line.strip() for line in done.stdout.splitlines()]
    assert "0.3 | notice" in lines, done.stdout


def test_the_budget_is_shown_by_show_only(server: RunningServer) -> None:
    with connect(server) as conn:
        for sql in (
            "SELECT current_setting('dpproxy.budget')",
            "SELECT current_setting('dpproxy.budget', true)",
            "SELECT name FROM pg_settings WHERE current_setting('dpproxy.budget') <> ''",
        ):
            with pytest.raises(psycopg.errors.FeatureNotSupported) as refused:
                conn.execute(sql)
            assert "dpproxy.budget" in str(refused.value)
            assert "SHOW dpproxy.budget" in (refused.value.diag.message_hint or "")
        (budget,) = conn.execute("SHOW dpproxy.budget").fetchone() or ("",)
        assert "left of" in str(budget)
        rows = conn.execute("SELECT name FROM pg_settings WHERE name = 'dpproxy.budget'")
        assert rows.fetchall() == []  # as SHOW ALL, which does not list it either


def test_set_config_is_refused_and_settings_never_reach_the_database(
    server: RunningServer,
) -> None:
    with connect(server) as conn:
        for sql in (
            "SELECT set_config('dpproxy.epsilon', '5', false)",
            "SELECT pg_catalog.set_config('myapp.x', '1', false)",
        ):
            with pytest.raises(psycopg.errors.FeatureNotSupported) as refused:
                conn.execute(sql)
            assert "set_config" in str(refused.value)
            assert "SET" in (refused.value.diag.message_hint or "")
        assert conn.execute("SHOW dpproxy.epsilon").fetchone() == ("1",)
        before = conn.execute("SHOW dpproxy.budget").fetchone()
        for sql in (
            "SELECT current_setting('dpproxy.epsilon'), COUNT(*) FROM visits",
            "SELECT COUNT(*) FROM visits WHERE current_setting('dpproxy.epsilon') = '1'",
            "SELECT set_config('dpproxy.epsilon', '5', false), COUNT(*) FROM visits",
        ):
            with pytest.raises(psycopg.errors.FeatureNotSupported, match="not allowed"):
                conn.execute(sql)
        assert conn.execute("SHOW dpproxy.budget").fetchone() == before  # nothing ran
