"""The types of parameters in catalog queries, as PostgreSQL 15 describes them: cast to an
object identifier type (``$1::oid``: oid; ``$1::regclass``: regclass; ``$1::name``:
name), or compared with a column of the emulated catalog (``oid = $1``: oid; ``relname
= $1``: name; ``attnum = ANY($1)``: int2[]). asyncpg and pg8000 encode a value by the
type the statement's description gives it (an int only for an integer or oid). No I/O:
``proxy.parameter_types`` asks, from the catalog's static description of its relations.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from proxy.catalog.pgtypes import TYPES
from proxy.catalog.relations import INFORMATION_SCHEMA, PG_CATALOG, RELATIONS
from proxy.protocol import values as v

#: Object identifier types by name (as a cast writes them, lower case) -> their OIDs.
_CAST_OIDS: Mapping[str, int] = {
    "oid": v.OID,
    "name": v.NAME,
    '"char"': v.CHAR,
    **{v.type_name(oid): oid for oid in v.REG_TYPES},
}
#: information_schema's domains -> the type a parameter compared with one takes (their
#: base type; varchar ones are compared as text).
_DOMAINS: Mapping[str, int] = {
    "cardinal_number": v.INT4,
    "character_data": v.TEXT,
    "sql_identifier": v.NAME,
    "yes_or_no": v.TEXT,
    "time_stamp": v.TIMESTAMPTZ,
}


def _type_oids() -> dict[str, int]:
    found: dict[str, int] = {}
    for pg_type in TYPES.values():
        found.setdefault(pg_type.name, pg_type.oid)
        found.setdefault(pg_type.formatted, pg_type.oid)
    return found


_TYPE_OIDS = _type_oids()


def _compared(oid: int | None) -> int | None:
    """A parameter's type beside a catalog column of type ``oid``: a reg* column is
    compared as an oid (regtype has no = of its own), as PostgreSQL describes it; but the
    emulation keeps a regproc as its name (typinput 'boolin'), which is compared as text."""
    if oid == v.REGPROC:
        return None
    return v.OID if oid in v.REG_TYPES else oid


#: (schema, relation) -> column -> the type of a parameter compared with it.
_COLUMNS: Mapping[tuple[str, str], Mapping[str, int | None]] = {
    key: {
        name: _compared(_DOMAINS.get(pg_type, _TYPE_OIDS.get(pg_type)))
        for name, pg_type in relation.columns
    }
    for key, relation in RELATIONS.items()
}


def catalog_cast_oid(to: exp.Expr) -> int | None:
    """The OID of a cast's target type among the object identifier types (``oid``,
    ``regclass``, ``pg_catalog.regtype``, ``name``, ``"char"``); None for another."""
    if isinstance(to, exp.DataType) and to.this == exp.DataType.Type.NAME:
        return v.NAME
    if isinstance(to, exp.DataType) and to.this == exp.DataType.Type.USERDEFINED:
        kind = to.args.get("kind")
        if isinstance(kind, exp.Dot) and kind.this.name.lower() == PG_CATALOG:
            kind = kind.expression
        if isinstance(kind, exp.Identifier):
            return _CAST_OIDS.get(f'"{kind.name}"' if kind.quoted else kind.name.lower())
        return None
    if isinstance(to, exp.DataType) and isinstance(to.this, str):  # ObjectIdentifier: OID
        return _CAST_OIDS.get(to.this.lower())
    return None


def catalog_columns(schema: str | None, name: str) -> Mapping[str, int | None] | None:
    """The columns of the catalog relation ``schema.name`` (without a schema, pg_catalog's,
    which PostgreSQL searches first) and the type a parameter compared with each takes;
    None if it is not one."""
    schema = schema.lower() if schema else PG_CATALOG
    if schema not in (PG_CATALOG, INFORMATION_SCHEMA):
        return None
    return _COLUMNS.get((schema, name.lower()))
