"""Query parameters (``$1``, ``$2``, ...) bound into SQL safely, through the syntax tree.

Never by pasting text: the statement is parsed with sqlglot (PostgreSQL dialect), each
placeholder node is replaced by a typed literal node (a number, a quoted string, TRUE,
NULL, or a CAST of a quoted string), and the SQL is generated again by sqlglot. Numbers
are checked to be numbers before they become numeric literals; everything else is a
string literal that sqlglot quotes. The session (and so the audit log) sees the bound SQL.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from proxy.protocol import values
from proxy.protocol.values import Value, ValueFormatError, decode_parameter
from proxy.seam import QueryError

PROTOCOL_VIOLATION = "08P01"
SYNTAX_ERROR = "42601"
UNDEFINED_PARAMETER = "42P02"
MAX_PARAMETERS = 65535
_PLACEHOLDER = re.compile(r"\$(\d+)")
DIALECT = "postgres"

# Types a `$n::type` cast tells the parameter's type by.
_CAST_OIDS: dict[exp.DType, int] = {
    exp.DataType.Type.SMALLINT: values.INT2,
    exp.DataType.Type.INT: values.INT4,
    exp.DataType.Type.BIGINT: values.INT8,
    exp.DataType.Type.FLOAT: values.FLOAT4,
    exp.DataType.Type.DOUBLE: values.FLOAT8,
    exp.DataType.Type.DECIMAL: values.NUMERIC,
    exp.DataType.Type.BOOLEAN: values.BOOL,
    exp.DataType.Type.TEXT: values.TEXT,
    exp.DataType.Type.VARCHAR: values.VARCHAR,
    exp.DataType.Type.DATE: values.DATE,
    exp.DataType.Type.TIMESTAMP: values.TIMESTAMP,
    exp.DataType.Type.TIMESTAMPTZ: values.TIMESTAMPTZ,
    exp.DataType.Type.UUID: values.UUID,
}


@dataclass(frozen=True)
class ParsedStatement:
    """A statement's text, its parsed tree (None when it has no placeholders) and the
    type OID of each parameter: declared in Parse, else inferred (a cast, else text)."""

    sql: str
    tree: exp.Expr | None
    parameter_types: tuple[int, ...]


def might_have_placeholders(sql: str) -> bool:
    return "$" in sql and _PLACEHOLDER.search(sql) is not None


def prepare(sql: str, declared: Sequence[int]) -> ParsedStatement:
    """Parse ``sql`` once (at Parse time) if it has placeholders. Raise QueryError."""
    if not might_have_placeholders(sql):
        return ParsedStatement(sql, None, tuple(declared))
    try:
        trees = [t for t in sqlglot.parse(sql, dialect=DIALECT) if t is not None]
    except SqlglotError:
        if declared:
            raise QueryError(
                SYNTAX_ERROR,
                "dpproxy cannot read this statement to bind its parameters",
                hint="check the SQL; parameters are $1, $2, ... in place of values",
            ) from None
        return ParsedStatement(sql, None, ())
    if len(trees) > 1:
        raise QueryError(SYNTAX_ERROR, "cannot insert multiple commands into a prepared statement")
    if not trees:
        return ParsedStatement(sql, None, tuple(declared))
    tree = trees[0]
    placeholders = _placeholders(tree)
    if not placeholders:
        return ParsedStatement(sql, None, tuple(declared))
    count = max(*placeholders, len(declared))
    if count > MAX_PARAMETERS:
        raise QueryError(PROTOCOL_VIOLATION, f"too many parameters: {count}")
    types = [declared[i] if i < len(declared) else 0 for i in range(count)]
    for index, node in placeholders.items():
        if types[index - 1] == 0:
            types[index - 1] = _infer(node)
    return ParsedStatement(sql, tree, tuple(types))


def _placeholders(tree: exp.Expr) -> dict[int, exp.Parameter]:
    found: dict[int, exp.Parameter] = {}
    for node in tree.find_all(exp.Parameter):
        number = _number(node)
        if number is not None:
            found.setdefault(number, node)
    return found


def _number(node: exp.Parameter) -> int | None:
    inner = node.this
    if isinstance(inner, exp.Literal) and not inner.is_string and inner.this.isdigit():
        number = int(inner.this)
        return number if number >= 1 else None
    return None


def _infer(node: exp.Parameter) -> int:
    parent = node.parent
    if isinstance(parent, exp.Cast) and parent.this is node:
        oid = _CAST_OIDS.get(parent.to.this)
        if oid is not None:
            return oid
    return values.TEXT


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
    if statement.tree is None:
        return statement.sql
    decoded: list[Value] = []
    for index, (oid, data) in enumerate(zip(statement.parameter_types, parameters, strict=True)):
        fmt = formats[0] if len(formats) == 1 else (formats[index] if formats else 0)
        try:
            decoded.append(decode_parameter(oid, data, fmt))
        except ValueFormatError as error:
            raise QueryError(error.sqlstate, f"parameter ${index + 1}: {error.message}") from None
    return substitute(
        statement,
        [literal(oid, v) for oid, v in zip(statement.parameter_types, decoded, strict=True)],
    )


def describe_sql(statement: ParsedStatement) -> str:
    """The statement with NULL for every parameter: enough to describe its columns."""
    if statement.tree is None:
        return statement.sql
    return substitute(statement, [exp.Null() for _ in statement.parameter_types])


def substitute(statement: ParsedStatement, literals: Sequence[exp.Expr]) -> str:
    if statement.tree is None:
        return statement.sql
    tree = statement.tree.copy()
    for node in list(tree.find_all(exp.Parameter)):
        number = _number(node)
        if number is None or number > len(literals):
            raise QueryError(UNDEFINED_PARAMETER, f"there is no parameter ${node.this}")
        node.replace(literals[number - 1].copy())
    return tree.sql(dialect=DIALECT)


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
        kind = exp.DataType.Type.TIMESTAMP
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return _cast(value.isoformat(sep=" "), kind)
    if isinstance(value, dt.date):
        return _cast(value.isoformat(), exp.DataType.Type.DATE)
    if isinstance(value, uuid.UUID):
        return exp.Literal.string(str(value))
    if oid == values.DATE:
        return _cast(value, exp.DataType.Type.DATE)
    if oid in (values.TIMESTAMP, values.TIMESTAMPTZ):
        return _cast(value, exp.DataType.Type.TIMESTAMP)
    return exp.Literal.string(value)
