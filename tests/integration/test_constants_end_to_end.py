"""Through the proxy on both engines: a query with a constant the database cannot compute
is refused before anything is charged, the same way whether or not some row meets the
condition around it (review finding: the error was an exact oracle at any ε)."""

from __future__ import annotations

import psycopg
import pytest

from tests.integration.server import RunningServer

pytestmark = pytest.mark.integration

PATIENTS = 200
ORACLE = "SELECT COUNT(*) FROM patients WHERE CASE WHEN income > {x} THEN {c} ELSE 0 END = 0"
#: (a constant the database cannot compute, the error, words of the message)
CONSTANTS = [
    # PostgreSQL's input of an integer refuses 'x' whatever the rows: so does dpproxy, with
    # PostgreSQL's SQLSTATE and message (rewriter.passes.value_types.literal_input).
    (
        "CAST('x' AS INTEGER)",
        psycopg.errors.InvalidTextRepresentation,
        'invalid input syntax for type integer: "x"',
    ),
    (
        "CAST(1e12 AS INTEGER)",
        psycopg.errors.InvalidParameterValue,
        "the constant CAST(1e12 AS INT) cannot be computed",
    ),
]


def remaining(conn: psycopg.Connection[tuple[object, ...]]) -> str:
    row = conn.execute("SHOW dpproxy.budget").fetchone()
    assert row is not None
    return str(row[0]).split(" left")[0]


@pytest.mark.parametrize(
    ("constant", "error", "words"), CONSTANTS, ids=[c for c, _, _ in CONSTANTS]
)
@pytest.mark.parametrize("threshold", ["-1", "1e12"])  # every person meets it, or none
def test_a_constant_that_fails_is_refused_free_whatever_the_data(
    server: RunningServer, threshold: str, constant: str, error: type[Exception], words: str
) -> None:
    with psycopg.connect(server.dsn("bob"), autocommit=True) as conn:
        conn.execute("SET dpproxy.epsilon = 0.01")
        before = remaining(conn)
        with pytest.raises(error) as caught:
            conn.execute(ORACLE.format(x=threshold, c=constant))
        assert words in str(caught.value)
        assert remaining(conn) == before
        cur = conn.execute("SELECT * FROM dpproxy.my_queries")
        names = [c.name for c in cur.description or []]
        last = dict(zip(names, cur.fetchall()[-1], strict=True))
        assert last["decision"] == "rejected" and words in str(last["reason"])
        # A constant that computes is fine, and is charged as usual.
        conn.execute("SELECT COUNT(*) FROM patients WHERE income > 100 / 1.1 + 2").fetchall()
        assert remaining(conn) != before


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT CAST(COUNT(*) AS DATE) FROM visits",
        "SELECT department, COUNT(*) FROM visits GROUP BY department HAVING COUNT(*) > 1"
        + "0" * 41,
    ],
)
def test_post_processing_that_cannot_run_is_refused_before_the_charge(
    server: RunningServer, sql: str
) -> None:
    with psycopg.connect(server.dsn("bob"), autocommit=True) as conn:
        before = remaining(conn)
        with pytest.raises(psycopg.errors.DataException) as caught:
            conn.execute(sql)
        assert "nothing was charged" in str(caught.value)
        assert "released" not in str(caught.value)  # no internal names
        assert remaining(conn) == before
