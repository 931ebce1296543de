"""PostgreSQL types: the built-in pg_type rows, how dpproxy shows the catalog's column
types, and the type OIDs of result columns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from proxy.catalog.builtin_types import BUILTIN_TYPES
from rewriter import ColumnType

TEXT_OID = 25
_BIGINT = 20
_OID_ARRAY = 1028
_JSONB = 3802
DEFAULT_COLLATION = 100


@dataclass(frozen=True)
class PgType:
    oid: int
    name: str
    length: int
    by_value: bool
    kind: str  # typtype
    category: str
    element: int
    array: int
    input: str
    output: str
    collation: int
    formatted: str  # what format_type() shows

    @property
    def delimiter(self) -> str:
        return ";" if self.name in ("box", "_box") else ","


def _parse(text: str) -> dict[int, PgType]:
    types: dict[int, PgType] = {}
    for line in text.strip().splitlines():
        oid, name, length, by_value, kind, category, element, array, tin, tout, coll, fmt = (
            line.split("|")
        )
        types[int(oid)] = PgType(
            oid=int(oid),
            name=name,
            length=int(length),
            by_value=by_value == "t",
            kind=kind,
            category=category,
            element=int(element),
            array=int(array),
            input=tin,
            output=tout,
            collation=int(coll),
            formatted=fmt,
        )
    # Element types first: an array may come before its element (_numeric, 1231, before
    # numeric, 1700), whose name must be known to name the array (numeric[], not []).
    for arrays in (False, True):
        for type_oid, pg_type in list(types.items()):
            if pg_type.formatted or (pg_type.category == "A") != arrays:
                continue
            item = types.get(pg_type.element) if pg_type.category == "A" else None
            shown = f"{item.formatted}[]" if item is not None else pg_type.name
            types[type_oid] = replace(pg_type, formatted=shown)
    return types


TYPES: Mapping[int, PgType] = _parse(BUILTIN_TYPES)

# How the catalog shows each kind of column the rewriter knows (types are coarse there).
COLUMN_TYPE_OIDS: Mapping[ColumnType, int] = {
    ColumnType.INTEGER: 20,  # bigint
    ColumnType.FLOAT: 701,  # double precision
    ColumnType.DECIMAL: 1700,  # numeric
    ColumnType.TEXT: 25,  # text
    ColumnType.DATE: 1082,  # date
    ColumnType.TIMESTAMP: 1114,  # timestamp without time zone
    ColumnType.BOOLEAN: 16,  # boolean
    ColumnType.OTHER: 25,  # shown as text
}

# Extra names to_regtype() and ::regtype accept besides typname and format_type's name.
TYPE_ALIASES: Mapping[str, int] = {
    "int": 23,
    "integer": 23,
    "smallint": 21,
    "bigint": 20,
    "float": 701,
    "double": 701,
    "decimal": 1700,
    "bool": 16,
    "char": 1042,
    "character": 1042,
    "varchar": 1043,
    "timestamptz": 1184,
    "timetz": 1266,
}

# Result columns: DuckDB type -> (PostgreSQL type OID, typlen).
_RESULT_TYPES: Mapping[str, tuple[int, int]] = {
    "BOOLEAN": (16, 1),
    "TINYINT": (21, 2),
    "SMALLINT": (21, 2),
    "INTEGER": (23, 4),
    "BIGINT": (20, 8),
    "UTINYINT": (21, 2),
    "USMALLINT": (23, 4),
    "UINTEGER": (20, 8),
    "UBIGINT": (1700, -1),
    "HUGEINT": (1700, -1),
    "FLOAT": (700, 4),
    "DOUBLE": (701, 8),
    "VARCHAR": (25, -1),
    "DATE": (1082, 4),
    "TIME": (1083, 8),
    "TIMESTAMP": (1114, 8),
    "TIMESTAMP WITH TIME ZONE": (1184, 8),
    "TIME WITH TIME ZONE": (1266, 12),
    "INTERVAL": (1186, 16),
    "BLOB": (17, -1),
    "UUID": (2950, 16),
    "JSON": (114, -1),
}


def result_type(duck_type: str, jsonb: bool = False) -> tuple[int, int]:
    """(type OID, typlen) of a result column of DuckDB type ``duck_type``; ``jsonb``: a
    JSON column the query types jsonb (proxy.catalog.output_types)."""
    name = duck_type.upper()
    if jsonb and name == "JSON":
        return (_JSONB, -1)
    if name.endswith("[]"):
        element, _ = result_type(name[:-2])
        if element == _BIGINT:
            # The catalog's OIDs are BIGINT: a list of them is oid[] (pg_proc.proallargtypes,
            # asyncpg's attrtypoids, which it must decode without looking int8[] up).
            return (_OID_ARRAY, -1)
        found = TYPES.get(element)
        return (found.array if found is not None and found.array else 1009, -1)
    if name.startswith("DECIMAL"):
        return (1700, -1)
    return _RESULT_TYPES.get(name, (TEXT_OID, -1))


def column_type_oid(column_type: ColumnType) -> int:
    return COLUMN_TYPE_OIDS[column_type]


# Declared types (information_schema.data_type, PostgreSQL or DuckDB spelling, lower case)
# -> the PostgreSQL type OID the catalog shows.
_DECLARED_OIDS: Mapping[str, int] = {
    "bigint": 20,
    "int8": 20,
    "long": 20,
    "uinteger": 20,
    "integer": 23,
    "int4": 23,
    "int": 23,
    "signed": 23,
    "usmallint": 23,
    "smallint": 21,
    "int2": 21,
    "short": 21,
    "tinyint": 21,
    "int1": 21,
    "utinyint": 21,
    "ubigint": 1700,
    "hugeint": 1700,
    "uhugeint": 1700,
    "numeric": 1700,
    "decimal": 1700,
    "double precision": 701,
    "double": 701,
    "float8": 701,
    "real": 700,
    "float4": 700,
    "float": 700,  # DuckDB's FLOAT is 4 bytes
    "character varying": 1043,
    "varchar": 1043,
    "string": 1043,
    "text": 25,
    "character": 1042,
    "char": 1042,
    "bpchar": 1042,
    "boolean": 16,
    "bool": 16,
    "date": 1082,
    "timestamp": 1114,
    "timestamp without time zone": 1114,
    "datetime": 1114,
    "timestamp with time zone": 1184,
    "timestamptz": 1184,
    "time": 1083,
    "time without time zone": 1083,
    "interval": 1186,
    "uuid": 2950,
    "bytea": 17,
    "blob": 17,
    "json": 114,
    "jsonb": 3802,
}
_VARHDRSZ = 4


def declared_type(
    name: str, length: int | None, precision: int | None, scale: int | None
) -> tuple[int, int] | None:
    """(type OID, typmod) of a column declared ``name`` (information_schema's data_type with
    its length, precision and scale), or None for a type the catalog does not know."""
    base, _, arguments = name.strip().lower().partition("(")
    oid = _DECLARED_OIDS.get(base.strip())
    if oid is None:
        return None
    if oid in (1042, 1043) and length is not None and length > 0:
        return oid, length + _VARHDRSZ
    if oid == 1700 and base.strip() in ("numeric", "decimal"):
        if precision is None and arguments:  # DuckDB spells DECIMAL(p,s) in data_type
            numbers = arguments.rstrip(")").split(",")
            if all(n.strip().isdigit() for n in numbers):
                precision = int(numbers[0])
                scale = int(numbers[1]) if len(numbers) > 1 else 0
        if precision is not None and precision > 0:
            return oid, ((precision << 16) | (scale or 0)) + _VARHDRSZ
    return oid, -1
