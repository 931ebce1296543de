"""The rows of the emulated catalog, made from the rewriter's Catalog alone: the tables an
analyst may query, their columns and types, and what the database declares of them (NOT
NULL columns, keys: proxy.catalog.keys). Never row counts, sizes or statistics: every
such figure is 0 and the statistics relations are empty."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from proxy.backends import DeclaredKey, DeclaredType
from proxy.catalog import keys as key_rows
from proxy.catalog.builtin_procs import BUILTIN_PROCS, BuiltinProc
from proxy.catalog.pgtypes import TYPES, column_type_oid, declared_type
from proxy.catalog.relations import (
    FUNCTIONS_SCHEMA,
    INFORMATION_SCHEMA,
    PG_CATALOG,
    RELATIONS,
    Relation,
)
from proxy.catalog.type_functions import TYPE_FUNCTIONS
from rewriter import Catalog

Row = Mapping[str, object]
Declared = Mapping[str, Mapping[str, DeclaredType]]  # table -> column -> declared type
Keys = tuple[DeclaredKey, ...]  # the constraints the database declares

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
    not_null: bool = False  # declared NOT NULL (pg_attribute.attnotnull)


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
    not_null = found is not None and found.not_null
    if shown is None:
        return ShownColumn(name, coarse_oid, not_null=not_null)
    return ShownColumn(name, *shown, not_null=not_null)


def _type_oid(pg_type: str) -> int:
    wanted = pg_type.strip('"')
    for found in TYPES.values():
        if wanted in (found.formatted, found.name, f"{found.name}[]"):
            if wanted == f"{found.name}[]" and found.category != "A":
                return found.array or 25
            return found.oid
    return 25


#: Tables of the emulation's functions (FUNCTIONS_SCHEMA): what pg_get_indexdef and
#: pg_get_constraintdef give (proxy.catalog.functions), by OID (and an index's column: 0
#: for the whole index, -1 for it pretty-printed).
INDEX_DEFINITIONS = (FUNCTIONS_SCHEMA, "dp_index_defs")
CONSTRAINT_DEFINITIONS = (FUNCTIONS_SCHEMA, "dp_constraint_defs")


def catalog_rows(
    catalog: Catalog, declared: Declared | None = None, keys: Keys = ()
) -> dict[tuple[str, str], list[Row]]:
    """Rows of every relation that has any; the others are empty. ``keys``: the
    constraints the database declares, shown for the tables and columns shown."""
    relations = shown_relations(catalog, declared)
    tables = relations[: len(catalog.tables)]
    public = NAMESPACE_OIDS[PUBLIC]
    constraints = key_rows.shown_keys(tables, keys, FIRST_TABLE_OID + len(tables))
    indexes = _index_relations(constraints)
    with_index = {key.relation.oid for key in constraints if key.index_oid}
    rows: dict[tuple[str, str], list[Row]] = {
        (PG_CATALOG, "pg_namespace"): [
            {"oid": oid, "nspname": name, "nspowner": OWNER_OID}
            for name, oid in NAMESPACE_OIDS.items()
        ],
        (PG_CATALOG, "pg_class"): [_pg_class(r, r.oid in with_index) for r in relations + indexes],
        (PG_CATALOG, "pg_attribute"): list(_pg_attribute(relations + indexes)),
        (PG_CATALOG, "pg_index"): [
            key_rows.pg_index(key, [_collation(c) for c in key.columns])
            for key in constraints
            if key.index_oid
        ],
        (PG_CATALOG, "pg_constraint"): [key_rows.pg_constraint(key, public) for key in constraints],
        (PG_CATALOG, "pg_indexes"): [
            {
                "schemaname": key.relation.schema,
                "tablename": key.relation.name,
                "indexname": key.name,
                "indexdef": key_rows.index_definition(key),
            }
            for key in constraints
            if key.index_oid
        ],
        INDEX_DEFINITIONS: [
            row
            for key in constraints
            if key.index_oid
            for row in (
                {
                    "dp_ix_oid": key.index_oid,
                    "dp_ix_col": 0,
                    "dp_ix_def": key_rows.index_definition(key),
                },
                {
                    "dp_ix_oid": key.index_oid,
                    "dp_ix_col": -1,
                    "dp_ix_def": key_rows.index_definition(key, pretty=True),
                },
                *(
                    {
                        "dp_ix_oid": key.index_oid,
                        "dp_ix_col": number,
                        "dp_ix_def": key_rows.quote_identifier(column.name),
                    }
                    for number, column in enumerate(key.columns, start=1)
                ),
            )
        ],
        CONSTRAINT_DEFINITIONS: [
            {"dp_cd_oid": key.oid, "dp_cd_def": key_rows.constraint_definition(key)}
            for key in constraints
        ],
        (INFORMATION_SCHEMA, "table_constraints"): list(
            key_rows.table_constraints(constraints, tables, public)
        ),
        (INFORMATION_SCHEMA, "check_constraints"): list(key_rows.check_constraints(tables, public)),
        (INFORMATION_SCHEMA, "key_column_usage"): list(key_rows.key_column_usage(constraints)),
        (INFORMATION_SCHEMA, "constraint_column_usage"): list(
            key_rows.constraint_column_usage(constraints)
        ),
        (INFORMATION_SCHEMA, "referential_constraints"): list(
            key_rows.referential_constraints(constraints)
        ),
        (PG_CATALOG, "pg_type"): [_pg_type(oid) for oid in TYPES],
        (PG_CATALOG, "pg_am"): [
            {"oid": oid, "amname": name, "amhandler": handler, "amtype": kind}
            for oid, name, handler, kind in (
                (2, "heap", "heap_tableam_handler", "t"),
                (403, "btree", "bthandler", "i"),
                (405, "hash", "hashhandler", "i"),
            )
        ],
        (PG_CATALOG, "pg_proc"): [_pg_proc(proc) for proc in BUILTIN_PROCS.values()],
        (PG_CATALOG, "pg_range"): [
            {
                "rngtypid": range_oid,
                "rngsubtype": subtype,
                "rngmultitypid": multirange,
                "rngcollation": 0,
                "rngsubopc": opclass,
                "rngcanonical": canonical,
                "rngsubdiff": subdiff,
            }
            for range_oid, subtype, multirange, opclass, canonical, subdiff in _RANGES
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
            | (
                {
                    "hasindexes": r.oid in with_index,
                    "hasrules": False,
                    "hastriggers": False,  # as relhastriggers (_pg_class)
                    "rowsecurity": False,
                }
                if r.schema == PUBLIC
                else {}
            )
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


#: PostgreSQL 15's pg_range: (rngtypid, rngsubtype, rngmultitypid, rngsubopc,
#: rngcanonical, rngsubdiff) of the built-in range types.
_RANGES = (
    (3904, 23, 4451, 1978, "int4range_canonical", "int4range_subdiff"),
    (3906, 1700, 4532, 3125, "-", "numrange_subdiff"),
    (3908, 1114, 4533, 3128, "-", "tsrange_subdiff"),
    (3910, 1184, 4534, 3127, "-", "tstzrange_subdiff"),
    (3912, 1082, 4535, 3122, "daterange_canonical", "daterange_subdiff"),
    (3926, 20, 4536, 3124, "int8range_canonical", "int8range_subdiff"),
)
_INTERNAL_LANGUAGE = 12


def _pg_proc(proc: BuiltinProc) -> Row:
    return {
        "oid": proc.oid,
        "proname": proc.name,
        "pronamespace": NAMESPACE_OIDS[PG_CATALOG],
        "proowner": OWNER_OID,
        "prolang": _INTERNAL_LANGUAGE,
        "procost": 1.0,
        "prorows": 0.0,
        "provariadic": 0,
        "prosupport": "-",
        "prokind": "f",
        "prosecdef": False,
        "proleakproof": proc.leakproof,
        "proisstrict": proc.strict,
        "proretset": False,
        "provolatile": proc.volatility,
        "proparallel": proc.parallel,
        "pronargs": proc.argument_count,
        "pronargdefaults": 0,
        "prorettype": proc.result_type,
        "proargtypes": list(proc.argument_types),
        "prosrc": proc.source,
    }


def _index_relations(keys: list[key_rows.ShownKey]) -> list[ShownRelation]:
    """The indexes of the primary keys and unique constraints, as pg_class lists them."""
    return [
        ShownRelation(
            key.index_oid,
            key.relation.schema,
            key.name,
            "i",
            tuple(ShownColumn(c.name, c.type_oid, c.typmod) for c in key.columns),
        )
        for key in keys
        if key.index_oid
    ]


def _collation(column: ShownColumn) -> int:
    pg_type = TYPES.get(column.type_oid)
    return pg_type.collation if pg_type is not None else 0


def _pg_class(relation: ShownRelation, has_index: bool = False) -> Row:
    index = relation.kind == "i"
    return {
        "oid": relation.oid,
        "relname": relation.name,
        "relnamespace": NAMESPACE_OIDS[relation.schema],
        "reltype": 0,
        "reloftype": 0,
        "relowner": OWNER_OID,
        "relam": 2 if relation.kind == "r" else 403 if index else 0,
        "relfilenode": relation.oid if relation.kind == "r" or index else 0,
        "reltablespace": 0,
        "relpages": 0,  # never a size or a row count: they would leak the data
        "reltuples": 0.0,
        "relallvisible": 0,
        "reltoastrelid": 0,
        "relhasindex": has_index,
        "relisshared": False,
        "relpersistence": "p",
        "relkind": relation.kind,
        "relnatts": len(relation.columns),
        "relchecks": 0,
        "relhasrules": False,
        # PostgreSQL's is true for both tables of a foreign key (its triggers enforce it);
        # psql's \\d then lists triggers with pg_partition_ancestors() in FROM, which the
        # emulation refuses: false, and psql shows no foreign keys (drivers still do).
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
                "attnotnull": column.not_null,
                "atthasdef": False,
                "atthasmissing": False,
                "attidentity": "",
                "attgenerated": "",
                "attisdropped": False,
                "attislocal": True,
                "attinhcount": 0,
                "attcollation": _collation(column),
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
                "is_nullable": "NO" if column.not_null else "YES",
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
    (INFORMATION_SCHEMA, "table_constraints"): {
        "constraint_catalog": "database_name",
        "table_catalog": "database_name",
    },
    (INFORMATION_SCHEMA, "check_constraints"): {"constraint_catalog": "database_name"},
    (INFORMATION_SCHEMA, "key_column_usage"): {
        "constraint_catalog": "database_name",
        "table_catalog": "database_name",
    },
    (INFORMATION_SCHEMA, "constraint_column_usage"): {
        "table_catalog": "database_name",
        "constraint_catalog": "database_name",
    },
    (INFORMATION_SCHEMA, "referential_constraints"): {
        "constraint_catalog": "database_name",
        "unique_constraint_catalog": "CASE WHEN unique_constraint_name IS NULL THEN NULL "
        "ELSE database_name END",
    },
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
