"""Parameters bound through sqlglot's tree; value codecs (text and binary) without I/O."""

from __future__ import annotations

import datetime as dt
import struct
import uuid
from decimal import Decimal

import pytest
import sqlglot
from hypothesis import given
from hypothesis import strategies as st

from proxy import parameters
from proxy.extended import column_formats
from proxy.protocol import values
from proxy.seam import QueryError

SQL = "SELECT COUNT(*) FROM visits WHERE department = $1 AND cost > $2"


def bind(sql: str, declared: list[int], params: list[bytes | None], fmts: list[int]) -> str:
    return parameters.bind(parameters.prepare(sql, declared), fmts, params)


def test_types_are_declared_else_cast_else_text() -> None:
    parsed = parameters.prepare("SELECT $1, $2::int, $3::date, $4", [0, 0, 0, values.INT8])
    assert parsed.parameter_types == (values.TEXT, values.INT4, values.DATE, values.INT8)
    assert parameters.prepare("SELECT 1", []).parameter_types == ()
    assert parameters.prepare("SELECT '$1'", []).parameter_types == ()  # inside a string


def test_text_parameters_become_quoted_literals() -> None:
    bound = bind(SQL, [], [b"x' OR '1'='1", b"100"], [])
    assert bound == (
        "SELECT COUNT(*) FROM visits WHERE department = 'x'' OR ''1''=''1' AND cost > '100'"
    )
    assert sqlglot.parse_one(bound, dialect="postgres") is not None


@pytest.mark.parametrize(
    ("oid", "data", "fmt", "expected"),
    [
        (values.INT2, struct.pack("!h", -3), 1, "-3"),
        (values.INT4, struct.pack("!i", 7), 1, "7"),
        (values.INT8, struct.pack("!q", 2**40), 1, "1099511627776"),
        (values.INT8, b"42", 0, "42"),
        (values.FLOAT8, struct.pack("!d", 0.5), 1, "0.5"),
        (values.FLOAT4, struct.pack("!f", 1.5), 1, "1.5"),
        (values.FLOAT8, b"NaN", 0, "CAST('NaN' AS DOUBLE PRECISION)"),
        (values.NUMERIC, b"12.50", 0, "12.50"),
        (values.BOOL, b"\x01", 1, "TRUE"),
        (values.BOOL, b"off", 0, "FALSE"),
        (values.TEXT, b"caf\xc3\xa9", 1, "'café'"),
        (values.VARCHAR, b"a", 0, "'a'"),
        (values.DATE, struct.pack("!i", 1), 1, "CAST('2000-01-02' AS DATE)"),
        (values.DATE, b"2024-02-29", 0, "CAST('2024-02-29' AS DATE)"),
        (values.TIMESTAMP, struct.pack("!q", 1_500_000), 1,
         "CAST('2000-01-01 00:00:01.500000' AS TIMESTAMP)"),
        # An instant keeps its offset and its type (read as that instant in any session
        # zone, compared as one with a date too); a timestamp's input ignores an offset,
        # as PostgreSQL's does; a timestamp with time zone without one is a local time of
        # the session's zone.
        (values.TIMESTAMPTZ, struct.pack("!q", 0), 1,
         "CAST('2000-01-01 00:00:00+00:00' AS TIMESTAMPTZ)"),
        (values.TIMESTAMPTZ, b"2024-01-01 12:00:00+02", 0,
         "CAST('2024-01-01 12:00:00+02:00' AS TIMESTAMPTZ)"),
        (values.TIMESTAMPTZ, b"2024-01-01 12:00", 0,
         "CAST('2024-01-01 12:00:00' AS TIMESTAMP)"),
        (values.TIMESTAMP, b"2024-01-01 12:00+05", 0,
         "CAST('2024-01-01 12:00:00' AS TIMESTAMP)"),
        (values.UUID, uuid.UUID(int=1).bytes, 1, "'00000000-0000-0000-0000-000000000001'"),
        (values.INT4, None, 1, "NULL"),
    ],
)  # fmt: skip
def test_typed_values(oid: int, data: bytes | None, fmt: int, expected: str) -> None:
    assert bind("SELECT $1", [oid], [data], [fmt]) == f"SELECT {expected}"


@pytest.mark.parametrize(
    ("oid", "data", "fmt", "sqlstate"),
    [
        (values.INT4, b"1; DROP TABLE x", 0, "22P02"),
        (values.INT2, b"40000", 0, "22003"),
        (values.FLOAT8, b"1e", 0, "22P02"),
        (values.NUMERIC, b"1 OR 1=1", 0, "22P02"),
        (values.INT4, b"\x00\x01", 1, "22P03"),
        (values.UUID, b"nope", 0, "22P02"),
        (values.TEXT, b"\xff", 0, "22021"),
        (values.TEXT, b"a\x00b", 0, "22021"),
        (600, b"(1,2)", 0, "0A000"),  # point
        (values.INT4, b"1", 2, "08P01"),
    ],
)
def test_bad_values_are_refused(oid: int, data: bytes, fmt: int, sqlstate: str) -> None:
    with pytest.raises(QueryError) as caught:
        bind("SELECT $1", [oid], [data], [fmt])
    assert caught.value.sqlstate == sqlstate
    assert caught.value.message.startswith("parameter $1: ")


def test_counts_must_match() -> None:
    with pytest.raises(QueryError, match="supplies 1 parameters.*requires 2"):
        bind(SQL, [], [b"a"], [])
    with pytest.raises(QueryError, match="parameter formats"):
        bind(SQL, [], [b"a", b"b"], [0, 0, 0])
    with pytest.raises(QueryError, match="multiple commands"):
        parameters.prepare("SELECT $1; SELECT 2", [])


def test_describe_uses_nulls_and_formats_per_column() -> None:
    assert parameters.describe_sql(parameters.prepare(SQL, [])).endswith(
        "department = NULL AND cost > NULL"
    )
    assert column_formats([], 2) == (0, 0)
    assert column_formats([1], 2) == (1, 1)
    with pytest.raises(QueryError, match="result formats"):
        column_formats([0, 1, 1], 2)


@given(st.text())
def test_any_text_stays_one_string_literal(text: str) -> None:
    data = text.encode("utf-8")
    try:
        bound = bind("SELECT $1", [], [data], [])
    except QueryError as error:
        assert "\x00" in text and error.sqlstate == "22021"
        return
    tree = sqlglot.parse_one(bound, dialect="postgres")
    literal = tree.expressions[0]
    assert isinstance(literal, sqlglot.exp.Literal) and literal.is_string
    assert literal.this == text


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_int8_binary_round_trip(number: int) -> None:
    assert (
        values.decode_parameter(values.INT8, values.encode_binary(values.INT8, str(number)), 1)
        == number
    )


@given(
    st.decimals(
        allow_nan=False, allow_infinity=False, places=4, min_value=-(10**12), max_value=10**12
    )
)
def test_numeric_binary_round_trip(number: Decimal) -> None:
    encoded = values.encode_binary(values.NUMERIC, str(number))
    assert values.decode_parameter(values.NUMERIC, encoded, 1) == number


def numeric_bytes(weight: int, sign: int, dscale: int, digits: list[int]) -> bytes:
    """PostgreSQL's binary numeric: ndigits, weight, sign, dscale, base-10000 digits."""
    header = struct.pack("!HhHH", len(digits), weight, sign, dscale)
    return header + struct.pack(f"!{len(digits)}H", *digits)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (numeric_bytes(7, 0x0000, 0, [1]), "1" + "0" * 28),  # 10**28: beyond 28 digits
        (numeric_bytes(25, 0x0000, 0, [1]), "1" + "0" * 100),  # 10**100
        (numeric_bytes(25, 0x4000, 0, [1]), "-1" + "0" * 100),
        (numeric_bytes(-25, 0x0000, 100, [1]), "0." + "0" * 99 + "1"),  # 1e-100
        (numeric_bytes(0, 0x0000, 4, [123, 4500]), "123.4500"),  # dscale keeps the zeros
        (numeric_bytes(0, 0x4000, 2, [1, 2500]), "-1.25"),
        (numeric_bytes(2, 0x0000, 0, [12, 3456, 7890]), "1234567890"),
        (numeric_bytes(1, 0x0000, 0, [12, 3456, 7890]), "123456"),  # 123456.789 at scale 0
        (numeric_bytes(0, 0x0000, 1, [1, 5999]), "1.5"),  # hidden digits truncated, not rounded
        (numeric_bytes(0, 0x4000, 0, [0, 9999]), "0"),  # -0.9999 at scale 0 is 0, not -0
        (numeric_bytes(0, 0x0000, 3, []), "0.000"),
        (numeric_bytes(-1, 0x0000, 0, [5000]), "0"),
        (numeric_bytes(32767, 0x0000, 0, [9999]), "9999" + "0" * 4 * 32767),  # largest weight
        (numeric_bytes(-32768, 0x0000, 16383, [1]), "0." + "0" * 16383),  # smallest weight
        (numeric_bytes(0, 0xC000, 0, []), "NaN"),
        (numeric_bytes(0, 0xD000, 0, []), "Infinity"),
        (numeric_bytes(0, 0xF000, 0, []), "-Infinity"),
    ],
)
def test_every_binary_numeric_decodes_exactly(data: bytes, expected: str) -> None:
    value = values.decode_parameter(values.NUMERIC, data, 1)
    assert isinstance(value, Decimal)
    shown = format(value, "f") if value.is_finite() else str(value)
    assert shown == expected


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (numeric_bytes(0, 0x1234, 0, []), "invalid sign"),
        (numeric_bytes(0, 0x0000, 0x4000, []), "invalid scale"),
        (numeric_bytes(0, 0xC000, 0x4000, []), "invalid scale"),
        (numeric_bytes(0, 0x0000, 0, [10000]), "invalid digit"),
        (numeric_bytes(0, 0x0000, 0, [1])[:-1], "incorrect binary data"),
        (b"\x00\x01", "incorrect binary data"),
    ],
)
def test_malformed_binary_numerics_are_refused(data: bytes, words: str) -> None:
    with pytest.raises(QueryError) as caught:
        bind("SELECT $1", [values.NUMERIC], [data], [1])
    assert caught.value.sqlstate == "22P03"
    assert caught.value.message.startswith("parameter $1: ") and words in caught.value.message


@pytest.mark.parametrize(
    "number",
    [Decimal(10**28), Decimal(10**100), Decimal(-(10**100)), Decimal("1e-100"),
     Decimal("123.4500"), Decimal("-0.001"), Decimal("9" * 60 + "." + "9" * 40)],
)  # fmt: skip
def test_large_numerics_bind_as_exact_literals(number: Decimal) -> None:
    encoded = values.encode_binary(values.NUMERIC, str(number))
    assert bind("SELECT $1", [values.NUMERIC], [encoded], [1]) == f"SELECT {number:f}"


@given(st.floats(allow_nan=False))
def test_float8_binary_round_trip(number: float) -> None:
    encoded = values.encode_binary(values.FLOAT8, repr(number))
    assert values.decode_parameter(values.FLOAT8, encoded, 1) == number


def test_binary_results_of_other_types_are_refused() -> None:
    with pytest.raises(values.ValueFormatError, match="binary format"):
        values.encode_binary(600, "(1,2)")  # point: no binary form in dpproxy
    assert values.encode_binary(values.DATE, "2000-01-03") == struct.pack("!i", 2)
    assert values.decode_parameter(values.DATE, b"infinity", 0) == "infinity"
    assert values.decode_parameter(values.TIMESTAMPTZ, struct.pack("!q", 0), 1) == dt.datetime(
        2000, 1, 1, tzinfo=dt.UTC
    )


# --- where the placeholders are: PostgreSQL's lexical rules, not sqlglot's ---


@pytest.mark.parametrize(
    ("sql", "params", "expected"),
    [
        # psycopg writes "%s,%s" as "$1,$2": sqlglot alone cannot tokenize that.
        ("SELECT COUNT(*) FROM visits WHERE cost IN ($1,$2)", [b"1", b"2"],
         "SELECT COUNT(*) FROM visits WHERE cost IN ('1', '2')"),
        ("SELECT COUNT(*) FROM visits WHERE cost IN ($1)", [b"1"],
         "SELECT COUNT(*) FROM visits WHERE cost IN ('1')"),
        ("SELECT $1::int,$2::int", [b"1", b"2"], "SELECT CAST(1 AS INT), CAST(2 AS INT)"),
        ("SELECT x FROM t WHERE x=$1", [b"a"], "SELECT x FROM t WHERE x = 'a'"),
        ("SELECT $1+$2, $1||$2", [b"a", b"b"], "SELECT 'a' + 'b', 'a' || 'b'"),
        ("SELECT '$1', $1", [b"a"], "SELECT '$1', 'a'"),
        ("SELECT 'it''s $1,$2', $1", [b"a"], "SELECT 'it''s $1,$2', 'a'"),
        ("SELECT E'\\' $1 ', $1", [b"a"], "SELECT e''' $1 ', 'a'"),
        ("SELECT '\\', $1", [b"a"], "SELECT '\\', 'a'"),  # a backslash is a character
        ("SELECT $1,''", [b"a"], "SELECT 'a', ''"),  # sqlglot failed on '' at the very end
        ("SELECT $1 -- the end", [b"a"], "SELECT 'a'"),
        ("SELECT $q$ $1 $q$, $$ $2 $$, $1", [b"a"], "SELECT ' $1 ', ' $2 ', 'a'"),
        ('SELECT "$1" FROM t WHERE y = $1', [b"a"], "SELECT \"$1\" FROM t WHERE y = 'a'"),
        ("SELECT a$1 FROM t WHERE y = $1", [b"a"], "SELECT a$1 FROM t WHERE y = 'a'"),
        ("SELECT 1 -- $2\n, $1", [b"a"], "SELECT 1 /* $2 */, 'a'"),
        ("SELECT /* $2 /* $3 */ $4 */ $1", [b"a"], "/* $2 / * $3 * / $4 */ SELECT 'a'"),
    ],
)  # fmt: skip
def test_placeholders_are_found_as_postgresql_finds_them(
    sql: str, params: list[bytes], expected: str
) -> None:
    parsed = parameters.prepare(sql, [])
    assert len(parsed.parameter_types) == len(params)
    assert parameters.bind(parsed, [], params) == expected


def test_placeholders_inside_quotes_or_comments_are_not_parameters() -> None:
    for sql in ["SELECT '$1'", "SELECT $$ $1 $$", 'SELECT "$1" FROM t', "SELECT 1 /* $1 */",
                "SELECT x$1 FROM t", "SELECT 1 -- $1"]:  # fmt: skip
        parsed = parameters.prepare(sql, [])
        assert parsed.parameter_types == ()
        assert parameters.bind(parsed, [], []) == sql
    # An unused parameter gives no tree: its value is still checked, as PostgreSQL does.
    parsed = parameters.prepare("SELECT '$1'", [values.TEXT])
    assert parameters.bind(parsed, [], [b"x"]) == "SELECT '$1'"
    with pytest.raises(QueryError) as caught:
        parameters.bind(parsed, [], [b"\xff"])
    assert caught.value.sqlstate == "22021"
    assert caught.value.message == 'parameter $1: invalid byte sequence for encoding "UTF8": 0xff'


@pytest.mark.parametrize(
    ("sql", "declared", "sqlstate", "message"),
    [
        ("SELECT 1; SELECT 2", [], "42601", "cannot insert multiple commands"),
        ("SELECT 1; SELECT $1", [], "42601", "cannot insert multiple commands"),
        ("SELECT 1", [2**32 - 1], "42704", "type with OID 4294967295 does not exist"),
        ("SELECT $1", [2**31], "42704", "type with OID 2147483648 does not exist"),
        ("SELECT $1abc", [], "42601", 'trailing junk after parameter at or near "$1abc"'),
        ("SELECT $1_0", [], "42601", "trailing junk after parameter"),
        ("SELECT 1e'$1'", [], "42601", "trailing junk after numeric literal"),
        ("SELECT $0", [], "42P02", "there is no parameter $0"),
        ("SELECT '$1", [], "42601", "unterminated quoted string"),
        ("SELECT 'a'', $1", [], "42601", "unterminated quoted string"),
        ("SELECT $x$ $1", [], "42601", "unterminated dollar-quoted string"),
        ("SELECT /* /* */ $1", [], "42601", "unterminated /* comment"),
        ('SELECT "$1', [], "42601", "unterminated quoted identifier"),
        # sqlglot reads "@1" (PostgreSQL's absolute value of 1) as a placeholder, and a
        # placeholder after a value as its alias: refused, never bound.
        ("SELECT @1 + $1", [], "42601", "cannot read this statement"),
        ("SELECT 1 $1", [], "42601", "cannot read this statement"),
        ("SELECT $1$2", [], "42601", "cannot read this statement"),
        ("SELECT $99999999999999999999999", [], "08P01", "too many parameters"),
    ],
)
def test_statements_postgresql_refuses_at_parse(
    sql: str, declared: list[int], sqlstate: str, message: str
) -> None:
    with pytest.raises(QueryError) as caught:
        parameters.prepare(sql, declared)
    assert caught.value.sqlstate == sqlstate
    assert message in caught.value.message


def test_one_statement_with_empty_ones_around_it_is_one() -> None:
    for sql in ["SELECT 1;", "SELECT 1;;", ";", "SELECT 1; -- done", "SELECT ';'", "SELECT $1;"]:
        parameters.prepare(sql, [])


quoted_text = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"))


@given(quoted_text, quoted_text.filter(lambda t: "\n" not in t and "\r" not in t))
def test_only_the_real_placeholder_is_bound(inside: str, comment: str) -> None:
    literal = "'" + inside.replace("'", "''") + "'"
    sql = f"SELECT {literal},$1 -- {comment}\n"
    parsed = parameters.prepare(sql, [])
    assert parsed.parameter_types == (values.TEXT,)
    tree = sqlglot.parse_one(parameters.bind(parsed, [], [b"value"]), dialect="postgres")
    first, second = tree.expressions
    assert isinstance(first, sqlglot.exp.Literal) and first.this == inside
    assert isinstance(second, sqlglot.exp.Literal) and second.this == "value"


@pytest.mark.parametrize(
    "sql", ["SELECT COUNT(*) FROM $1", "SELECT COUNT(*) FROM visits WHERE visits.$1 > 2"]
)
def test_a_parameter_never_stands_for_a_name(sql: str) -> None:
    """PostgreSQL takes $n for a value only; bound as text, FROM $1 with 'VISITS' read the
    table visits (review)."""
    with pytest.raises(QueryError, match=r'syntax error at or near "\$1"') as caught:
        parameters.prepare(sql, [])
    assert caught.value.sqlstate == "42601"


@pytest.mark.parametrize(
    ("sql", "near"),
    [
        ("SET dpproxy.epsilon = $1", "$1"),
        ("set time zone $1", "$1"),
        ("SHOW $1", "$1"),
        ("RESET $2", "$2"),
        ("BEGIN ISOLATION LEVEL $1", "$1"),
        ("/* c */ SAVEPOINT $1", "$1"),
        ("DEALLOCATE $1", "$1"),
        ("SET LOCAL dpproxy.delta = '1e-6' || $3", "$3"),
    ],
)
def test_session_statements_take_no_parameters(sql: str, near: str) -> None:
    # As PostgreSQL: a syntax error at the placeholder when the statement is prepared
    # (dpproxy bound the value and ran SET dpproxy.epsilon = $1).
    with pytest.raises(QueryError) as caught:
        parameters.prepare(sql, [])
    assert caught.value.sqlstate == "42601"
    assert caught.value.message == f'syntax error at or near "{near}"'


def test_queries_with_a_word_of_a_session_statement_still_take_parameters() -> None:
    for sql in ("SELECT $1 AS set", 'SELECT COUNT(*) FROM visits WHERE "show" = $1'):
        assert parameters.prepare(sql, []).parameter_types == (25,)
