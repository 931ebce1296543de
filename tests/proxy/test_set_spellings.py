"""SET's names and values in every spelling PostgreSQL 15's grammar takes, and only those.

A name is parts separated by dots, each a word or a quoted identifier ("dpproxy"."epsilon",
U&"..."), compared in any case; a value is a string constant of any kind ('...', E'...',
U&'...' with its UESCAPE clause, $$...$$, $tag$...$tag$), a number, or a word that is not
a reserved key word. Before, dpproxy refused quoted names with dots and dollar-quoted
values (42601), took SET x.y = TO and SET x.y = NULL, and answered SET transaction = 1
with 42601 instead of 42704. Each case is compared with the PostgreSQL 15 test server.
dpproxy's own settings are checked as they always are, whatever the spelling.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import psycopg
import pytest

from proxy.seam import QueryError, StatementResult
from proxy.session import AnalystSession
from proxy.statements import Kind, SessionStatement, StatementSyntaxError, recognize
from tests.proxy.test_session_statements import session


def run(s: AnalystSession, sql: str) -> StatementResult:
    return asyncio.run(s.execute(sql))


def shown(s: AnalystSession, name: str) -> str | None:
    return run(s, f"SHOW {name}").rows[0][0]


@pytest.fixture(scope="module")
def postgresql(pg_dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(pg_dsn, autocommit=True, options="-c TimeZone=UTC") as conn:
        yield conn


# (statement, the parameter whose value SHOW then gives)
TAKEN = [
    ('SET "myapp"."tenant" = $$acme$$', "myapp.tenant"),
    ('SET "MyApp".Tenant TO $q$a b$q$', "myapp.tenant"),
    ('SET myapp."x.y" = 1', "myapp.x.y"),
    ("SET myapp . tenant = 'a'", "myapp.tenant"),
    ("SET myapp.tenant = U&'d\\0061t'", "myapp.tenant"),
    ("SET myapp.tenant = U&'d!0061t' UESCAPE '!'", "myapp.tenant"),
    ('SET U&"my\\0061pp".tenant = 1', "myapp.tenant"),
    ("SET myapp.tenant = E'a\\tb'", "myapp.tenant"),
    ("SET myapp.tenant = authorization", "myapp.tenant"),  # reserved but for functions
    ("SET myapp.tenant = on", "myapp.tenant"),
    ("SET myapp.tenant = local", "myapp.tenant"),
    ('SET "application_name" = $$report$$', "application_name"),
    ("SET application_name TO $x$it's$x$", "application_name"),
    ('SET "TimeZone" = $$Asia/Tokyo$$', "TimeZone"),
    ("SET TIME ZONE $$Europe/Paris$$", "TimeZone"),
    ("SET search_path = $$My Schema$$, public", "search_path"),
    ("SET SESSION session.x = 1", "session.x"),
    ("SET transaction.x TO 1", "transaction.x"),
]

# Refused by both, with the same SQLSTATE.
REFUSED = [
    "SET dpproxy.epsilon = N'0.11'",
    "SET myapp.tenant = N'x'",
    "SET myapp.tenant = B'101'",
    "SET x = to",
    "SET x.y = to",
    "SET x.y TO to",
    "SET myapp.tenant = null",
    "SET myapp.tenant = select",
    "SET myapp.tenant = all",
    "SET myapp.tenant = 'a', default",
    "SET myapp.select = 1",
    "SET myapp.tenant = 'a'::text",
    "SET myapp. = 1",
    "SET .x = 1",
    "SET transaction = 1",
    "SET transaction TO DEFAULT",
    'SET "transaction" = 1',
    "SET session = 1",
    "SET LOCAL local = 1",
    "SET SESSION characteristics = 1",
    "SHOW $$TimeZone$$",
    "RESET $$TimeZone$$",
]


@pytest.mark.parametrize(("sql", "name"), TAKEN)
def test_spellings_postgresql_takes_are_taken_alike(
    postgresql: psycopg.Connection[tuple[object, ...]], sql: str, name: str
) -> None:
    postgresql.execute(sql.encode())
    expected = (postgresql.execute(f"SHOW {name}".encode()).fetchone() or ())[0]
    postgresql.execute(b"RESET ALL")
    s = session()
    run(s, sql)
    assert shown(s, name) == expected


@pytest.mark.parametrize("sql", REFUSED)
def test_what_postgresql_refuses_is_refused_alike(
    postgresql: psycopg.Connection[tuple[object, ...]], sql: str
) -> None:
    with pytest.raises(psycopg.Error) as expected:
        postgresql.execute(sql.encode())
    with pytest.raises(QueryError) as got:
        run(session(), sql)
    assert got.value.sqlstate == expected.value.sqlstate, got.value.message
    if got.value.sqlstate == "42601":  # in PostgreSQL's words
        assert got.value.message.startswith("syntax error at or near"), got.value.message


@pytest.mark.parametrize(
    "name",
    [
        "dpproxy.epsilon",
        '"dpproxy"."epsilon"',
        '"DPPROXY".EPSILON',
        '"dpproxy.epsilon"',
        'U&"dpproxy".U&"\\0065psilon"',
        "dpproxy . epsilon",
    ],
)
def test_every_spelling_of_epsilon_is_checked_as_epsilon(name: str) -> None:
    """The cap (5 here), positive, 9 decimal places: whatever the name's and the value's
    spelling. A value taken is what queries are charged (SHOW dpproxy.epsilon)."""
    s = session()
    for value in ["$$1000$$", "$q$0$q$", "U&'-1'", "$$0.0000000001$$", "$$lots$$"]:
        with pytest.raises(QueryError) as refused:
            run(s, f"SET {name} = {value}")
        assert refused.value.sqlstate == "22023", (name, value)
        assert shown(s, "dpproxy.epsilon") == "1"
    run(s, f"SET {name} = $$0.25$$")
    assert shown(s, "dpproxy.epsilon") == "0.25"
    run(s, f"RESET {name}")
    assert shown(s, "dpproxy.epsilon") == "1"


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (
            'SET "dpproxy"."epsilon" = $$0.4$$',
            SessionStatement(Kind.SET, "dpproxy.epsilon", "$$0.4$$"),
        ),
        (
            'SET LOCAL dpproxy."Epsilon" TO 1',
            SessionStatement(Kind.SET, "dpproxy.epsilon", "1", True),
        ),
        ('SHOW "dpproxy"."epsilon"', SessionStatement(Kind.SHOW, "dpproxy.epsilon")),
        ('RESET U&"\\0064pproxy".epsilon', SessionStatement(Kind.RESET, "dpproxy.epsilon")),
        ("SET transaction = 1", SessionStatement(Kind.SET, "transaction", "1")),
    ],
)
def test_recognized(sql: str, expected: SessionStatement) -> None:
    assert recognize(sql) == expected


@pytest.mark.parametrize(
    ("sql", "near"),
    [
        ("SET x = N'0.11'", "'0.11'"),
        ("SET x = B'1'", "B'1'"),
        ("SET x = 1::int", "::"),
        ("SHOW $$x$$", "$$x$$"),
        ("SHOW a b", "b"),
    ],
)
def test_syntax_errors_name_the_token_as_postgresql_does(sql: str, near: str) -> None:
    with pytest.raises(StatementSyntaxError, match="syntax error at or near") as caught:
        recognize(sql)
    assert str(caught.value) == f'syntax error at or near "{near}"'
