"""`dpproxy demo` on a directory that holds a demo already: the demo is reused exactly as it
is (its configuration, data and state store untouched), and options that contradict it
(another engine, PostgreSQL database or schema, number of patients or seed) are refused
with what is there and how to make a new demo, never by rewriting it. Run as a user runs
it: the real command in a subprocess, on real files and the test PostgreSQL server."""

from __future__ import annotations

import os
from pathlib import Path

import psycopg
import pytest

from tests.integration.server import dpproxy

PATIENTS = "50"


def _files(directory: Path) -> dict[str, tuple[bytes, int]]:
    """Every file of the demo with its bytes and modification time (nothing may change)."""
    return {
        p.name: (p.read_bytes(), os.stat(p).st_mtime_ns)
        for p in sorted(directory.iterdir())
        if p.is_file() and not p.name.startswith("state.sqlite-")  # (SQLite's WAL files)
    }


def _demo(directory: Path, *options: str) -> None:
    made = dpproxy("demo", "--dir", str(directory), "--no-serve", *options)
    assert made.returncode == 0, made.stderr
    # The state store holds budgets and an audit log, as after the demo was used.
    shown = dpproxy("budget", "show", "--config", str(directory / "dpproxy.toml"))
    assert shown.returncode == 0 and "alice" in shown.stdout, shown.stderr


def _refused(directory: Path, *options: str) -> str:
    """The refusal of ``dpproxy demo --dir DIRECTORY OPTIONS``, which changes nothing."""
    before = _files(directory)
    result = dpproxy("demo", "--dir", str(directory), "--no-serve", *options)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    assert _files(directory) == before
    assert "for a new demo, give another --dir" in result.stderr
    assert "never rewrites an existing demo" in result.stderr
    return result.stderr


@pytest.fixture
def pg_demo(tmp_path: Path, pg_dsn: str, pg_schema: str) -> Path:
    directory = tmp_path / "pgdemo"
    _demo(directory, "--postgres", pg_dsn, "--schema", pg_schema, "--patients", PATIENTS)
    return directory


def test_a_postgres_demo_is_reused_by_demo_without_postgres(
    pg_demo: Path, pg_dsn: str, pg_schema: str
) -> None:
    """Before: a new demo.duckdb, and dpproxy.toml rewritten to engine "duckdb"."""
    before = _files(pg_demo)
    config = (pg_demo / "dpproxy.toml").read_text()
    assert 'engine = "postgres"' in config and f'schema = "{pg_schema}"' in config
    for options in ((), ("--postgres", pg_dsn, "--schema", pg_schema), ("--patients", PATIENTS)):
        result = dpproxy("demo", "--dir", str(pg_demo), "--no-serve", *options)
        assert result.returncode == 0, result.stderr
        assert f"reusing the demo in {pg_demo} as it is" in result.stderr
        assert f"(schema {pg_schema})" in result.stderr
        assert _files(pg_demo) == before  # no demo.duckdb, the configuration untouched
        assert not (pg_demo / "demo.duckdb").exists()
    # The data in PostgreSQL was not loaded again either.
    with psycopg.connect(pg_dsn) as conn:
        row = conn.execute(f'SELECT count(*) FROM "{pg_schema}".patients').fetchone()
    assert row == (int(PATIENTS),)


def test_another_postgres_database_or_schema_is_refused(
    pg_demo: Path, pg_dsn: str, pg_schema: str
) -> None:
    other = pg_dsn.rsplit("/", 1)[0] + "/another_database"
    message = _refused(pg_demo, "--postgres", other, "--schema", pg_schema)
    assert "holds a demo served from PostgreSQL" in message
    assert "--postgres names another database" in message
    message = _refused(pg_demo, "--postgres", pg_dsn)  # --schema public by default
    assert f"holds a demo in PostgreSQL schema {pg_schema}" in message
    assert f"give --schema {pg_schema}" in message


def test_options_that_contradict_a_duckdb_demo_are_refused(tmp_path: Path, pg_dsn: str) -> None:
    """Before: --postgres was ignored, --patients and --seed dropped, all silently."""
    directory = tmp_path / "demo"
    _demo(directory, "--patients", PATIENTS, "--seed", "7")
    message = _refused(directory, "--postgres", pg_dsn)
    assert "holds a demo served from DuckDB" in message and "leave out --postgres" in message
    message = _refused(directory, "--patients", "60")
    assert "holds a demo of 50 patients, and --patients 60 asks for another" in message
    message = _refused(directory, "--seed", "8")
    assert "holds a demo made with --seed 7, and --seed 8" in message
    # What agrees with the demo is fine: it is reused.
    before = _files(directory)
    result = dpproxy("demo", "--dir", str(directory), "--no-serve", "--patients", "50")
    assert result.returncode == 0 and "reusing the demo" in result.stderr, result.stderr
    result = dpproxy("demo", "--dir", str(directory), "--no-serve", "--seed", "7")
    assert result.returncode == 0, result.stderr
    assert _files(directory) == before


def test_a_demo_without_its_recorded_size_is_checked_against_its_data(tmp_path: Path) -> None:
    """A demo made before dpproxy recorded --patients and --seed in its configuration: the
    patients are counted in its DuckDB file; its seed cannot be told, so --seed is refused."""
    directory = tmp_path / "demo"
    _demo(directory, "--patients", PATIENTS)
    config = directory / "dpproxy.toml"
    lines = config.read_text().splitlines(keepends=True)
    assert lines[1].startswith("# Demo data: 50 patients, seed ")
    config.write_text("".join(lines[:1] + lines[2:]))
    message = _refused(directory, "--patients", "10000")
    assert "holds a demo of 50 patients, and --patients 10,000" in message
    message = _refused(directory, "--seed", "1")
    assert "whose seed its configuration does not record" in message
    result = dpproxy("demo", "--dir", str(directory), "--no-serve", "--patients", PATIENTS)
    assert result.returncode == 0, result.stderr


def test_a_duckdb_demo_whose_database_is_gone_is_not_made_again(tmp_path: Path) -> None:
    """Before: a new database and a new configuration, next to the old state store."""
    directory = tmp_path / "demo"
    _demo(directory, "--patients", PATIENTS)
    (directory / "demo.duckdb").unlink()
    before = _files(directory)
    result = dpproxy("demo", "--dir", str(directory), "--no-serve")
    assert result.returncode == 2, result.stderr
    assert "demo.duckdb, which is missing; restore that file" in result.stderr
    assert "give another --dir for a new demo" in result.stderr
    assert _files(directory) == before and not (directory / "demo.duckdb").exists()
