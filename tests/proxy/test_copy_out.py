"""COPY (query) TO STDOUT: the protocol's messages in bytes, the statement as dpproxy reads
it, and the rows as dpproxy writes them compared with PostgreSQL 15's COPY over a table of
the same values (text and CSV, every option, NULLs, tabs, quotes, newlines, backslashes,
unicode, numbers, dates), with the errors PostgreSQL gives for options it refuses."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from proxy import parameters
from proxy.copy_out import CopyFormat, copy_lines, copy_messages, copy_result, forced_columns
from proxy.copy_statement import is_copy, read_copy
from proxy.protocol import codec
from proxy.seam import ColumnDescription, CopyOut, Notice, QueryError, StatementResult
from proxy.several_statements import Statement

# --- the messages --------------------------------------------------------------------


def test_copy_out_response_data_and_done_bytes() -> None:
    assert codec.copy_out_response((0, 0, 0)) == b"H\x00\x00\x00\x0d\x00\x00\x03" + b"\x00" * 6
    assert codec.copy_out_response(()) == b"H\x00\x00\x00\x07\x00\x00\x00"
    assert codec.copy_data(b"a\tb\n") == b"d\x00\x00\x00\x08a\tb\n"
    assert codec.copy_done() == codec.COPY_DONE == b"c\x00\x00\x00\x04"


def test_copy_messages_one_copy_data_per_line() -> None:
    data = copy_messages(CopyOut(2, ("x,y\n", "é,\n")))
    assert data == (
        b"H\x00\x00\x00\x0b\x00\x00\x02\x00\x00\x00\x00"
        + b"d\x00\x00\x00\x08x,y\n"
        + b"d\x00\x00\x00\x08\xc3\xa9,\n"
        + b"c\x00\x00\x00\x04"
    )


def test_copy_result_keeps_the_notices_and_counts_the_rows() -> None:
    notice = Notice("dpproxy: this answer cost ε=1")
    answer = StatementResult(
        tag="SELECT 2",
        columns=(ColumnDescription("k", 25), ColumnDescription("n", 20)),
        rows=(("a", "1"), (None, "2")),
        notices=(notice,),
    )
    copied = copy_result(answer, CopyFormat(csv=True, delimiter=",", null="", header=True))
    assert copied.tag == "COPY 2" and copied.notices == (notice,)
    assert copied.columns is None and copied.rows == ()
    assert copied.copy == CopyOut(2, ("k,n\n", "a,1\n", ",2\n"))


def test_force_quote_names_columns_of_the_query() -> None:
    csv = CopyFormat(csv=True, delimiter=",", null="", force_quote=("b", "a"))
    assert forced_columns(csv, ["a", "b", "c"]) == (True, True, False)
    assert forced_columns(CopyFormat(csv=True, force_quote_all=True), ["a", "b"]) == (True, True)
    with pytest.raises(QueryError) as missing:
        forced_columns(csv, ["a", "c"])
    assert (missing.value.sqlstate, missing.value.message) == ("42703", 'column "b" does not exist')
    twice = CopyFormat(csv=True, force_quote=("a", "a"))
    with pytest.raises(QueryError) as repeated:
        forced_columns(twice, ["a", "a"])  # the first column of the name, twice
    assert repeated.value.sqlstate == "42701"


# --- the statement -------------------------------------------------------------------


def test_is_copy() -> None:
    assert is_copy("COPY (SELECT 1) TO STDOUT")
    assert is_copy("  /* x */ -- y\n copy(select 1) to stdout")
    assert not is_copy("SELECT 'COPY'")
    assert not is_copy("copying")
    assert not is_copy("")


def test_the_query_is_handed_on_as_written_and_placed() -> None:
    sql = "COPY /* ( */ (\n  SELECT ')' AS \"(\", $$)$$ -- )\n  FROM t\n) TO STDOUT;"
    copy = read_copy(sql)
    assert copy.query == "SELECT ')' AS \"(\", $$)$$ -- )\n  FROM t"
    assert copy.place == (1, 2)
    assert copy.format == CopyFormat()
    error = QueryError("42601", "syntax error at or near x (line 2, column 3)")
    placed = Statement(copy.query, *copy.place).placed(error)
    assert placed.message == "syntax error at or near x (line 3, column 3)"


@pytest.mark.parametrize(
    ("sql", "sqlstate", "message"),
    [
        ("COPY visits TO STDOUT", "0A000", "COPY of a table would release its rows"),
        ("COPY visits (cost) TO STDOUT CSV", "0A000", "COPY of a table would release its rows"),
        ("COPY visits FROM STDIN", "0A000", "dpproxy is read-only: COPY … FROM"),
        ("COPY (SELECT 1) FROM STDIN", "42601", 'syntax error at or near "FROM"'),
        ("COPY (SELECT 1) TO '/tmp/x.csv'", "0A000", "dpproxy does not write files"),
        ("COPY (SELECT 1) TO PROGRAM 'cat'", "0A000", "dpproxy does not run programs"),
        ("COPY (SELECT 1) TO STDOUT BINARY", "0A000", "dpproxy does not write COPY's binary"),
        ("COPY (SELECT 1) TO STDOUT (FORMAT binary)", "0A000", "dpproxy does not write COPY's"),
        ("COPY (SELECT 1) TO STDOUT ENCODING 'LATIN1'", "0A000", "dpproxy writes COPY in UTF8"),
        ("COPY (INSERT INTO t VALUES (1)) TO STDOUT", "0A000", "dpproxy is read-only"),
        ("COPY (SHOW all) TO STDOUT", "42601", 'syntax error at or near "SHOW"'),
        ("COPY () TO STDOUT", "42601", 'syntax error at or near ")"'),
        ("COPY (SELECT 1", "42601", "syntax error at end of input"),
        ("COPY", "42601", "syntax error at end of input"),
        ("COPY (SELECT 1) TO STDOUT 'x", "42601", "unterminated quoted string"),
    ],
)
def test_copies_that_are_refused(sql: str, sqlstate: str, message: str) -> None:
    with pytest.raises(QueryError) as refused:
        read_copy(sql)
    assert refused.value.sqlstate == sqlstate
    assert refused.value.message.startswith(message), refused.value.message


def test_a_copy_takes_no_parameters() -> None:
    """As PostgreSQL's: a Bind that gives a COPY's statement a value fails (08P01), and one
    that gives none leaves $1 for the query to refuse."""
    parsed = parameters.prepare("COPY (SELECT $1::int AS a) TO STDOUT", [23])
    assert parsed.parameter_types == () and parsed.tree is None
    with pytest.raises(QueryError) as error:
        parameters.bind(parsed, [], [b"1"])
    assert error.value.sqlstate == "08P01"
    assert parameters.bind(parsed, [], []) == "COPY (SELECT $1::int AS a) TO STDOUT"


def test_refusals_say_what_dpproxy_exports() -> None:
    with pytest.raises(QueryError) as refused:
        read_copy("COPY patients TO STDOUT")
    assert "COPY (SELECT … aggregates …) TO STDOUT" in (refused.value.hint or "")
    with pytest.raises(QueryError) as binary:
        read_copy("COPY (SELECT 1) TO STDOUT WITH (FORMAT binary)")
    assert "FORMAT csv" in (binary.value.hint or "")


# --- compared with PostgreSQL 15 -------------------------------------------------------

#: Text values that COPY writes with care.
TEXTS = [
    "plain",
    "",
    "tab\there",
    "new\nline",
    "carriage\rreturn",
    "crlf\r\n",
    "back\\slash",
    "\\N",
    "\\.",
    'quote"d',
    "it's",
    "comma,here",
    "semi;colon",
    "pipe|here",
    "unicode é ✓ 𝄞 中文",
    "control\x01\x02\x1f\x7f",
    "bs\b ff\f vt\v",
    "NULL",
    "N",
    " spaced ",
    '"',
    '""',
    "\\",
    ",",
    "!",
]
COLUMNS = (
    "id int, t text, n numeric, f float8, r real, big bigint, d date, ts timestamp, b bool, "
    "i interval"
)
OTHERS = [
    "1.50, 0.1, 1.5, 9223372036854775807, '2024-01-02', '2024-01-02 03:04:05.123456', true, "
    "'1 day 02:03:04'",
    "-0.000123, -0.0, 3.4e38, -9223372036854775808, '1999-12-31', '2000-02-29 00:00:00', "
    "false, '-1 mons'",
    "1e20, 1e300, 'NaN', 0, '0001-01-01', '1970-01-01 00:00:00.5', NULL, '00:00:00.000001'",
    "NULL, 'Infinity', '-Infinity', NULL, '9999-12-31', NULL, true, '3 years 2 days'",
    "12345678901234567890.123456789, 1.5e-10, NULL, 42, NULL, '2024-02-29 23:59:59', false, NULL",
]
QUERY = "SELECT * FROM {table} ORDER BY id"
SINGLE = "SELECT t FROM {table} ORDER BY id"

#: Options dpproxy writes as PostgreSQL does, or refuses with PostgreSQL's error.
OPTIONS = [
    "",
    "WITH",
    "CSV",
    "CSV HEADER",
    "WITH CSV HEADER",
    "HEADER",
    "CSV DELIMITER ';'",
    "CSV DELIMITER AS ';' NULL AS 'N' QUOTE AS '''' ESCAPE AS '\\' FORCE QUOTE *",
    "CSV FORCE QUOTE t, d HEADER",
    "CSV FORCE QUOTE zz",
    "CSV FORCE QUOTE t, t",
    "CSV FORCE NOT NULL t",
    "CSV FORCE NULL t",
    "FORCE QUOTE t",
    "DELIMITER ','",
    "DELIMITER '|' NULL 'nil'",
    "DELIMITER E'\\x01'",
    "DELIMITER E'\\x0b'",
    "DELIMITER E'\\t' NULL ''",
    "NULL 'N'",
    "ENCODING 'UTF8'",
    "ENCODING 'utf-8'",
    "ENCODING 'nope'",
    "ENCODING utf8",
    "FREEZE",
    "CSV CSV",
    "CSV BINARY",
    "HEADER HEADER",
    "CSV HEADER extra",
    "USING DELIMITERS ','",
    "(FORMAT csv)",
    "(FORMAT CSV)",
    '(FORMAT "csv")',
    "(FORMAT 'csv')",
    "(FORMAT 'CSV')",
    "(FORMAT xml)",
    "(FORMAT)",
    "(FORMAT text, HEADER)",
    "(FORMAT csv, HEADER true)",
    "(FORMAT csv, HEADER false)",
    "(FORMAT csv, HEADER 0)",
    "(FORMAT csv, HEADER 1)",
    "(FORMAT csv, HEADER +1)",
    "(FORMAT csv, HEADER -1)",
    "(FORMAT csv, HEADER 2)",
    "(FORMAT csv, HEADER 1.0)",
    "(FORMAT csv, HEADER on)",
    "(FORMAT csv, HEADER OFF)",
    "(FORMAT csv, HEADER 'yes')",
    "(FORMAT csv, HEADER match)",
    "(FORMAT csv, HEADER 'MATCH')",
    "(FORMAT csv, HEADER *)",
    "(FORMAT csv, HEADER (true))",
    "(FORMAT csv, FORMAT csv)",
    "(FORMAT csv, FORCE_QUOTE *)",
    '(FORMAT csv, FORCE_QUOTE (t, "d"))',
    "(FORMAT csv, FORCE_QUOTE ('n'))",
    "(FORMAT csv, FORCE_QUOTE (T))",
    '(FORMAT csv, FORCE_QUOTE ("T"))',
    "(FORMAT csv, FORCE_QUOTE t)",
    "(FORMAT csv, FORCE_QUOTE ())",
    "(FORMAT csv, FORCE_QUOTE)",
    "(FORMAT csv, FORCE_QUOTE *, FORCE_QUOTE (t))",
    "(FORCE_QUOTE *)",
    "(FORMAT csv, FORCE_NOT_NULL (t))",
    "(FORMAT csv, FORCE_NULL (t))",
    "(FORCE_NOT_NULL (t))",
    "(FORMAT csv, FORCE_NOT_NULL t)",
    "(FORMAT csv, QUOTE '''')",
    "(FORMAT csv, QUOTE '''', ESCAPE '\\')",
    "(FORMAT csv, ESCAPE '\\')",
    "(FORMAT csv, QUOTE '|', ESCAPE '!', DELIMITER ';')",
    "(FORMAT csv, QUOTE ',')",
    "(FORMAT csv, QUOTE '')",
    "(FORMAT csv, QUOTE 'ab')",
    "(FORMAT csv, ESCAPE 'xy')",
    "(QUOTE '\"')",
    "(ESCAPE '\"')",
    "(FORMAT csv, NULL 'a,b')",
    "(FORMAT csv, NULL 'a\"b')",
    "(FORMAT csv, NULL 'N')",
    "(FORMAT csv, NULL 'NULL', HEADER)",
    "(FORMAT csv, NULL 1)",
    "(FORMAT csv, NULL 007)",
    "(FORMAT csv, NULL 1.50)",
    "(FORMAT csv, NULL -1.5)",
    "(FORMAT csv, NULL +1.5)",
    "(FORMAT csv, NULL - 3)",
    "(FORMAT csv, NULL 99999999999)",
    "(FORMAT csv, NULL true)",
    "(FORMAT csv, NULL on)",
    "(FORMAT csv, NULL xx)",
    "(FORMAT csv, NULL *)",
    "(FORMAT csv, NULL (x, y))",
    "(FORMAT csv, NULL null)",
    "(FORMAT csv, NULL select)",
    "(FORMAT csv, NULL binary)",
    "(FORMAT csv, NULL $$plain$$)",
    "(FORMAT csv, NULL E'\\\\N')",
    "(FORMAT csv, NULL U&'\\0041')",
    "(DELIMITER 'ab')",
    "(DELIMITER '')",
    "(DELIMITER 'a')",
    "(DELIMITER 'A')",
    "(DELIMITER '.')",
    "(DELIMITER '1')",
    "(DELIMITER 1)",
    "(DELIMITER '\\')",
    "(DELIMITER 'é')",
    "(DELIMITER E'\\n')",
    "(DELIMITER E'\\r', FORMAT xml)",
    "(FORMAT csv, DELIMITER 'a')",
    "(FORMAT binary, DELIMITER ',')",
    "(FORMAT binary, NULL 'x')",
    "(FORMAT binary, HEADER)",
    "(NULL E'\\n')",
    "(NULL E'a\\tb')",
    "(NULL 'plain')",
    "(FREEZE)",
    "(FREEZE yes)",
    "(FREEZE 1)",
    "(FREEZE true, FREEZE false)",
    "(ENCODING 'UTF8')",
    "(ENCODING utf8)",
    "(ENCODING 'Unicode')",
    "(ENCODING 'SQL_ASCII')",
    "(ENCODING 'nope')",
    "(ENCODING)",
    "(foo 1)",
    '("FORMAT" csv)',
    '("format" csv)',
    "(select 1)",
    "(FORMAT csv,)",
    "()",
    "(FORMAT csv",
    "(FORMAT csv))",
    "(convert_selectively (t))",
    "(convert_selectively)",
    "(convert_selectively t)",
    "(OIDS true)",
    "(FORMAT csv, HEADER, DELIMITER ';', NULL 'NULL', QUOTE '''', ESCAPE '\\', FORCE_QUOTE (t))",
    "(FORMAT csv, DELIMITER E'\\t')",
    "(FORMAT text, DELIMITER '|')",
    "(FORMAT text, DELIMITER ',')",
    "(FORMAT text, DELIMITER '\"')",
    "TO STDOUT",
    "; ;",
]
#: Whole statements, compared alike.
STATEMENTS = [
    "COPY ({single}) TO STDOUT CSV",
    "COPY ({single}) TO STDOUT CSV HEADER",
    "COPY ({single}) TO STDOUT (FORMAT csv, NULL '\\.')",
    "COPY ({single}) TO STDIN",
    "COPY ({query}) TO STDOUT WHERE true",
    "COPY ({query}) TO",
    "COPY ({query}) TO STDOUT 'x'",
    "COPY ({query}) TO PROGRAM STDOUT",
    "COPY /* c */ ( -- x\n {query}\n ) TO STDOUT CSV HEADER",
    "COPY (({query})) TO STDOUT",
    "COPY (WITH x AS ({query}) SELECT * FROM x) TO STDOUT",
    "copy (select 'x\\y' as \"z\\q\", 'p' as \"a,b\") to stdout header",
    'COPY (SELECT \'p\' AS "a,b", \'"\' AS "q""") TO STDOUT CSV HEADER',
    "COPY (SELECT '' AS a, NULL AS b) TO STDOUT CSV",
    "COPY (SELECT 'x' AS a, NULL AS b) TO STDOUT CSV NULL 'x' HEADER",
    "COPY (SELECT 'x' AS a) TO STDOUT CSV NULL 'a' HEADER",
    "COPY (SELECT E'\\\\.' AS \"\\.\") TO STDOUT CSV HEADER",
    "COPY (SELECT 1 AS a, 2 AS a) TO STDOUT CSV FORCE QUOTE a",
    "COPY (VALUES (1, 'x'), (2, NULL)) TO STDOUT (FORMAT csv, HEADER)",
    "COPY (SELECT * FROM (VALUES (1), (2)) AS v(a) WHERE false) TO STDOUT CSV HEADER",
]
#: Where dpproxy refuses what PostgreSQL does: the binary format, and encodings other
#: than UTF8 (PostgreSQL converts the text).
DPPROXY_REFUSES = {
    "BINARY": "dpproxy does not write COPY's binary format",
    "(FORMAT binary)": "dpproxy does not write COPY's binary format",
    "ENCODING 'latin1'": 'dpproxy writes COPY in UTF8 only: ENCODING "latin1"',
    "(ENCODING 'WIN1252')": 'dpproxy writes COPY in UTF8 only: ENCODING "WIN1252"',
}

Outcome = tuple[str, bytes] | tuple[str, str | None, str | None]


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[tuple[psycopg.Connection[tuple[object, ...]], str]]:
    """A connection to PostgreSQL and a table of the values above (in a schema of its
    own, dropped afterwards)."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        schema = f"dpproxy_copy_{uuid.uuid4().hex[:10]}"
        conn.execute(f"CREATE SCHEMA {schema}")
        table = f"{schema}.copied"
        conn.execute(f"CREATE TABLE {table} ({COLUMNS})")
        for number, text in enumerate(TEXTS):
            others = OTHERS[number % len(OTHERS)]
            conn.execute(f"INSERT INTO {table} VALUES ({number}, %s, {others})", (text,))
        conn.execute(f"INSERT INTO {table} (id) VALUES (1000)")  # NULL in every column
        try:
            yield conn, table
        finally:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def postgres_copy(conn: psycopg.Connection[tuple[object, ...]], sql: str) -> Outcome:
    try:
        with conn.cursor() as cursor, cursor.copy(sql) as copy:
            return ("ok", b"".join(bytes(block) for block in copy))
    except psycopg.Error as error:
        return ("error", error.diag.sqlstate, error.diag.message_primary)


def text_rows(
    conn: psycopg.Connection[tuple[object, ...]], sql: str
) -> tuple[list[str], list[tuple[str | None, ...]]]:
    """The column names and text values of ``sql``'s answer: the DataRows' text."""
    result = conn.pgconn.exec_(sql.encode())
    if result.status != psycopg.pq.ExecStatus.TUPLES_OK:
        raise AssertionError(result.get_error_message())
    names = [(result.fname(c) or b"").decode() for c in range(result.nfields)]
    rows = []
    for r in range(result.ntuples):
        values = (result.get_value(r, c) for c in range(result.nfields))
        rows.append(tuple(None if v is None else v.decode() for v in values))
    return names, rows


def dpproxy_copy(conn: psycopg.Connection[tuple[object, ...]], sql: str) -> Outcome:
    """What dpproxy writes for ``sql``, the rows of its query being PostgreSQL's answer
    (its DataRows' text)."""
    try:
        copy = read_copy(sql)
        names, rows = text_rows(conn, copy.query)
        forced = forced_columns(copy.format, names)
        return ("ok", "".join(copy_lines(copy.format, names, rows, forced)).encode())
    except QueryError as error:
        return ("error", error.sqlstate, error.message)


@pytest.mark.postgres
@pytest.mark.parametrize("options", OPTIONS)
def test_options_as_postgresql(
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str], options: str
) -> None:
    conn, table = postgres
    sql = f"COPY ({QUERY.format(table=table)}) TO STDOUT {options}"
    expected = postgres_copy(conn, sql)
    assert dpproxy_copy(conn, sql) == expected
    if options in ("", "CSV", "CSV HEADER"):  # (the comparison is of something)
        assert expected[0] == "ok" and len(expected[1]) > 500


@pytest.mark.postgres
@pytest.mark.parametrize("statement", STATEMENTS)
def test_statements_as_postgresql(
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str], statement: str
) -> None:
    conn, table = postgres
    sql = statement.format(query=QUERY.format(table=table), single=SINGLE.format(table=table))
    assert dpproxy_copy(conn, sql) == postgres_copy(conn, sql)


@pytest.mark.postgres
@pytest.mark.parametrize("options", sorted(DPPROXY_REFUSES))
def test_what_dpproxy_refuses_and_postgresql_writes(
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str], options: str
) -> None:
    conn, table = postgres
    ascii_only = f"SELECT * FROM {table} WHERE t ~ '^[ -~]*$' ORDER BY id"  # (any encoding)
    sql = f"COPY ({ascii_only}) TO STDOUT {options}"
    assert postgres_copy(conn, sql)[0] == "ok"
    outcome = dpproxy_copy(conn, sql)
    assert outcome[:2] == ("error", "0A000")
    assert str(outcome[2]).startswith(DPPROXY_REFUSES[options])


@pytest.mark.postgres
def test_the_values_are_written_as_postgresql_writes_them(
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str],
) -> None:
    """Every line of the text format, value by value: escapes of every character below
    U+0020, the backslash, and non-ASCII text unchanged."""
    conn, table = postgres
    query = f"SELECT t, chr(k) AS c FROM {table}, generate_series(1, 127) AS g(k) ORDER BY id, k"
    for options in ("", "CSV", "(FORMAT csv, QUOTE '|', ESCAPE '!')", "(DELIMITER E'\\x01')"):
        sql = f"COPY ({query}) TO STDOUT {options}"
        expected = postgres_copy(conn, sql)
        assert expected[0] == "ok", expected
        assert dpproxy_copy(conn, sql) == expected


def test_frame_lengths() -> None:
    """Each message's length counts itself and its body."""
    message = codec.copy_data("ü\n".encode())
    assert struct.unpack("!i", message[1:5])[0] == len(message) - 1
