"""Where a statement of a several-statement Query begins in its text, and a syntax error's
position counted in the whole text, as PostgreSQL counts it (not from the start of the
statement). tests/integration/test_error_positions.py compares with PostgreSQL itself.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from proxy.seam import Notice, QueryError
from proxy.several_statements import split_query, split_statements
from rewriter import Rejected
from rewriter.parse import parse_statement

SYNTAX_ERROR = "42601"


@pytest.mark.parametrize(
    ("sql", "starts"),
    [
        ("SELECT 1", [(0, 0)]),
        ("  SELECT 1 -- no semicolon: as it came\n", [(0, 0)]),
        ("SELECT 1; SELECT 2", [(0, 0), (0, 10)]),
        ("SELECT 1;\nSELECT 2;\n\n  SELECT 3", [(0, 0), (1, 0), (3, 2)]),
        ("\n\n  SELECT 1; SELECT 2", [(2, 2), (2, 12)]),
        # \r\n is one line break, as a lone \r is (sqlglot's and PostgreSQL's lines).
        ("SELECT 1;\r\nSELECT 2;\rSELECT 3", [(0, 0), (1, 0), (2, 0)]),
        # Comments before a statement are part of it.
        ("SELECT 1; -- b\nSELECT 2", [(0, 0), (0, 10)]),
        # Characters, not bytes.
        ("SET application_name = 'é'; SELECT 2", [(0, 0), (0, 28)]),
    ],
)
def test_where_each_statement_begins(sql: str, starts: list[tuple[int, int]]) -> None:
    statements = split_statements(sql)
    assert [s.text for s in statements] == split_query(sql)
    assert [(s.line, s.column) for s in statements] == starts


def syntax_error(sql: str) -> QueryError:
    with pytest.raises(Rejected) as rejected:
        parse_statement(sql)
    assert rejected.value.sqlstate == SYNTAX_ERROR
    return QueryError(SYNTAX_ERROR, rejected.value.message, hint=rejected.value.hint)


def where(message: str) -> tuple[int, int]:
    tail = message.rsplit("(line ", 1)[1]
    line, column = tail.split(")", 1)[0].split(", column ")
    return int(line), int(column)


def position_in(text: str, line: int, column: int) -> int:
    """The index in ``text`` of (line, column), counted as sqlglot counts them."""
    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
    return starts[line - 1] + column - 1


@pytest.mark.parametrize(
    "sql",
    [
        "SET dpproxy.epsilon = 0.5; SELECT COUNT(*) FORM patients",
        "SET dpproxy.epsilon = 0.5;\nSELECT 1;\n  SELECT COUNT(*)\n  FORM patients",
        "\n\n  SELECT COUNT(*) FORM patients; SELECT 1",
        "SET dpproxy.epsilon = 0.5;\r\nSELECT COUNT(*) FROM patients GROUP sex",
        "SET application_name = 'é'; SELECT COUNT(*) FORM patients",
    ],
)
def test_a_syntax_error_is_placed_in_the_whole_text(sql: str) -> None:
    (statement,) = [s for s in split_statements(sql) if "patients" in s.text]
    alone = syntax_error(statement.text)
    placed = statement.placed(alone)
    # The same token: where the statement alone says, and where the whole text says.
    line, column = where(alone.message)
    whole_line, whole_column = where(placed.message)
    at = position_in(statement.text, line, column)
    whole_at = position_in(sql, whole_line, whole_column)
    assert sql.index(statement.text) + at == whole_at
    assert whole_line > 1 or whole_column > column
    assert placed.message.split(" (line ")[0] == alone.message.split(" (line ")[0]
    assert (placed.sqlstate, placed.hint) == (alone.sqlstate, alone.hint)


def test_only_a_syntax_error_s_position_is_moved() -> None:
    statement = split_statements("SELECT 1;\nSELECT x")[1]
    other = QueryError("42703", 'column "(line 1, column 2)" does not exist')
    assert statement.placed(other) is other
    first = split_statements("SELECT 1; SELECT 2")[0]
    error = QueryError(SYNTAX_ERROR, 'syntax error at or near "x" (line 1, column 3)')
    assert first.placed(error) is error  # it begins the text: nothing to move
    quoted = QueryError(
        SYNTAX_ERROR,
        'syntax error at or near ""(line 1, column 2)"" (line 1, column 20): expecting )',
        detail="d",
        hint="h",
        notices=(Notice("n"),),
    )
    placed = statement.placed(quoted)
    assert placed.message == (
        'syntax error at or near ""(line 1, column 2)"" (line 2, column 20): expecting )'
    )
    assert (placed.detail, placed.hint, placed.notices) == ("d", "h", (Notice("n"),))


@given(
    st.lists(
        st.sampled_from(["SELECT 1", "SET x = 1", "\n", "\r\n", "\r", " ", "-- c\n"]), max_size=8
    )
)
def test_positions_agree_with_the_text(parts: list[str]) -> None:
    sql = ";".join(parts) + "; SELECT y"
    end = 0
    for statement in split_statements(sql):
        begins = sql.index(statement.text, end)
        end = begins + len(statement.text)
        assert position_in(sql, statement.line + 1, statement.column + 1) == begins
