"""COPY (query) TO STDOUT through a real `dpproxy serve`, on DuckDB and on PostgreSQL: psql's
``\\copy (SELECT …) TO 'file' CSV HEADER``, psycopg's ``cursor.copy`` (in a transaction
block, as psycopg sends it), pgJDBC's CopyManager, libpq's extended protocol, the charge and
audit record of the query, a COPY refused for free, and answers written byte for byte as
PostgreSQL writes them."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.integration.server import PASSWORDS, RunningServer, dpproxy_in_process

pytestmark = pytest.mark.integration

PATIENTS = 400
DIRECTORY_PREFIX = "copy-"
QUERY = "SELECT sex, COUNT(*) AS n FROM patients GROUP BY sex"
JDBC_JAR = Path("/usr/share/java/postgresql.jar")
JAVA_SOURCE = Path(__file__).with_name("CopyOut.java")
#: Answered by dpproxy's catalog (no table): the same values as PostgreSQL's.
CONSTANTS = (
    "SELECT E'a\\tb\\\\c\\nd\\re' AS x, NULL::int AS y, 1.5::float8 AS f, 0.1::float8 AS g, "
    "DATE '2024-01-02' AS d, TIMESTAMP '2024-01-02 03:04:05.5' AS ts, 'é,\"q\" ✓' AS u, "
    "true AS b, 12.50::numeric AS n, INTERVAL '1 day 2 hours' AS i, '' AS e, '\\N' AS s"
)


def spent(server: RunningServer) -> Decimal:
    shown = dpproxy_in_process("budget", "show", "alice", "--json", "--config", str(server.config))
    assert shown.returncode == 0, shown.stderr
    return Decimal(json.loads(shown.stdout)[0]["spent"])


def records(server: RunningServer) -> list[dict[str, Any]]:
    exported = dpproxy_in_process(
        "audit", "export", "--analyst", "alice", "--format", "jsonl", "--config", str(server.config)
    )
    assert exported.returncode == 0, exported.stderr
    return [json.loads(line) for line in exported.stdout.splitlines()]


def words(sql: str) -> list[str]:
    """``sql``'s tokens: psql sends \\copy's query with a space between each two."""
    return re.findall(r"\w+|[^\w\s]", sql)


def copied(pgconn: psycopg.pq.abc.PGconn) -> tuple[bytes, bytes | None]:
    """The data of the COPY that ``pgconn`` began, and its CommandComplete's tag."""
    data = b""
    while (block := pgconn.get_copy_data(0))[0] >= 0:
        data += bytes(block[1])
    done = pgconn.get_result()
    assert done is not None and done.status == psycopg.pq.ExecStatus.COMMAND_OK
    while pgconn.get_result() is not None:  # the end of the command
        pass
    return data, done.command_status


def test_psql_copy_to_a_file_with_a_header(server: RunningServer, tmp_path: Path) -> None:
    before, audited = spent(server), len(records(server))
    answer = tmp_path / "answer.csv"
    shown = server.psql("alice", f"\\copy ({QUERY}) TO '{answer}' CSV HEADER")
    assert shown.returncode == 0, shown.stderr
    assert "COPY 2" in shown.stdout
    assert "this answer cost ε=1" in shown.stderr  # the NOTICE, as for the SELECT
    with answer.open(newline="") as file:
        rows = list(csv.reader(file))
    assert rows[0] == ["sex", "n"]
    assert sorted(row[0] for row in rows[1:]) == ["F", "M"]
    assert all(100 < int(row[1]) < 300 for row in rows[1:]), rows
    assert spent(server) - before == 1
    (record,) = records(server)[audited:]
    assert record["decision"] == "accepted" and Decimal(record["epsilon"]) == 1
    assert words(record["sql"]) == words(QUERY)  # the query, as if sent alone


def test_psycopg_copy_in_a_transaction_block(server: RunningServer) -> None:
    before, audited = spent(server), len(records(server))
    with psycopg.connect(server.dsn("alice")) as conn:  # psycopg sends BEGIN first
        with conn.cursor() as cursor:
            with cursor.copy(f"COPY ({QUERY}) TO STDOUT") as copy:
                copy.set_types(["text", "int8"])
                rows = sorted(copy.rows())
            assert cursor.rowcount == 2
            assert conn.info.transaction_status is psycopg.pq.TransactionStatus.INTRANS
            with cursor.copy(f"COPY ({QUERY} ORDER BY sex) TO STDOUT (FORMAT csv)") as copy:
                text = b"".join(bytes(block) for block in copy).decode()
        conn.commit()
    assert [row[0] for row in rows] == ["F", "M"] and all(isinstance(r[1], int) for r in rows)
    assert re.fullmatch(r"F,\d+\nM,\d+\n", text), text
    assert spent(server) - before == 2
    assert [r["decision"] for r in records(server)[audited:]] == ["accepted", "accepted"]


def test_pgjdbc_copy_manager(server: RunningServer, tmp_path: Path) -> None:
    """pgJDBC's CopyManager.copyOut (JDBC tools' export), in autocommit mode."""
    javac = shutil.which("javac")
    if javac is None or not JDBC_JAR.exists():
        message = "needs javac and libpostgresql-jdbc-java (/usr/share/java/postgresql.jar)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    compile_it = [javac, "-cp", str(JDBC_JAR), "-d", str(tmp_path), str(JAVA_SOURCE)]
    subprocess.run(compile_it, check=True, timeout=120)
    before, audited = spent(server), len(records(server))
    url = f"jdbc:postgresql://127.0.0.1:{server.port}/demo?sslmode=disable"
    sql = f"COPY ({QUERY} ORDER BY sex) TO STDOUT (FORMAT csv, HEADER)"
    result = subprocess.run(
        ["java", "-cp", f"{tmp_path}:{JDBC_JAR}", "CopyOut", url, "alice", PASSWORDS["alice"], sql],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert re.fullmatch(r"rows 2\nsex,n\nF,\d+\nM,\d+\n", result.stdout), result.stdout
    assert spent(server) - before == 1
    (record,) = records(server)[audited:]
    assert (record["decision"], record["sql"]) == ("accepted", f"{QUERY} ORDER BY sex")


def test_libpq_extended_protocol(server: RunningServer, pg_dsn: str) -> None:
    """Parse, Bind, Describe, Execute, Sync of a COPY: the same messages as PostgreSQL's."""
    sql = f"COPY ({CONSTANTS}) TO STDOUT (FORMAT csv, HEADER)"
    answers = []
    for dsn in (server.dsn("alice"), pg_dsn):
        with psycopg.connect(dsn, autocommit=True) as conn:
            pgconn = conn.pgconn
            result = pgconn.exec_params(sql.encode(), [])
            assert result.status == psycopg.pq.ExecStatus.COPY_OUT, result.get_error_message()
            shape = (result.nfields, result.binary_tuples, result.fformat(0))
            answers.append((shape, *copied(pgconn)))
    assert answers[0] == answers[1]
    assert answers[0][2] == b"COPY 1"
    # A COPY takes no parameters: PostgreSQL's Bind of one fails (client-side binding,
    # as psycopg's cursor.copy does, is the way).
    for dsn in (server.dsn("alice"), pg_dsn):
        with psycopg.connect(dsn, autocommit=True) as conn:
            sql = "COPY (SELECT $1::int AS a) TO STDOUT"
            result = conn.pgconn.exec_params(sql.encode(), [b"1"])
            assert result.status == psycopg.pq.ExecStatus.FATAL_ERROR
            assert result.error_field(psycopg.pq.DiagnosticField.SQLSTATE) == b"08P01"


@pytest.mark.parametrize(
    "options",
    ["", "CSV HEADER", "(FORMAT csv, FORCE_QUOTE *, NULL 'NULL', DELIMITER ';')", "HEADER"],
)
def test_answers_written_as_postgresql_writes_them(
    server: RunningServer, pg_dsn: str, options: str
) -> None:
    """The same COPY of the same values (a catalog answer of constants), through dpproxy
    and on PostgreSQL: the same bytes, columns and tag."""
    sql = f"COPY ({CONSTANTS}) TO STDOUT {options}"
    answers = []
    for dsn in (server.dsn("alice"), pg_dsn):
        with psycopg.connect(dsn, autocommit=True) as conn:
            result = conn.pgconn.exec_(sql.encode())
            assert result.status == psycopg.pq.ExecStatus.COPY_OUT, result.get_error_message()
            answers.append((result.nfields, *copied(conn.pgconn)))
    assert answers[0] == answers[1]
    assert answers[0][0] == 12


def test_refused_copies_cost_nothing(server: RunningServer, tmp_path: Path) -> None:
    before, audited = spent(server), len(records(server))
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        with (
            pytest.raises(psycopg.errors.FeatureNotSupported) as table,
            conn.cursor() as cursor,
            cursor.copy("COPY patients TO STDOUT") as copy,
        ):
            list(copy)
        assert "would release its rows" in (table.value.diag.message_primary or "")
        assert "COPY (SELECT" in (table.value.diag.message_hint or "")
        with (
            pytest.raises(psycopg.errors.FeatureNotSupported) as rows,
            conn.cursor() as cursor,
            cursor.copy("COPY (SELECT * FROM patients) TO STDOUT CSV") as copy,
        ):
            list(copy)
        assert "individual rows" in (rows.value.diag.message_primary or "")
        conn.execute("SELECT 1")  # the session goes on
    shown = server.psql("alice", f"\\copy patients TO '{tmp_path / 'rows.csv'}' CSV HEADER")
    assert shown.returncode != 0 and "would release its rows" in shown.stderr
    assert spent(server) == before
    refused = records(server)[audited:]
    assert [(r["decision"], r["sql"]) for r in refused] == [
        ("rejected", "COPY patients TO STDOUT"),
        ("rejected", "SELECT * FROM patients"),
        ("rejected", "COPY  patients TO STDOUT CSV HEADER"),
    ]
