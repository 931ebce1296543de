"""DECLARE, FETCH, MOVE and CLOSE as proxy.cursor_statements reads them, and the limits of
proxy.cursors (no I/O). Positions and errors are compared with PostgreSQL in
test_cursors_postgres.py."""

from __future__ import annotations

import pytest

from proxy import parameters
from proxy.cursor_statements import (
    FETCH_ALL,
    Close,
    CursorStatement,
    Declare,
    Direction,
    Fetch,
    query_start,
    read_cursor_statement,
)
from proxy.cursors import MAX_CURSORS, Cursors
from proxy.seam import ColumnDescription, Notice, QueryError, StatementResult
from proxy.statements import Kind, recognize

FORWARD, BACKWARD = Direction.FORWARD, Direction.BACKWARD
ABSOLUTE, RELATIVE = Direction.ABSOLUTE, Direction.RELATIVE


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("FETCH c", Fetch("c", FORWARD, 1, move=False)),
        ("fetch next", Fetch("next", FORWARD, 1, move=False)),  # a cursor named next
        ("FETCH NEXT next", Fetch("next", FORWARD, 1, move=False)),
        ("FETCH PRIOR FROM c", Fetch("c", BACKWARD, 1, move=False)),
        ("FETCH FIRST IN c", Fetch("c", ABSOLUTE, 1, move=False)),
        ("FETCH LAST c", Fetch("c", ABSOLUTE, -1, move=False)),
        ("FETCH ABSOLUTE -3 c", Fetch("c", ABSOLUTE, -3, move=False)),
        ("FETCH RELATIVE +2 FROM c", Fetch("c", RELATIVE, 2, move=False)),
        ('FETCH 100 IN "SQL_CUR0x55d2"', Fetch("SQL_CUR0x55d2", FORWARD, 100, move=False)),
        ("FETCH ALL FROM c;", Fetch("c", FORWARD, FETCH_ALL, move=False)),
        ("FETCH FORWARD c", Fetch("c", FORWARD, 1, move=False)),
        ("FETCH FORWARD 2147483647 FROM c", Fetch("c", FORWARD, 2**31 - 1, move=False)),
        ("FETCH FORWARD ALL c", Fetch("c", FORWARD, FETCH_ALL, move=False)),
        ("FETCH BACKWARD - 2 c", Fetch("c", BACKWARD, -2, move=False)),
        ("FETCH BACKWARD ALL FROM c", Fetch("c", BACKWARD, FETCH_ALL, move=False)),
        ('FETCH FORWARD 3 FROM "big"', Fetch("big", FORWARD, 3, move=False)),  # psycopg
        ('MOVE  -1 FROM "big"', Fetch("big", FORWARD, -1, move=True)),  # psycopg's scroll
        ('MOVE ABSOLUTE 0 FROM "big"', Fetch("big", ABSOLUTE, 0, move=True)),
        ("move /* c */ prior -- d\n c", Fetch("c", BACKWARD, 1, move=True)),
        ("FETCH 1 FROM Mixed", Fetch("mixed", FORWARD, 1, move=False)),
        ('FETCH 1 FROM "Mixed"', Fetch("Mixed", FORWARD, 1, move=False)),
        ('FETCH 1 FROM U&"\\0061b"', Fetch("ab", FORWARD, 1, move=False)),
        ("FETCH 1 FROM cursor", Fetch("cursor", FORWARD, 1, move=False)),  # unreserved
        ("CLOSE c", Close("c")),
        ("CLOSE ALL", Close(None)),
        ('CLOSE "all"', Close("all")),
        (
            "DECLARE c CURSOR FOR SELECT 1",
            Declare("c", "SELECT 1", 21, (0, 21), None, hold=False, binary=False),
        ),
        (
            'declare "SQL_CUR0x1" cursor with hold for select a from t;',
            Declare("SQL_CUR0x1", "select a from t;", 42, (0, 42), None, hold=True, binary=False),
        ),
        (
            "DECLARE c NO SCROLL INSENSITIVE CURSOR WITHOUT HOLD FOR\n  /* q */ (SELECT 1)",
            Declare("c", "(SELECT 1)", 66, (1, 10), False, hold=False, binary=False),
        ),
        (
            "DECLARE c ASENSITIVE SCROLL SCROLL BINARY CURSOR FOR WITH w AS (SELECT 1) TABLE w",
            Declare(
                "c", "WITH w AS (SELECT 1) TABLE w", 53, (0, 53), True, hold=False, binary=True
            ),
        ),
        (
            "DECLARE c CURSOR FOR VALUES (1)",
            Declare("c", "VALUES (1)", 21, (0, 21), None, hold=False, binary=False),
        ),
    ],
)
def test_reads(sql: str, expected: CursorStatement) -> None:
    assert read_cursor_statement(sql) == expected
    assert recognize(sql) is not None


@pytest.mark.parametrize(
    ("sql", "sqlstate", "message"),
    [
        ("FETCH", "42601", "syntax error at end of input"),
        ("FETCH 1", "42601", "syntax error at end of input"),
        ("FETCH 2147483648 c", "42601", 'syntax error at or near "2147483648"'),
        ("FETCH -2147483648 c", "42601", 'syntax error at or near "2147483648"'),
        ("FETCH 1.5 c", "42601", 'syntax error at or near "1.5"'),
        ("FETCH $1 FROM c", "42601", 'syntax error at or near "$1"'),
        ("FETCH ABSOLUTE c", "42601", 'syntax error at or near "c"'),
        ("FETCH c c", "42601", 'syntax error at or near "c"'),
        ("FETCH 1 FROM select", "42601", 'syntax error at or near "select"'),
        ("CLOSE ALL c", "42601", 'syntax error at or near "c"'),
        ("DECLARE c CURSOR", "42601", "syntax error at end of input"),
        ("DECLARE c CURSOR FOR -- nothing", "42601", "syntax error at end of input"),
        ("DECLARE c CURSOR FOR SHOW x", "42601", 'syntax error at or near "SHOW"'),
        ("DECLARE c CURSOR FOR 'x'", "42601", "syntax error at or near \"'x'\""),
        ("DECLARE c SENSITIVE CURSOR FOR SELECT 1", "42601", 'syntax error at or near "sensitive"'),
        ("DECLARE c SCROLL NO SCROLL CURSOR FOR SELECT 1", "42P11", "cannot specify both SCROLL "),
        ("DECLARE c INSENSITIVE ASENSITIVE CURSOR FOR SELECT 1", "42P11", "cannot specify both"),
    ],
)
def test_refuses(sql: str, sqlstate: str, message: str) -> None:
    with pytest.raises(QueryError) as refused:
        read_cursor_statement(sql)
    assert refused.value.sqlstate == sqlstate
    assert refused.value.message.startswith(message)


@pytest.mark.parametrize(
    ("sql", "kind"),
    [
        ("DECLARE c CURSOR FOR SELECT 1", Kind.DECLARE),
        ("  fetch 2 c", Kind.FETCH),
        ("/* x */ MOVE c", Kind.MOVE),
        ("close all", Kind.CLOSE),
    ],
)
def test_recognized_as_session_statements(sql: str, kind: Kind) -> None:
    statement = recognize(sql)
    assert statement is not None and statement.kind is kind


@pytest.mark.parametrize(
    ("sql", "start"),
    [
        ("DECLARE c CURSOR FOR SELECT 1", 21),
        ("DECLARE c CURSOR FOR", None),
        ("DECLARE c CURSOR FOR /* x */", None),
        ('DECLARE "for" CURSOR FOR SELECT 1', 25),
        ("DECLARE c CURSOR FOR/**/SELECT 1", 24),
        ("DECLARE c CURSOR FOR(SELECT 1)", 20),
        ("DECLARE c CURSOR FORx SELECT 1", None),
        ("SELECT 1 FOR UPDATE", None),
        ("/* DECLARE */ SELECT x FROM t FOR UPDATE", None),
        ('"declare" c CURSOR FOR SELECT 1', None),
    ],
)
def test_query_start(sql: str, start: int | None) -> None:
    assert query_start(sql) == start


def test_parameters_bind_into_the_query_of_a_declare() -> None:
    """psycopg sends a named cursor's query with its parameters in DECLARE: they are bound
    into the query as into the same query sent alone."""
    sql = 'DECLARE "c" CURSOR FOR SELECT COUNT(*) FROM visits WHERE cost > $1 AND dept = $2'
    parsed = parameters.prepare(sql, [])
    bound = parameters.bind(parsed, [], [b"10", b"o'k"])
    alone = parameters.prepare(sql[query_start(sql) or 0 :], [])
    assert parsed.parameter_types == alone.parameter_types
    assert bound == 'DECLARE "c" CURSOR FOR ' + parameters.bind(alone, [], [b"10", b"o'k"])
    assert "'o''k'" in bound
    with pytest.raises(QueryError) as refused:
        parameters.prepare("DECLARE $1 CURSOR FOR SELECT $2", [])
    assert refused.value.message == 'syntax error at or near "$1"'


# --- proxy.cursors: what is refused before the query is answered ---------------------------

ANSWER = StatementResult(
    tag="SELECT 2",
    columns=(ColumnDescription("n", 20),),
    rows=(("1",), ("2",)),
    notices=(Notice("dpproxy: this answer cost ε=1"),),
)


def declare(sql: str) -> Declare:
    statement = read_cursor_statement(sql)
    assert isinstance(statement, Declare)
    return statement


def test_declare_keeps_the_answer_and_its_notice() -> None:
    cursors = Cursors()
    opened = cursors.open(declare("DECLARE c CURSOR FOR SELECT 1"), ANSWER, depth=0)
    assert opened == StatementResult(tag="DECLARE CURSOR", notices=ANSWER.notices)
    assert cursors.columns("c") == ANSWER.columns and cursors.columns("d") is None
    fetched = cursors.fetch(Fetch("c", FORWARD, FETCH_ALL, move=False))
    assert (fetched.tag, fetched.columns, fetched.rows) == ("FETCH 2", ANSWER.columns, ANSWER.rows)


@pytest.mark.parametrize(
    ("sql", "in_block", "sqlstate"),
    [
        ("DECLARE c CURSOR FOR SELECT 1", False, "25P01"),
        ("DECLARE c CURSOR WITHOUT HOLD FOR SELECT 1", False, "25P01"),
        ("DECLARE c BINARY CURSOR WITH HOLD FOR SELECT 1", True, "0A000"),
        ("DECLARE open CURSOR WITH HOLD FOR SELECT 1", True, "42P03"),
    ],
)
def test_refused_before_the_query(sql: str, in_block: bool, sqlstate: str) -> None:
    cursors = Cursors()
    cursors.open(declare("DECLARE open CURSOR WITH HOLD FOR SELECT 1"), ANSWER, depth=None)
    with pytest.raises(QueryError) as refused:
        cursors.check_declare(declare(sql), in_block=in_block)
    assert refused.value.sqlstate == sqlstate
    cursors.check_declare(declare("DECLARE c CURSOR WITH HOLD FOR SELECT 1"), in_block=False)


def test_a_session_holds_at_most_64_cursors() -> None:
    cursors = Cursors()
    for number in range(MAX_CURSORS):
        cursors.open(declare(f"DECLARE c{number} CURSOR FOR SELECT 1"), ANSWER, depth=0)
    with pytest.raises(QueryError) as refused:
        cursors.check_declare(declare("DECLARE more CURSOR FOR SELECT 1"), in_block=True)
    assert refused.value.sqlstate == "54000"
    assert "64 open cursors" in refused.value.message and "CLOSE" in (refused.value.hint or "")
    cursors.close("c0")
    cursors.check_declare(declare("DECLARE more CURSOR FOR SELECT 1"), in_block=True)
    assert cursors.close(None).tag == "CLOSE CURSOR ALL"
    assert cursors.columns("c1") is None


def test_lifetimes() -> None:
    """Without HOLD: the block's (and the savepoint's); WITH HOLD: kept by a COMMIT."""
    cursors = Cursors()
    cursors.open(declare("DECLARE held CURSOR WITH HOLD FOR SELECT 1"), ANSWER, depth=None)
    cursors.open(declare("DECLARE a CURSOR FOR SELECT 1"), ANSWER, depth=0)
    cursors.open(declare("DECLARE b CURSOR WITH HOLD FOR SELECT 1"), ANSWER, depth=1)
    cursors.open(declare("DECLARE c CURSOR FOR SELECT 1"), ANSWER, depth=2)
    cursors.release(1)  # c now belongs to the first savepoint
    cursors.rollback_to(1)  # the second savepoint (none was declared after it)
    assert [n for n in ("held", "a", "b", "c") if cursors.columns(n)] == ["held", "a", "b", "c"]
    cursors.rollback_to(0)  # the first: b and c go
    assert [n for n in ("held", "a", "b", "c") if cursors.columns(n)] == ["held", "a"]
    cursors.open(declare("DECLARE b CURSOR WITH HOLD FOR SELECT 1"), ANSWER, depth=0)
    cursors.end_transaction(commit=True)
    assert [n for n in ("held", "a", "b") if cursors.columns(n)] == ["held", "b"]
    cursors.end_transaction(commit=False)  # held ones outlive a later block's rollback
    assert [n for n in ("held", "a", "b") if cursors.columns(n)] == ["held", "b"]
    cursors.close_all()
    assert cursors.columns("held") is None
