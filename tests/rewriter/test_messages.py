"""Rejections speak PostgreSQL's language and the analyst's SQL: never sqlglot's class
names or the name of the function sqlglot reads an operator as."""

from __future__ import annotations

import logging

import pytest

from rewriter import PlanRequest, Rejected, plan
from tests.rewriter.test_planner import CATALOG


@pytest.mark.parametrize(
    ("sql", "code", "message"),
    [
        # `--` starts a comment, as in PostgreSQL: the comparison has no right side.
        ("SELECT COUNT(*) FROM visits WHERE cost > ---1", "42601", 'at or near ">"'),
        ("SELECT COUNT(*) FROM visits WHERE cost > (", "42601", 'at or near "("'),
        ("SELECT COUNT(*) FROM visits WHERE department ~ 'a'", "0A000", "match ~ is not"),
        ("SELECT COUNT(*) FROM visits WHERE department ~* 'a'", "0A000", "match ~* is not"),
        ("SELECT COUNT(*) FROM visits WHERE lpad(department, 3) = 'a'", "0A000", "lpad() or"),
        (
            "SELECT COUNT(*) FROM visits WHERE department COLLATE \"C\" = 'a'",
            "0A000",
            "COLLATE is not allowed",
        ),
        ("SELECT COUNT(*) FROM visits WHERE cost > $1", "42P02", "there is no parameter $1"),
        ("SELECT nosuch FROM visits", "42703", 'column "nosuch" does not exist'),
        ("SELECT COUNT(*) FROM visits LIMIT -1", "2201W", "LIMIT must not be negative"),
        ("SELECT COUNT(*) FROM visits OFFSET -5", "2201W", "OFFSET must not be negative"),
        ("SELECT COUNT(*) FROM visits LIMIT (-1)", "2201W", "LIMIT must not be negative"),
        ("SELECT COUNT(*) FROM visits LIMIT 1 + 1", "0A000", "LIMIT takes a whole number"),
        ("LISTEN foo", "0A000", "LISTEN statements are not supported"),
        ("CHECKPOINT", "0A000", "CHECKPOINT statements are not supported"),
        # A cast to a type with a precision (it read "DATATYPEPARAM is not allowed").
        (
            "SELECT COUNT(*) FROM visits WHERE cost::numeric(10, 2) > 1",
            "0A000",
            "a cast to DECIMAL(10, 2) (a type with a precision or length) is not supported",
        ),
        (
            "SELECT SUM(CAST(department AS varchar(3)) = 'A') FROM visits",
            "0A000",
            "a cast to VARCHAR(3)",
        ),
        # sqlglot's tokens and token classes (it read "Expected table name but got <Token
        # token_type: TokenType.SENTINEL …>", "Error tokenizing 'SELECT 'ab'", "RAWSTRING
        # is not allowed in WHERE", "LITERAL statements are not supported").
        ("SELECT COUNT(*) FROM", "42601", "syntax error at end of input"),
        ("SELEC 1", "42601", 'syntax error at or near "1"'),
        ("SELECT COUNT(*) FROM visits WHERE (cost > 1", "42601", "expecting )"),
        ("SELECT COUNT(*) FROM visits WHERE department = 'abc", "42601", "string is not closed"),
        ("SELECT COUNT(*) FROM visits /* a comment", "42601", "comment or dollar-quoted"),
        ("1", "42601", 'syntax error at or near "1": not a statement'),
        ("SELECT COUNT(*) FROM visits WHERE department = $$A$$", "0A000", "($$…$$) is not"),
        ("SELECT COUNT(*) FROM visits WHERE department = E'A'", "0A000", "(E'…') is not"),
        ("SELECT COUNT(*) FROM visits WHERE department = U&'A'", "0A000", "(U&'…') is not"),
        ("SELECT COUNT(*) / U&'1' FROM visits", "0A000", "(U&'…') is not allowed in the select"),
        # An operator by its PostgreSQL spelling (it read "BITWISERIGHTSHIFT is not allowed").
        (
            "SELECT COUNT(*) FROM visits WHERE cost >> 3 > 1",
            "0A000",
            "the operator >> is not allowed in WHERE",
        ),
        ("SELECT COUNT(*) FROM visits WHERE cost # 3 > 1", "0A000", "the operator # is not"),
        # sqlglot reads INTERVAL '1 day 02:00' as INTERVAL '1' DAY: another query.
        (
            "SELECT COUNT(*) FROM visits WHERE TIMESTAMP '2020-01-02' - INTERVAL '1 day 02:00'"
            " > TIMESTAMP '2020-01-01'",
            "0A000",
            "INTERVAL '1 day 02:00' is not supported",
        ),
    ],
)
def test_rejections_name_what_the_analyst_wrote(sql: str, code: str, message: str) -> None:
    with pytest.raises(Rejected) as caught:
        plan(sql, CATALOG, PlanRequest(1.0))
    assert caught.value.sqlstate == code and message in caught.value.message
    assert "<class" not in caught.value.message and "sqlglot" not in caught.value.message
    assert "<Token" not in caught.value.message and "tokenizing" not in caught.value.message


def test_the_analysts_sql_is_not_logged_by_sqlglot(caplog: pytest.LogCaptureFixture) -> None:
    """sqlglot logs a statement it reads only in part: a password would reach the log."""
    with caplog.at_level(logging.DEBUG), pytest.raises(Rejected):
        plan("ALTER USER alice PASSWORD 'plaintext-secret'", CATALOG, PlanRequest(1.0))
    assert "plaintext-secret" not in caplog.text


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("SELECT COUNT(*) FROM visits WHERE round(cost, 1, 1) > 3", "round() with 3 arguments"),
        # Rewritten as FLOOR(cost * POWER(10, 1)) / …: PostgreSQL fails on a cost of 1e308.
        ("SELECT COUNT(*) FROM visits WHERE floor(cost, 1) > 3", "floor() with 2 arguments"),
        ("SELECT COUNT(*) FILTER (WHERE ceil(cost, 1) > 3) FROM visits", "ceil() with 2"),
        ("SELECT SUM(floor(cost, 1)) FROM visits", "floor() with 2 arguments"),
    ],
)
def test_rounding_functions_take_the_arguments_both_engines_have(sql: str, words: str) -> None:
    with pytest.raises(Rejected) as caught:
        plan(sql, CATALOG, PlanRequest(1.0))
    assert words in caught.value.message
