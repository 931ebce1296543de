"""The rows of the emulated catalog, made from the rewriter's Catalog alone: the tables an
analyst may query, their columns and types. Never row counts, sizes or statistics: every
such figure is 0 and the statistics relations are empty."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from proxy.backends import DeclaredType
from proxy.catalog.pgtypes import TYPES, column_type_oid, declared_type
from proxy.catalog.relations import INFORMATION_SCHEMA, PG_CATALOG, RELATIONS, Relation
from proxy.catalog.type_functions import TYPE_FUNCTIONS
from rewriter import Catalog

Row = Mapping[str, object]
Declared = Mapping[str, Mapping[str, DeclaredType]]  # table -> column -> declared type

PUBLIC = "public"
OWNER = "dpproxy"
OWNER_OID = 10
ANALYST_OID = 16383  # the session's analyst in pg_roles / pg_user
DATABASE_OID = 16384
FIRST_TABLE_OID = 16400
FIRST_SYSTEM_RELATION_OID = 12000
NAMESPACE_OIDS = {PG_CATALOG: 11, PUBLIC: 2200, INFORMATION_SCHEMA: 13000}
_TEXT_CATEGORY = "S"


@dataclass(frozen=True)
class ShownColumn:
    name: str
    type_oid: int
    typmod: int = -1


@dataclass(frozen=True)
class ShownRelation:
    """A relation as the catalog lists it."""

    oid: int
    schema: str
    name: str
    kind: str
    columns: tuple[ShownColumn, ...]


def shown_relations(catalog: Catalog, declared: Declared | None = None) -> list[ShownRelation]:
    """The analyst's tables (schema public) and the emulated catalog relations. A table's
    columns show the types the database declares (``declared``), else the rewriter's."""
    shown = []
    by_name = {name.lower(): columns for name, columns in (declared or {}).items()}
    for index, key in enumerate(sorted(catalog.tables)):
        table = catalog.tables[key]
        types = by_name.get(table.name.lower(), {})
        types_by_name = {name.lower(): found for name, found in types.items()}
        columns = tuple(
            _shown_column(info.name, column_type_oid(info.type), types_by_name)
            for info in table.columns.values()
        )
        shown.append(ShownRelation(FIRST_TABLE_OID + index, PUBLIC, table.name, "r", columns))
    for index, relation in enumerate(RELATIONS.values()):
        columns = tuple(ShownColumn(name, _type_oid(pg_type)) for name, pg_type in relation.columns)
        shown.append(
            ShownRelation(
                FIRST_SYSTEM_RELATION_OID + index,
                relation.schema,
                relation.name,
                relation.kind,
                columns,
            )
        )
    return shown


def _shown_column(name: str, coarse_oid: int, declared: Mapping[str, DeclaredType]) -> ShownColumn:
    found = declared.get(name.lower())
    shown = None
    if found is not None:
        shown = declared_type(found.name, found.length, found.precision, found.scale)
    if shown is None:
        return ShownColumn(name, coarse_oid)
    return ShownColumn(name, *shown)


def _type_oid(pg_type: str) -> int:
    wanted = pg_type.strip('"')
    for found in TYPES.values():
        if wanted in (found.formatted, found.name, f"{found.name}[]"):
            if wanted == f"{found.name}[]" and found.category != "A":
                return found.array or 25
            return found.oid
    return 25


def catalog_rows(
    catalog: Catalog, declared: Declared | None = None
) -> dict[tuple[str, str], list[Row]]:
    """Rows of every relation that has any; the others are empty."""
    relations = shown_relations(catalog, declared)
    rows: dict[tuple[str, str], list[Row]] = {
        (PG_CATALOG, "pg_namespace"): [
            {"oid": oid, "nspname": name, "nspowner": OWNER_OID}
            for name, oid in NAMESPACE_OIDS.items()
        ],
        (PG_CATALOG, "pg_class"): [_pg_class(r) for r in relations],
        (PG_CATALOG, "pg_attribute"): list(_pg_attribute(relations)),
        (PG_CATALOG, "pg_type"): [_pg_type(oid) for oid in TYPES],
        (PG_CATALOG, "pg_am"): [
            {"oid": oid, "amname": name, "amhandler": handler, "amtype": kind}
            for oid, name, handler, kind in (
                (2, "heap", "heap_tableam_handler", "t"),
                (403, "btree", "bthandler", "i"),
                (405, "hash", "hashhandler", "i"),
            )
        ],
        (PG_CATALOG, "pg_collation"): [
            {
                "oid": oid,
                "collname": name,
                "collnamespace": NAMESPACE_OIDS[PG_CATALOG],
                "collowner": OWNER_OID,
                "collprovider": provider,
                "collisdeterministic": True,
                "collencoding": encoding,
                "collcollate": collate,
                "collctype": collate,
            }
            for oid, name, provider, encoding, collate in (
                (100, "default", "d", -1, None),
                (950, "C", "c", -1, "C"),
                (951, "POSIX", "c", -1, "POSIX"),
            )
        ],
        (PG_CATALOG, "pg_tablespace"): [
            {"oid": 1663, "spcname": "pg_default", "spcowner": OWNER_OID},
            {"oid": 1664, "spcname": "pg_global", "spcowner": OWNER_OID},
        ],
        (PG_CATALOG, "pg_roles"): [_pg_roles(OWNER_OID, OWNER), _pg_roles(ANALYST_OID, "")],
        (PG_CATALOG, "pg_user"): [_pg_user(OWNER_OID, OWNER), _pg_user(ANALYST_OID, "")],
        (PG_CATALOG, "pg_database"): [
            {
                "oid": DATABASE_OID,
                "datdba": OWNER_OID,
                "encoding": 6,
                "datlocprovider": "c",
                "datistemplate": False,
                "datallowconn": True,
                "datconnlimit": -1,
                "dattablespace": 1663,
                "datcollate": "C",
                "datctype": "C",
            }
        ],
        (PG_CATALOG, "pg_tables"): [
            {"schemaname": r.schema, "tablename": r.name, "tableowner": OWNER}
            for r in relations
            if r.kind == "r"
        ],
        (PG_CATALOG, "pg_views"): [
            {"schemaname": r.schema, "viewname": r.name, "viewowner": OWNER}
            for r in relations
            if r.kind == "v"
        ],
        (INFORMATION_SCHEMA, "schemata"): [
            {"schema_name": name, "schema_owner": OWNER} for name in NAMESPACE_OIDS
        ],
        (INFORMATION_SCHEMA, "tables"): [
            {
                "table_schema": r.schema,
                "table_name": r.name,
                "table_type": "BASE TABLE" if r.kind == "r" else "VIEW",
                "is_insertable_into": "NO",
                "is_typed": "NO",
            }
            for r in relations
        ],
        (INFORMATION_SCHEMA, "views"): [
            {
                "table_schema": r.schema,
                "table_name": r.name,
                "check_option": "NONE",
                "is_updatable": "NO",
                "is_insertable_into": "NO",
                "is_trigger_updatable": "NO",
                "is_trigger_deletable": "NO",
                "is_trigger_insertable_into": "NO",
            }
            for r in relations
            if r.kind == "v"
        ],
        (INFORMATION_SCHEMA, "columns"): list(_information_schema_columns(relations)),
    }
    return rows


def _pg_class(relation: ShownRelation) -> Row:
    return {
        "oid": relation.oid,
        "relname": relation.name,
        "relnamespace": NAMESPACE_OIDS[relation.schema],
        "reltype": 0,
        "reloftype": 0,
        "relowner": OWNER_OID,
        "relam": 2 if relation.kind == "r" else 0,
        "relfilenode": relation.oid if relation.kind == "r" else 0,
        "reltablespace": 0,
        "relpages": 0,  # never a size or a row count: they would leak the data
        "reltuples": 0.0,
        "relallvisible": 0,
        "reltoastrelid": 0,
        "relhasindex": False,
        "relisshared": False,
        "relpersistence": "p",
        "relkind": relation.kind,
        "relnatts": len(relation.columns),
        "relchecks": 0,
        "relhasrules": False,
        "relhastriggers": False,
        "relhassubclass": False,
        "relrowsecurity": False,
        "relforcerowsecurity": False,
        "relispopulated": True,
        "relreplident": "d" if relation.kind == "r" else "n",
        "relispartition": False,
        "relrewrite": 0,
        "relfrozenxid": 0,
        "relminmxid": 0,
    }


def _pg_attribute(relations: list[ShownRelation]) -> Iterator[Row]:
    for relation in relations:
        for number, column in enumerate(relation.columns, start=1):
            pg_type = TYPES.get(column.type_oid)
            yield {
                "attrelid": relation.oid,
                "attname": column.name,
                "atttypid": column.type_oid,
                "attstattarget": -1,
                "attlen": pg_type.length if pg_type is not None else -1,
                "attnum": number,
                "attndims": 1 if pg_type is not None and pg_type.category == "A" else 0,
                "attcacheoff": -1,
                "atttypmod": column.typmod,
                "attbyval": pg_type.by_value if pg_type is not None else False,
                "attalign": "i",
                "attstorage": "p" if pg_type is None or pg_type.by_value else "x",
                "attcompression": "",
                "attnotnull": False,
                "atthasdef": False,
                "atthasmissing": False,
                "attidentity": "",
                "attgenerated": "",
                "attisdropped": False,
                "attislocal": True,
                "attinhcount": 0,
                "attcollation": pg_type.collation if pg_type is not None else 0,
            }


def _pg_type(oid: int) -> Row:
    pg_type = TYPES[oid]
    functions = TYPE_FUNCTIONS[oid]
    return {
        "oid": oid,
        "typname": pg_type.name,
        "typnamespace": NAMESPACE_OIDS[PG_CATALOG],
        "typowner": OWNER_OID,
        "typlen": pg_type.length,
        "typbyval": pg_type.by_value,
        "typtype": pg_type.kind,
        "typcategory": pg_type.category,
        "typispreferred": False,
        "typisdefined": True,
        "typdelim": pg_type.delimiter,
        "typrelid": 0,
        "typsubscript": functions.subscript,
        "typelem": pg_type.element,
        "typarray": pg_type.array,
        "typinput": pg_type.input,
        "typoutput": pg_type.output,
        "typreceive": functions.receive,
        "typsend": functions.send,
        "typmodin": functions.modin,
        "typmodout": functions.modout,
        "typanalyze": functions.analyze,
        "typalign": functions.align,
        "typstorage": functions.storage,
        "typnotnull": False,
        "typbasetype": 0,
        "typtypmod": -1,
        "typndims": 0,
        "typcollation": pg_type.collation,
    }


def _pg_roles(oid: int, name: str) -> Row:
    return {
        "rolname": name,
        "rolsuper": False,
        "rolinherit": True,
        "rolcreaterole": False,
        "rolcreatedb": False,
        "rolcanlogin": oid != OWNER_OID,
        "rolreplication": False,
        "rolconnlimit": -1,
        "rolpassword": "********",
        "rolbypassrls": False,
        "oid": oid,
    }


def _pg_user(oid: int, name: str) -> Row:
    return {
        "usename": name,
        "usesysid": oid,
        "usecreatedb": False,
        "usesuper": False,
        "userepl": False,
        "usebypassrls": False,
        "passwd": "********",
    }


def _information_schema_columns(relations: list[ShownRelation]) -> Iterator[Row]:
    for relation in relations:
        for number, column in enumerate(relation.columns, start=1):
            pg_type = TYPES.get(column.type_oid)
            is_array = pg_type is not None and pg_type.category == "A"
            precision, scale = _numeric_precision(column.type_oid, column.typmod)
            length = column.typmod - 4 if column.type_oid in (1042, 1043) else -1
            yield {
                "table_schema": relation.schema,
                "table_name": relation.name,
                "column_name": column.name,
                "ordinal_position": number,
                "is_nullable": "YES",
                "data_type": "ARRAY"
                if is_array
                else (pg_type.formatted if pg_type is not None else "text"),
                "character_maximum_length": length if length >= 0 else None,
                "numeric_precision": precision,
                "numeric_precision_radix": (10 if column.type_oid == 1700 else 2)
                if precision is not None
                else None,
                "numeric_scale": scale,
                "datetime_precision": {1082: 0, 1114: 6, 1184: 6}.get(column.type_oid),
                "collation_name": None,
                "udt_schema": PG_CATALOG,
                "udt_name": pg_type.name if pg_type is not None else "text",
                "dtd_identifier": str(number),
                "is_self_referencing": "NO",
                "is_identity": "NO",
                "identity_cycle": "NO",
                "is_generated": "NEVER",
                "is_updatable": "NO",
            }


def _numeric_precision(type_oid: int, typmod: int) -> tuple[int | None, int | None]:
    if type_oid == 1700:
        if typmod < 4:
            return None, None
        return (typmod - 4) >> 16, (typmod - 4) & 0xFFFF
    return {20: (64, 0), 23: (32, 0), 21: (16, 0), 701: (53, None), 700: (24, None)}.get(
        type_oid, (None, None)
    )


SESSION_OVERRIDES: Mapping[tuple[str, str], Mapping[str, str]] = {
    (PG_CATALOG, "pg_roles"): {
        "rolname": f"CASE WHEN oid = {ANALYST_OID} THEN user_name ELSE rolname END"
    },
    (PG_CATALOG, "pg_user"): {
        "usename": f"CASE WHEN usesysid = {ANALYST_OID} THEN user_name ELSE usename END"
    },
    (PG_CATALOG, "pg_database"): {"datname": "database_name"},
    (INFORMATION_SCHEMA, "tables"): {"table_catalog": "database_name"},
    (INFORMATION_SCHEMA, "views"): {"table_catalog": "database_name"},
    (INFORMATION_SCHEMA, "columns"): {
        "table_catalog": "database_name",
        "udt_catalog": "database_name",
    },
    (INFORMATION_SCHEMA, "schemata"): {"catalog_name": "database_name"},
    (PG_CATALOG, "pg_settings"): {
        "name": "s.name",
        "setting": "s.setting",
        # dpproxy's own (dpproxy.epsilon...) as PostgreSQL shows an extension's parameters.
        "category": "CASE WHEN starts_with(s.name, 'dpproxy.') THEN 'Customized Options' "
        "ELSE 'Client Connection Defaults' END",
        "short_desc": "''",
        "context": "'user'",
        "vartype": "'string'",
        "source": "'session'",
        "boot_val": "s.setting",
        "reset_val": "s.setting",
        "pending_restart": "false",
    },
}


def session_relation_sql(relation: Relation) -> str:
    """The body of the table macro (user_name, database_name, settings) of a relation whose
    rows depend on the session."""
    overrides = SESSION_OVERRIDES[relation.key]
    settings = relation.key == (PG_CATALOG, "pg_settings")
    columns = ", ".join(
        f'CAST({overrides.get(name, "NULL" if settings else _quoted(name))} AS {duck}) AS "{name}"'
        for name, duck in relation.duck_columns()
    )
    if settings:
        return f"SELECT {columns} FROM (SELECT unnest(settings) AS s)"
    return f"SELECT {columns} FROM {relation.base_name}"


def _quoted(name: str) -> str:
    return f'"{name}"'
