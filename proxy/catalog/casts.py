"""PostgreSQL's casts as DuckDB computes them over the emulated catalog.

DuckDB has no reg* types, no oid, name or "char": an OID is a BIGINT, a name is VARCHAR.
PostgreSQL shows a regclass (regtype, regnamespace) as a name but compares it as an OID,
so a reg* cast becomes an OID, or the name the emulation's macros look up where the
value is shown. A cast to a type the catalog does not know is refused rather than left
for DuckDB to read some other way.

A cast to ``varchar(n)`` keeps the first n characters, one to ``char(n)`` (``char`` is
``char(1)``) pads them with spaces to n where the value is shown: PostgreSQL's bpchar,
whose trailing spaces do not count elsewhere (compared, concatenated, cast to text), so
they are taken off there. A quoted text cast to bytea is read as PostgreSQL's byteain
reads it (``'\\x0102'``: two bytes; ``'a\\000b'``: an escape), not as DuckDB reads a blob.
"""

from __future__ import annotations

from sqlglot import exp

from proxy.catalog.bytea_input import INVALID_PARAMETER_VALUE, bytea_literal
from proxy.catalog.functions import macro_call
from proxy.catalog.number_casts import rewrite_number_cast
from proxy.catalog.refusal import CatalogRefused
from proxy.catalog.regproc_comparisons import is_regproc_column, regproc_oid
from proxy.protocol.array_values import array_elements

_OID_TYPES = frozenset({"oid", "xid", "cid", "regrole", "regoper", "regoperator"})
_TEXT_TYPES = frozenset(
    {"name", "text", "varchar", "bpchar", "char", '"char"', "character varying", "character"}
)
#: The most characters of a varchar(n) or char(n) (PostgreSQL's MaxAttrSize).
_MAX_TEXT_LENGTH = 10485760
_INT_TYPES = {
    "int2": "SMALLINT",
    "smallint": "SMALLINT",
    "int4": "INTEGER",
    "integer": "INTEGER",
    "int": "INTEGER",
    "int8": "BIGINT",
    "bigint": "BIGINT",
}


def type_name(to: exp.Expression) -> str:
    """The PostgreSQL name of a cast's type, lower case ("array" for any array)."""
    if isinstance(to, exp.DataType) and to.this == exp.DataType.Type.USERDEFINED:
        kind = to.args.get("kind")
        name = kind.name if isinstance(kind, exp.Dot) else str(kind)
        return name.lower()
    if isinstance(to, exp.ObjectIdentifier):
        return str(to.this).lower()
    if isinstance(to, exp.DataType):
        if to.this == exp.DataType.Type.ARRAY:
            return "array"
        return to.sql(dialect="postgres").lower()
    return to.sql(dialect="postgres").lower()


def is_text_type(name: str) -> bool:
    """Whether the type ``name`` (type_name's) is one of PostgreSQL's text types."""
    return name in _TEXT_TYPES or name.startswith(("varchar", "character", "bpchar", "char("))


def rewrite_cast(node: exp.Cast) -> exp.Expression:
    to = node.args["to"]
    name = type_name(to)
    if isinstance(to, exp.DataType) and to.this == exp.DataType.Type.ARRAY:
        node.set("this", _array_of_text(node.this))
    value = node.this
    shown = _shown_as_text(node)
    if name == "regclass":
        oid = value if not _is_text(value) else macro_call("to_regclass", value)
        return macro_call("regclass_name", oid) if shown else oid
    if name == "regtype":
        oid = value if not _is_text(value) else macro_call("to_regtype", value)
        return macro_call("regtype_name", oid) if shown else oid
    if name == "regnamespace":
        oid = value if not _is_text(value) else macro_call("to_regnamespace", value)
        return macro_call("regnamespace_name", oid) if shown else oid
    if name in ("regproc", "regprocedure"):
        return macro_call("regproc_name", value)
    if name in _OID_TYPES:
        if is_regproc_column(value):  # typreceive::oid: its function's OID
            return regproc_oid(value)
        return exp.cast(value, exp.DataType.build("BIGINT"))
    if is_text_type(name):
        return _sized_text(node, exp.cast(value, exp.DataType.build("VARCHAR")))
    if _is_bytea(to) and isinstance(value, exp.Literal) and value.is_string:
        return bytea_literal(value.name)
    number = rewrite_number_cast(node)
    if number is not None:
        return number
    if isinstance(to, exp.DataType) and to.this == exp.DataType.Type.ARRAY:
        inner = to.expressions[0] if to.expressions else None
        inner_name = type_name(inner) if inner is not None else ""
        if inner_name in _INT_TYPES:
            return exp.cast(value, exp.DataType.build(f"{_INT_TYPES[inner_name]}[]"))
        if inner_name in _OID_TYPES or inner_name in ("regtype", "regclass"):
            return exp.cast(value, exp.DataType.build("BIGINT[]"))
        if inner_name in _TEXT_TYPES:
            return exp.cast(value, exp.DataType.build("VARCHAR[]"))
    if isinstance(to, exp.DataType) and to.this == exp.DataType.Type.USERDEFINED:
        raise CatalogRefused(f"dpproxy's catalog does not support the type {name}")
    return node


def _is_bytea(to: exp.Expression) -> bool:
    return isinstance(to, exp.DataType) and to.this == exp.DataType.Type.VARBINARY


def _sized_text(node: exp.Cast, text: exp.Expression) -> exp.Expression:
    """``text`` (the cast's value as VARCHAR) as ``node``'s type holds it: varchar(n) its
    first n characters; char(n) (char: n = 1) those padded to n where shown, without
    trailing spaces elsewhere, as bpchar (no length) is."""
    to = node.args["to"]
    if not isinstance(to, exp.DataType):
        return text
    kind = to.this
    length = _type_length(to)
    if kind == exp.DataType.Type.VARCHAR:
        return text if length is None else exp.Left(this=text, expression=_number(length))
    if kind not in (exp.DataType.Type.CHAR, exp.DataType.Type.NCHAR, exp.DataType.Type.BPCHAR):
        return text
    if length is None and kind != exp.DataType.Type.BPCHAR:
        length = 1  # char, character: char(1)
    if _shown(node):
        if length is None:
            return text
        return exp.Pad(
            this=exp.Left(this=text, expression=_number(length)),
            expression=_number(length),
            fill_pattern=exp.Literal.string(" "),
            is_left=False,
        )
    kept = text if length is None else exp.Left(this=text, expression=_number(length))
    return exp.Trim(this=kept, expression=exp.Literal.string(" "), position="TRAILING")


def _type_length(to: exp.DataType) -> int | None:
    """The n of varchar(n), char(n); None without one."""
    if not to.expressions:
        return None
    first = to.expressions[0]
    inner = first.this if isinstance(first, exp.DataTypeParam) else first
    if isinstance(inner, exp.Literal) and inner.is_int:
        length = int(inner.name)
        name = "varchar" if to.this == exp.DataType.Type.VARCHAR else "char"
        if length < 1:
            raise CatalogRefused(
                f"length for type {name} must be at least 1", sqlstate=INVALID_PARAMETER_VALUE
            )
        if length > _MAX_TEXT_LENGTH:
            raise CatalogRefused(
                f"length for type {name} cannot exceed {_MAX_TEXT_LENGTH}",
                sqlstate=INVALID_PARAMETER_VALUE,
            )
        return length
    raise CatalogRefused(f"dpproxy's catalog does not support the type {to.sql('postgres')}")


def _number(value: int) -> exp.Expression:
    return exp.Literal.number(value)


def _shown(node: exp.Cast) -> bool:
    """Whether the cast's value is an output column (of any SELECT of the query)."""
    child: exp.Expression = node
    parent = node.parent
    while isinstance(parent, exp.Alias | exp.Paren):
        child, parent = parent, parent.parent
    return isinstance(parent, exp.Select) and child.arg_key == "expressions"


def _array_of_text(value: exp.Expression) -> exp.Expression:
    """A quoted array in PostgreSQL's text of one dimension (``'{1007,1016}'``, what
    asyncpg's type lookup sends for ``$1::oid[]``; ``'{}'``, an array parameter's stand-in)
    as a list of its elements' text, which DuckDB's cast to a list type reads element by
    element (it does not read PostgreSQL's text); any other value as it is."""
    if not (isinstance(value, exp.Literal) and value.is_string):
        return value
    try:
        elements = array_elements(value.name.strip(" \t\n\r\f\v"))
    except ValueError:
        return value  # DuckDB refuses what it cannot read
    return exp.Array(
        expressions=[exp.Null() if e is None else exp.Literal.string(e) for e in elements]
    )


def _is_text(node: exp.Expression) -> bool:
    if isinstance(node, exp.Literal):
        return bool(node.is_string)
    if isinstance(node, exp.Cast):
        return type_name(node.args["to"]) in _TEXT_TYPES
    return False


def _shown_as_text(node: exp.Cast) -> bool:
    """Whether a reg* cast's value is shown (output column, ::text, ORDER BY) rather than
    compared: PostgreSQL shows regclass as the relation's name, compares it as an OID."""
    parent = node.parent
    while isinstance(parent, exp.Alias | exp.Paren):
        parent = parent.parent
    if isinstance(parent, exp.Cast):
        return type_name(parent.args["to"]) in _TEXT_TYPES
    return isinstance(parent, exp.Select | exp.Ordered)
