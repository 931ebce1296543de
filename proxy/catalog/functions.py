"""PostgreSQL catalog functions as DuckDB macros in the emulation's schema.

Each answers from the emulated catalog only. Functions that would describe the data
(sizes, statistics) answer 0 or NULL. Functions that depend on the session (current_user,
current_setting, ...) are replaced by literals in ``function_calls.py`` instead.
"""

from __future__ import annotations

from sqlglot import exp

from proxy.catalog.contents import ANALYST_OID, NAMESPACE_OIDS, OWNER, OWNER_OID
from proxy.catalog.relations import FUNCTIONS_SCHEMA

S = FUNCTIONS_SCHEMA
_VISIBLE = f"({NAMESPACE_OIDS['pg_catalog']}, {NAMESPACE_OIDS['public']})"

#: The types of a built-in function's arguments (NULL for an OID pg_proc lacks). The
#: aliases inside macros are the emulation's own, so an argument (p.oid) is never
#: taken for a column of the macro's subquery.
_FUNCTION_ARGUMENTS = (
    "(f) AS (SELECT coalesce((SELECT string_agg(coalesce(dp_fn_n.formatted, '???'), ', ' "
    "ORDER BY dp_fn_u.i) FROM (SELECT unnest(dp_fn_p.proargtypes) AS t, "
    "generate_subscripts(dp_fn_p.proargtypes, 1) AS i) dp_fn_u "
    f"LEFT JOIN {S}.dp_type_formats dp_fn_n ON dp_fn_n.oid = dp_fn_u.t), '') "
    f'FROM {S}."pg_proc" dp_fn_p WHERE dp_fn_p.oid = f)'
)

# name -> macro definitions ("(params) AS body"), overloads by number of parameters.
MACROS: dict[str, tuple[str, ...]] = {
    "pg_get_userbyid": (
        f"(role_oid, user_name) AS CASE role_oid WHEN {OWNER_OID} THEN '{OWNER}' "
        f"WHEN {ANALYST_OID} THEN user_name "
        "ELSE 'unknown (OID=' || CAST(role_oid AS VARCHAR) || ')' END",
    ),
    "pg_table_is_visible": (
        f"(rel) AS coalesce((SELECT max(c.relnamespace IN {_VISIBLE}) "
        f'FROM {S}."pg_class" c WHERE c.oid = rel), false)',
    ),
    "format_type": (
        "(type_oid, typmod) AS (SELECT max(CASE "
        "WHEN typmod >= 4 AND n.oid IN (1042, 1043) "
        "THEN n.formatted || '(' || CAST(typmod - 4 AS VARCHAR) || ')' "
        "WHEN typmod >= 4 AND n.oid = 1700 THEN 'numeric(' || CAST((typmod - 4) >> 16 AS "
        "VARCHAR) || ',' || CAST((typmod - 4) & 65535 AS VARCHAR) || ')' "
        f"ELSE n.formatted END) FROM {S}.dp_type_formats n WHERE n.oid = type_oid)",
    ),
    "to_regtype": (
        f"(type_name) AS (SELECT max(n.oid) FROM {S}.dp_type_names n "
        "WHERE n.name = lower(trim(replace(CAST(type_name AS VARCHAR), '\"', ''))))",
    ),
    "regtype_name": (
        f"(type_oid) AS CASE WHEN type_oid = 0 THEN '-' "  # InvalidOid, as PostgreSQL shows it
        f"ELSE coalesce({S}.format_type(type_oid, NULL), CAST(type_oid AS VARCHAR)) END",
    ),
    "to_regclass": (
        f'(rel_name) AS (SELECT min(c.oid) FROM {S}."pg_class" c '
        f'JOIN {S}."pg_namespace" n ON n.oid = c.relnamespace '
        "WHERE replace(CAST(rel_name AS VARCHAR), '\"', '') IN "
        "(c.relname, n.nspname || '.' || c.relname) "
        f"AND (c.relnamespace IN {_VISIBLE} OR contains(CAST(rel_name AS VARCHAR), '.')))",
    ),
    "regclass_name": (
        f"(rel) AS CASE WHEN rel = 0 THEN '-' ELSE coalesce((SELECT max(CASE "
        f"WHEN c.relnamespace IN {_VISIBLE} "
        "THEN c.relname ELSE n.nspname || '.' || c.relname END) "
        f'FROM {S}."pg_class" c JOIN {S}."pg_namespace" n ON n.oid = c.relnamespace '
        "WHERE c.oid = rel), CAST(rel AS VARCHAR)) END",
    ),
    "to_regnamespace": (
        f'(nsp_name) AS (SELECT max(n.oid) FROM {S}."pg_namespace" n '
        "WHERE n.nspname = replace(CAST(nsp_name AS VARCHAR), '\"', ''))",
    ),
    "regnamespace_name": (
        f"(nsp) AS CASE WHEN nsp = 0 THEN '-' ELSE coalesce((SELECT max(n.nspname) "
        f'FROM {S}."pg_namespace" n WHERE n.oid = nsp), CAST(nsp AS VARCHAR)) END',
    ),
    "regproc_name": (
        "(proc) AS CASE WHEN CAST(proc AS VARCHAR) LIKE 'pg_catalog.%' "
        "THEN substr(CAST(proc AS VARCHAR), 12) ELSE CAST(proc AS VARCHAR) END",
    ),
    # A regproc value (kept as the function's name, as PostgreSQL shows it) as its OID: 0
    # for '-', a number for itself, else the OID of the pg_proc row of that name.
    "regproc_oid": (
        "(proc) AS CASE WHEN proc IS NULL THEN CAST(NULL AS BIGINT) "
        "WHEN CAST(proc AS VARCHAR) = '-' THEN CAST(0 AS BIGINT) "
        "ELSE coalesce(TRY_CAST(CAST(proc AS VARCHAR) AS BIGINT), "
        f'(SELECT min(dp_rp_p.oid) FROM {S}."pg_proc" dp_rp_p '
        f"WHERE dp_rp_p.proname = {S}.regproc_name(proc))) END",
    ),
    "pg_get_expr": (
        "(expr, rel) AS CAST(NULL AS VARCHAR)",
        "(expr, rel, pretty) AS CAST(NULL AS VARCHAR)",
    ),
    # The indexes and constraints of the keys the database declares (contents.py): the
    # whole index (column 0; pretty, its table bare) or one column's name; the constraint.
    "pg_get_indexdef": (
        f"(idx) AS (SELECT max(dp_ix_d.dp_ix_def) FROM {S}.dp_index_defs dp_ix_d "
        "WHERE dp_ix_d.dp_ix_oid = idx AND dp_ix_d.dp_ix_col = 0)",
        f"(idx, colno, pretty) AS (SELECT max(dp_ix_d.dp_ix_def) FROM {S}.dp_index_defs "
        "dp_ix_d WHERE dp_ix_d.dp_ix_oid = idx "
        "AND dp_ix_d.dp_ix_col = CASE WHEN colno = 0 AND pretty THEN -1 ELSE colno END)",
    ),
    "pg_get_constraintdef": (
        f"(con) AS (SELECT max(dp_cd_d.dp_cd_def) FROM {S}.dp_constraint_defs dp_cd_d "
        "WHERE dp_cd_d.dp_cd_oid = con)",
        f"(con, pretty) AS (SELECT max(dp_cd_d.dp_cd_def) FROM {S}.dp_constraint_defs "
        "dp_cd_d WHERE dp_cd_d.dp_cd_oid = con)",
    ),
    "pg_get_viewdef": ("(v) AS CAST(NULL AS VARCHAR)", "(v, pretty) AS CAST(NULL AS VARCHAR)"),
    "pg_get_triggerdef": ("(t) AS CAST(NULL AS VARCHAR)", "(t, pretty) AS CAST(NULL AS VARCHAR)"),
    "pg_get_ruledef": ("(r) AS CAST(NULL AS VARCHAR)", "(r, pretty) AS CAST(NULL AS VARCHAR)"),
    "pg_get_functiondef": ("(f) AS CAST(NULL AS VARCHAR)",),
    # Of pg_proc's built-in functions (builtin_procs: no argument names, modes, defaults).
    "pg_get_function_arguments": (_FUNCTION_ARGUMENTS,),
    "pg_get_function_identity_arguments": (_FUNCTION_ARGUMENTS,),
    "pg_get_function_result": (
        f"(f) AS (SELECT max({S}.format_type(dp_fn_p.prorettype, NULL)) "
        f'FROM {S}."pg_proc" dp_fn_p WHERE dp_fn_p.oid = f)',
    ),
    "pg_get_partkeydef": ("(r) AS CAST(NULL AS VARCHAR)",),
    "pg_get_statisticsobjdef_columns": ("(s) AS CAST(NULL AS VARCHAR)",),
    "pg_get_serial_sequence": ("(t, c) AS CAST(NULL AS VARCHAR)",),
    "obj_description": ("(o) AS CAST(NULL AS VARCHAR)", "(o, cat) AS CAST(NULL AS VARCHAR)"),
    "col_description": ("(o, n) AS CAST(NULL AS VARCHAR)",),
    "shobj_description": ("(o, cat) AS CAST(NULL AS VARCHAR)",),
    "has_table_privilege": ("(rel, priv) AS upper(CAST(priv AS VARCHAR)) LIKE '%SELECT%'",),
    "has_any_column_privilege": ("(rel, priv) AS upper(CAST(priv AS VARCHAR)) LIKE '%SELECT%'",),
    "has_column_privilege": ("(rel, col, priv) AS upper(CAST(priv AS VARCHAR)) LIKE '%SELECT%'",),
    "has_schema_privilege": ("(nsp, priv) AS upper(CAST(priv AS VARCHAR)) LIKE '%USAGE%'",),
    "has_database_privilege": (
        "(db, priv) AS upper(CAST(priv AS VARCHAR)) LIKE '%CONNECT%' "
        "OR upper(CAST(priv AS VARCHAR)) LIKE '%TEMP%'",
    ),
    "has_sequence_privilege": ("(s, priv) AS false",),
    "has_function_privilege": ("(f, priv) AS upper(CAST(priv AS VARCHAR)) LIKE '%EXECUTE%'",),
    "pg_has_role": ("(r, priv) AS false", "(u, r, priv) AS false"),
    "pg_type_is_visible": ("(t) AS true",),
    "pg_function_is_visible": ("(f) AS true",),
    "pg_collation_is_visible": ("(c) AS true",),
    "pg_opclass_is_visible": ("(c) AS true",),
    "pg_is_other_temp_schema": ("(n) AS false",),
    "pg_my_temp_schema": ("() AS CAST(0 AS BIGINT)",),
    "pg_encoding_to_char": (
        "(e) AS CASE e WHEN 6 THEN 'UTF8' WHEN 0 THEN 'SQL_ASCII' ELSE '' END",
    ),
    "pg_char_to_encoding": (
        "(e) AS CASE upper(e) WHEN 'UTF8' THEN 6 WHEN 'SQL_ASCII' THEN 0 ELSE -1 END",
    ),
    "array_upper": ("(arr, dim) AS CASE WHEN dim = 1 AND len(arr) > 0 THEN len(arr) END",),
    "array_lower": ("(arr, dim) AS CASE WHEN dim = 1 AND len(arr) > 0 THEN 1 END",),
    "array_ndims": ("(arr) AS CASE WHEN len(arr) > 0 THEN 1 END",),
    "pg_relation_is_publishable": ("(r) AS false",),
    "pg_is_in_recovery": ("() AS false",),
    "pg_backend_pid": ("() AS 0",),
    "pg_relation_size": ("(r) AS CAST(0 AS BIGINT)", "(r, fork) AS CAST(0 AS BIGINT)"),
    "pg_total_relation_size": ("(r) AS CAST(0 AS BIGINT)",),
    "pg_table_size": ("(r) AS CAST(0 AS BIGINT)",),
    "pg_indexes_size": ("(r) AS CAST(0 AS BIGINT)",),
    "pg_database_size": ("(d) AS CAST(0 AS BIGINT)",),
    "pg_size_pretty": ("(n) AS CAST(n AS VARCHAR) || ' bytes'",),
    "pg_tablespace_location": ("(t) AS ''",),
    "pg_postmaster_start_time": ("() AS CAST(NULL AS TIMESTAMPTZ)",),
    "inet_server_addr": ("() AS CAST(NULL AS VARCHAR)",),
    "inet_server_port": ("() AS CAST(NULL AS INTEGER)",),
    "quote_ident": (
        "(ident) AS CASE WHEN regexp_full_match(ident, '[a-z_][a-z0-9_$]*') THEN ident "
        "ELSE '\"' || replace(ident, '\"', '\"\"') || '\"' END",
    ),
    # PostgreSQL's quote_literal (quote.c): quotes and backslashes doubled, E'...' when
    # there is a backslash; NULL for NULL. quote_nullable: the text NULL for NULL.
    "quote_literal": (
        "(value) AS CASE WHEN contains(CAST(value AS VARCHAR), '\\') "
        "THEN 'E''' || replace(replace(CAST(value AS VARCHAR), '\\', '\\\\'), '''', '''''') "
        "|| '''' ELSE '''' || replace(CAST(value AS VARCHAR), '''', '''''') || '''' END",
    ),
    "quote_nullable": (f"(value) AS coalesce({S}.quote_literal(value), 'NULL')",),
}

# name -> table macro definitions.
TABLE_MACROS: dict[str, tuple[str, ...]] = {
    "pg_get_keywords": (
        f"() AS TABLE SELECT word, catcode, barelabel, catdesc, baredesc FROM {S}.dp_keywords",
    ),
    "_pg_expandarray": (
        "(arr) AS TABLE SELECT unnest(arr) AS x, unnest(range(1, len(arr) + 1)) AS n",
    ),
}


def macro_statements() -> list[str]:
    """CREATE MACRO statements, in an order where each macro's dependencies come first."""
    statements = [
        f"CREATE MACRO {S}.{name} {', '.join(overloads)}" for name, overloads in MACROS.items()
    ]
    statements += [
        f"CREATE MACRO {S}.{name} {', '.join(overloads)}"
        for name, overloads in TABLE_MACROS.items()
    ]
    return statements


FUNCTIONS = frozenset(MACROS) | frozenset(TABLE_MACROS)


def macro_call(name: str, *args: exp.Expression) -> exp.Expression:
    """A call of the macro ``name`` defined here, in the schema it is created in (a
    translated query calls the emulation's functions, never DuckDB's own)."""
    return exp.Dot(
        this=exp.to_identifier(FUNCTIONS_SCHEMA),
        expression=exp.Anonymous(this=name, expressions=list(args)),
    )
