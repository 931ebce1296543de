"""Query parameters (``$1``, ``$2``, ...) bound into SQL safely, through the syntax tree.

Never by pasting text: the statement is parsed with sqlglot (PostgreSQL dialect), each
placeholder node is replaced by a typed literal node (a number, a quoted string, TRUE,
NULL, or a CAST of a quoted string), and the SQL is generated again by sqlglot. Numbers
are checked to be numbers before they become numeric literals; everything else is a
string literal that sqlglot quotes. The session (and so the audit log) sees the bound SQL.

Where the placeholders are is decided first by :func:`scan`, which reads the text by
PostgreSQL's lexical rules (proxy.sql_lexer: string constants, quoted identifiers, dollar
quotes and comments hide a ``$1``; ``x$1`` is an identifier). sqlglot is given the same
text with a space on each side of every placeholder (it cannot tokenize ``$1,$2``: it
takes ``$1,$`` for the start of a dollar quote), and its tree must hold exactly the
placeholders the scan found, else the statement is refused: text is never bound by a
reading that PostgreSQL would not make. The scan also counts the statements: a prepared statement
holds one.
"""

from __future__ import annotations

import datetime as dt
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from proxy.catalog.oid_arrays import respell_oid_arrays
from proxy.copy_statement import is_copy
from proxy.cursor_statements import query_start
from proxy.parameter_arrays import ARRAY_ELEMENTS, array_literal, empty_array, within_cast
from proxy.parameter_positions import as_constant, stands_for_position
from proxy.parameter_stand_ins import Role, stand_ins
from proxy.parameter_type_rules import ColumnOids
from proxy.parameter_types import Inference, infer, parameter_number
from proxy.protocol import values
from proxy.protocol.values import Value, ValueFormatError, decode_parameter
from proxy.seam import QueryError
from proxy.sql_lexer import COMMENT, ERROR, PARAMETER, SEMICOLON, lex, lexer_error
from proxy.statements import StatementSyntaxError, recognize
from rewriter.parse import MAX_SQL_LENGTH

PROTOCOL_VIOLATION = "08P01"
SYNTAX_ERROR = "42601"
UNDEFINED_PARAMETER = "42P02"
UNDEFINED_OBJECT = "42704"
PROGRAM_LIMIT_EXCEEDED = "54000"
STATEMENT_TOO_COMPLEX = "54001"
MAX_PARAMETERS = 65535
MAX_TYPE_OID = 0x7FFFFFFF  # a Parse's type OID above this was sent as a negative int32
DIALECT = "postgres"
CANNOT_READ = "dpproxy cannot read this statement to bind its parameters"
CANNOT_READ_HINT = "check the SQL; parameters are $1, $2, ... in place of values"

#: Errors of a value sent in text for an inferred type that bind as the text instead.
_READ_AS_TEXT = frozenset(
    {
        values.INVALID_TEXT_REPRESENTATION,
        values.NUMERIC_OUT_OF_RANGE,
        values.DATETIME_FIELD_OVERFLOW,
    }
)


@dataclass(frozen=True)
class ParsedStatement:
    """A statement's text, its parsed tree (None when it has no placeholders) and the
    type OID of each parameter: declared in Parse, else inferred from where it stands
    (proxy.parameter_types: a cast, a column it is compared with ..., else text)."""

    sql: str
    tree: exp.Expr | None
    parameter_types: tuple[int, ...]
    #: Of ``DECLARE … FOR query``: the text before the query, which ``tree`` is of (the
    #: bound statement is this text, then the query bound as if it came alone); else "".
    head: str = ""
    #: The parameters (numbered from 1) whose type dpproxy inferred from a context other
    #: than a cast: a value sent in text that their type does not read (``'2024-1-1'``
    #: for a date) is bound as a quoted string, as before dpproxy inferred types, which
    #: the database reads as PostgreSQL reads a literal of unknown type there.
    inferred: frozenset[int] = frozenset()
    #: The literal each parameter stands in as at Describe (proxy.parameter_stand_ins).
    stand_ins: tuple[exp.Expr, ...] = ()


def prepare(
    sql: str, declared: Sequence[int], columns: ColumnOids | None = None
) -> ParsedStatement:
    """Read ``sql`` once (at Parse time) and parse it if it has placeholders. Raise
    QueryError where PostgreSQL's Parse fails too, and where dpproxy cannot tell.
    ``columns``: the types of the analyst's columns, which undeclared parameters compared
    with them take (None: none known)."""
    check_length(sql)
    for oid in declared:
        if oid > MAX_TYPE_OID:
            raise QueryError(
                UNDEFINED_OBJECT,
                f"type with OID {oid} does not exist",
                hint="declare each parameter's type as 0 (unspecified) or a built-in type's OID",
            )
    scanned = scan(sql)
    if scanned.statements > 1:
        raise QueryError(SYNTAX_ERROR, "cannot insert multiple commands into a prepared statement")
    if not scanned.placeholders:
        return ParsedStatement(sql, None, tuple(declared))
    if is_copy(sql):  # as PostgreSQL's, a COPY takes no parameters (its Bind of any fails)
        return ParsedStatement(sql, None, ())
    declared_query = query_start(sql)  # DECLARE's query takes parameters as a query does
    if declared_query is not None and scanned.placeholders[0].start >= declared_query:
        query = prepare(sql[declared_query:], declared, columns)
        return ParsedStatement(
            sql,
            query.tree,
            query.parameter_types,
            sql[:declared_query],
            query.inferred,
            query.stand_ins,
        )
    _refuse_in_session_statement(sql, scanned.placeholders[0])
    numbers = sorted(p.number for p in scanned.placeholders)
    count = max(numbers[-1], len(declared))
    if count > MAX_PARAMETERS:
        raise QueryError(PROTOCOL_VIOLATION, f"too many parameters: {count}")
    if numbers[0] < 1:
        raise QueryError(UNDEFINED_PARAMETER, f"there is no parameter ${numbers[0]}")
    spaced = _spaced(sql, scanned.placeholders)
    tree = _parse(spaced)
    nodes = list(tree.find_all(exp.Parameter))
    if sorted(parameter_number(n) or 0 for n in nodes) != numbers or any(
        n.arg_key == "alias" for n in nodes
    ):
        # sqlglot found other placeholders than PostgreSQL's rules do (it reads "@1" as
        # one, and "SELECT 1 $1" as an alias): binding its reading could change the SQL.
        raise QueryError(SYNTAX_ERROR, CANNOT_READ, hint=CANNOT_READ_HINT)
    for node in nodes:
        if isinstance(node.parent, _NAME_PLACES):
            # FROM $1, visits.$1: PostgreSQL takes a parameter for a value only; bound as
            # text, it would become a name.
            raise QueryError(
                SYNTAX_ERROR,
                f'syntax error at or near "${parameter_number(node)}"',
                hint="a parameter stands for a value, never for a table or column name",
            )
    types = [declared[i] if i < len(declared) else 0 for i in range(count)]
    known = {number: oid for number, oid in enumerate(types, 1) if oid != 0}
    try:
        inference = infer(tree, spaced, known, columns)
        # What each place wants, declared types aside: the stand-ins follow it.
        context = infer(tree, spaced, {}, columns) if known else inference
    except RecursionError:  # nested deeper than the walk goes: text and NULL, as before
        inference = context = Inference({}, {})
    cast = {parameter_number(n) for n in nodes if isinstance(n.parent, exp.Cast)}
    inferred: set[int] = set()
    for number in _placeholders(tree):
        if types[number - 1] == 0:
            types[number - 1] = inference.types.get(number, values.TEXT)
            if number not in cast:
                inferred.add(number)
    stand_ins = tuple(
        _stand_in(oid, context.roles.get(number), context.types.get(number))
        for number, oid in enumerate(types, 1)
    )
    return ParsedStatement(sql, tree, tuple(types), "", frozenset(inferred), stand_ins)


def _refuse_in_session_statement(sql: str, first: Placeholder) -> None:
    """PostgreSQL takes parameters in queries only: ``SET dpproxy.epsilon = $1``, ``SHOW
    $1``, ``BEGIN ISOLATION LEVEL $1`` are syntax errors at the placeholder (dpproxy bound
    the value and ran the SET)."""
    try:
        session_statement = recognize(sql) is not None
    except StatementSyntaxError:
        session_statement = True  # a session statement's word, then what it cannot read
    if session_statement:
        raise QueryError(
            SYNTAX_ERROR,
            f'syntax error at or near "{sql[first.start : first.end]}"',
            hint="SET, SHOW, BEGIN and the other session statements take no parameters: "
            "write the value in the statement's text",
        )


def check_length(sql: str) -> None:
    """Refuse a statement longer than a simple Query may be (``rewriter.parse``), before
    reading it: a parsed statement takes about 100 bytes per character."""
    if len(sql) > MAX_SQL_LENGTH:
        raise QueryError(
            PROGRAM_LIMIT_EXCEEDED,
            f"statement text is {len(sql)} characters long; dpproxy accepts at most "
            f"{MAX_SQL_LENGTH}",
            hint="shorten the statement",
        )


#: Where a placeholder would stand for a name, not a value.
_NAME_PLACES = (exp.Table, exp.Column, exp.Dot, exp.TableAlias, exp.Identifier)


def _too_deep() -> QueryError:
    """As the rewriter refuses a simple Query nested beyond what sqlglot can read."""
    return QueryError(
        STATEMENT_TOO_COMPLEX, "the statement is nested too deeply", hint="simplify the query"
    )


def _parse(text: str) -> exp.Expr:
    try:
        parsed = sqlglot.parse(respell_oid_arrays(text), dialect=DIALECT)  # $1::oid[]
        trees = [t for t in parsed if t is not None]
    except RecursionError:
        raise _too_deep() from None
    except SqlglotError:
        trees = []
    if len(trees) != 1:  # the scan found one statement, with placeholders
        raise QueryError(SYNTAX_ERROR, CANNOT_READ, hint=CANNOT_READ_HINT)
    return trees[0]


def _spaced(sql: str, placeholders: Sequence[Placeholder]) -> str:
    """``sql`` with a space on each side of every placeholder and a newline at the end:
    the same tokens for PostgreSQL (a placeholder is a whole token, outside any quote or
    comment), and text sqlglot tokenizes. sqlglot reads from each "$" to the next one or
    to the end to tell a dollar quote: the space makes that text hold whitespace, which
    makes it a placeholder, and the newline keeps a '' at the very end from failing."""
    parts: list[str] = []
    position = 0
    for placeholder in placeholders:
        parts += [
            sql[position : placeholder.start],
            " ",
            sql[placeholder.start : placeholder.end],
            " ",
        ]
        position = placeholder.end
    parts += [sql[position:], "\n"]
    return "".join(parts)


# ---------------------------------------------------------------------------------------
# Placeholders and statements, where proxy.sql_lexer (PostgreSQL's lexical rules) finds them


@dataclass(frozen=True)
class Placeholder:
    """``$number`` at ``sql[start:end]``."""

    number: int
    start: int
    end: int


@dataclass(frozen=True)
class Scan:
    placeholders: tuple[Placeholder, ...]
    spans: tuple[tuple[int, int], ...]
    """Where each statement is: ``sql[start:end]``, from after the previous ``;`` (comments
    before the statement included) to its own ``;`` (excluded) or the end. ``;`` separates
    statements; empty ones (``;;``, or only comments) do not count."""

    @property
    def statements(self) -> int:
        """How many statements the text holds."""
        return len(self.spans)


def scan(sql: str) -> Scan:
    """The placeholders and the statements (their places) of ``sql``, read by
    proxy.sql_lexer as PostgreSQL's lexer reads it (standard_conforming_strings on, which
    dpproxy's sessions keep). Raise QueryError where PostgreSQL's lexer fails, with its
    SQLSTATE and message: an unterminated quote or comment, trailing junk after a number
    or a placeholder (``$1abc``, PostgreSQL 15 on), an escape it refuses (``E'\\uD800'``,
    ``U&'\\0000'``; 42601, 22025 or 22021), so that nothing of the text runs."""
    placeholders: list[Placeholder] = []
    spans: list[tuple[int, int]] = []
    start = 0  # after the last ";"
    in_statement = False
    for kind, lexeme_start, end, message in lex(sql):
        if kind == COMMENT:
            continue
        if kind == SEMICOLON:
            if in_statement:
                spans.append((start, lexeme_start))
                in_statement = False
            start = end
            continue
        if kind == ERROR:
            raise lexer_error(message)
        in_statement = True
        if kind == PARAMETER:
            digits = sql[lexeme_start + 1 : end]
            # Beyond MAX_PARAMETERS the exact number does not matter (prepare refuses it).
            number = int(digits) if len(digits) <= 6 else MAX_PARAMETERS + 1
            placeholders.append(Placeholder(number, lexeme_start, end))
    if in_statement:
        spans.append((start, len(sql)))
    return Scan(tuple(placeholders), tuple(spans))


def _placeholders(tree: exp.Expr) -> dict[int, exp.Parameter]:
    found: dict[int, exp.Parameter] = {}
    for node in tree.find_all(exp.Parameter):
        number = parameter_number(node)
        if number is not None:
            found.setdefault(number, node)
    return found


def bind(
    statement: ParsedStatement, formats: Sequence[int], parameters: Sequence[bytes | None]
) -> str:
    """The SQL with every placeholder replaced by its value. Raise QueryError."""
    expected = len(statement.parameter_types)
    if len(parameters) != expected:
        raise QueryError(
            PROTOCOL_VIOLATION,
            f"bind message supplies {len(parameters)} parameters, but the prepared statement "
            f"requires {expected}",
        )
    if len(formats) not in (0, 1, len(parameters)):
        raise QueryError(
            PROTOCOL_VIOLATION,
            f"bind message has {len(formats)} parameter formats but {len(parameters)} parameters",
        )
    literals: list[exp.Expr] = []
    for index, (oid, data) in enumerate(zip(statement.parameter_types, parameters, strict=True)):
        fmt = formats[0] if len(formats) == 1 else (formats[index] if formats else 0)
        try:
            if oid in ARRAY_ELEMENTS and data is not None:  # a list: x = ANY(%s)
                literals.append(array_literal(oid, data, fmt))
                continue
            literals.append(literal(oid, decode_parameter(oid, data, fmt)))
        except ValueFormatError as error:
            if data is not None and fmt == values.TEXT_FORMAT and _as_text(statement, index, error):
                literals.append(exp.Literal.string(data.decode("utf-8")))
                continue
            raise QueryError(error.sqlstate, f"parameter ${index + 1}: {error.message}") from None
    if statement.tree is None:  # every value was still checked, as PostgreSQL does
        return statement.sql
    return substitute(statement, literals)


def _as_text(statement: ParsedStatement, index: int, error: ValueFormatError) -> bool:
    """Whether a value sent in text that parameter ``index`` (from 0) of an inferred type
    does not read is bound as the quoted text instead (``ParsedStatement.inferred``)."""
    return index + 1 in statement.inferred and error.sqlstate in _READ_AS_TEXT


def describe_sql(statement: ParsedStatement) -> str:
    """The statement with a stand-in for every parameter (proxy.parameter_stand_ins): a
    value of its type that every check accepts where it stands, to learn the columns the
    statement returns before its values are known; NULL where its place tells nothing."""
    if statement.tree is None:
        return statement.sql
    return substitute(statement, statement.stand_ins)


def _stand_in(oid: int, role: Role | None, wanted: int | None) -> exp.Expr:
    if oid in ARRAY_ELEMENTS:
        return empty_array(oid)
    for text in stand_ins(oid, role, wanted):
        try:
            return literal(oid, decode_parameter(oid, text.encode(), values.TEXT_FORMAT))
        except ValueFormatError:
            continue
    return exp.Null()


def substitute(statement: ParsedStatement, literals: Sequence[exp.Expr]) -> str:
    if statement.tree is None:
        return statement.sql
    try:
        tree = statement.tree.copy()
        for node in list(tree.find_all(exp.Parameter)):
            number = parameter_number(node)
            if number is None or number > len(literals):
                raise QueryError(UNDEFINED_PARAMETER, f"there is no parameter ${node.this}")
            made = within_cast(literals[number - 1].copy(), node.parent)  # $1::int[]
            if stands_for_position(node):  # GROUP BY $1: a constant, not a column's number
                made = as_constant(made, statement.parameter_types[number - 1])
            node.replace(made)
        return statement.head + tree.sql(dialect=DIALECT)
    except RecursionError:
        raise _too_deep() from None


def _cast(text: str, kind: exp.DType) -> exp.Expr:
    return exp.Cast(this=exp.Literal.string(text), to=exp.DataType.build(kind))


def literal(oid: int, value: Value) -> exp.Expr:
    """A syntax-tree literal for ``value`` of type ``oid``."""
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, int):
        return exp.Literal.number(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            text = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
            return _cast(text, exp.DataType.Type.DOUBLE)
        return exp.Literal.number(repr(value))
    if isinstance(value, Decimal):
        if not value.is_finite():
            return _cast(str(value), exp.DataType.Type.DECIMAL)
        return exp.Literal.number(format(value, "f"))
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            if oid == values.TIMESTAMPTZ:
                # An instant: its text with its offset, typed, which PostgreSQL compares
                # with a date or timestamp as an instant too (rewriter.passes
                # .time_constants); a naive timestamp would be read as a local time of the
                # session's zone, an untyped text as a date by a date.
                return _cast(value.isoformat(sep=" "), exp.DataType.Type.TIMESTAMPTZ)
            # A timestamp without time zone: PostgreSQL's input ignores an offset.
            value = value.replace(tzinfo=None)
        return _cast(value.isoformat(sep=" "), exp.DataType.Type.TIMESTAMP)
    if isinstance(value, dt.date):
        return _cast(value.isoformat(), exp.DataType.Type.DATE)
    if isinstance(value, uuid.UUID):
        return exp.Literal.string(str(value))
    if oid == values.DATE:
        return _cast(value, exp.DataType.Type.DATE)
    if oid in (values.TIMESTAMP, values.TIMESTAMPTZ):
        return _cast(value, exp.DataType.Type.TIMESTAMP)
    return exp.Literal.string(value)
