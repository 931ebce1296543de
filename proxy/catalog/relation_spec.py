"""The pg_catalog and information_schema relations dpproxy emulates, with PostgreSQL 15's
columns and types (``SELECT *`` gives what PostgreSQL gives).

One relation per entry: ``schema.name relkind: column type, ...``; indented lines continue
the entry. Which rows each holds is decided in ``contents.py``.
"""

from __future__ import annotations

RELATIONS_SPEC = """\
pg_catalog.pg_namespace r: oid oid, nspname name, nspowner oid, nspacl aclitem[]
pg_catalog.pg_class r: oid oid, relname name, relnamespace oid, reltype oid, reloftype oid,
    relowner oid, relam oid, relfilenode oid, reltablespace oid, relpages integer, reltuples
    real, relallvisible integer, reltoastrelid oid, relhasindex boolean, relisshared boolean,
    relpersistence "char", relkind "char", relnatts smallint, relchecks smallint, relhasrules
    boolean, relhastriggers boolean, relhassubclass boolean, relrowsecurity boolean,
    relforcerowsecurity boolean, relispopulated boolean, relreplident "char", relispartition
    boolean, relrewrite oid, relfrozenxid xid, relminmxid xid, relacl aclitem[], reloptions
    text[], relpartbound pg_node_tree
pg_catalog.pg_attribute r: attrelid oid, attname name, atttypid oid, attstattarget integer,
    attlen smallint, attnum smallint, attndims integer, attcacheoff integer, atttypmod integer,
    attbyval boolean, attalign "char", attstorage "char", attcompression "char", attnotnull
    boolean, atthasdef boolean, atthasmissing boolean, attidentity "char", attgenerated "char",
    attisdropped boolean, attislocal boolean, attinhcount integer, attcollation oid, attacl
    aclitem[], attoptions text[], attfdwoptions text[], attmissingval anyarray
pg_catalog.pg_type r: oid oid, typname name, typnamespace oid, typowner oid, typlen smallint,
    typbyval boolean, typtype "char", typcategory "char", typispreferred boolean, typisdefined
    boolean, typdelim "char", typrelid oid, typsubscript regproc, typelem oid, typarray oid,
    typinput regproc, typoutput regproc, typreceive regproc, typsend regproc, typmodin regproc,
    typmodout regproc, typanalyze regproc, typalign "char", typstorage "char", typnotnull
    boolean, typbasetype oid, typtypmod integer, typndims integer, typcollation oid,
    typdefaultbin pg_node_tree, typdefault text, typacl aclitem[]
pg_catalog.pg_am r: oid oid, amname name, amhandler regproc, amtype "char"
pg_catalog.pg_index r: indexrelid oid, indrelid oid, indnatts smallint, indnkeyatts smallint,
    indisunique boolean, indnullsnotdistinct boolean, indisprimary boolean, indisexclusion
    boolean, indimmediate boolean, indisclustered boolean, indisvalid boolean, indcheckxmin
    boolean, indisready boolean, indislive boolean, indisreplident boolean, indkey int2vector,
    indcollation oidvector, indclass oidvector, indoption int2vector, indexprs pg_node_tree,
    indpred pg_node_tree
pg_catalog.pg_constraint r: oid oid, conname name, connamespace oid, contype "char",
    condeferrable boolean, condeferred boolean, convalidated boolean, conrelid oid, contypid
    oid, conindid oid, conparentid oid, confrelid oid, confupdtype "char", confdeltype "char",
    confmatchtype "char", conislocal boolean, coninhcount integer, connoinherit boolean, conkey
    smallint[], confkey smallint[], conpfeqop oid[], conppeqop oid[], conffeqop oid[],
    confdelsetcols smallint[], conexclop oid[], conbin pg_node_tree
pg_catalog.pg_description r: objoid oid, classoid oid, objsubid integer, description text
pg_catalog.pg_shdescription r: objoid oid, classoid oid, description text
pg_catalog.pg_database r: oid oid, datname name, datdba oid, encoding integer, datlocprovider
    "char", datistemplate boolean, datallowconn boolean, datconnlimit integer, datfrozenxid xid,
    datminmxid xid, dattablespace oid, datcollate text, datctype text, daticulocale text,
    datcollversion text, datacl aclitem[]
pg_catalog.pg_settings v: name text, setting text, unit text, category text, short_desc text,
    extra_desc text, context text, vartype text, source text, min_val text, max_val text,
    enumvals text[], boot_val text, reset_val text, sourcefile text, sourceline integer,
    pending_restart boolean
pg_catalog.pg_roles v: rolname name, rolsuper boolean, rolinherit boolean, rolcreaterole
    boolean, rolcreatedb boolean, rolcanlogin boolean, rolreplication boolean, rolconnlimit
    integer, rolpassword text, rolvaliduntil timestamp with time zone, rolbypassrls boolean,
    rolconfig text[], oid oid
pg_catalog.pg_user v: usename name, usesysid oid, usecreatedb boolean, usesuper boolean, userepl
    boolean, usebypassrls boolean, passwd text, valuntil timestamp with time zone, useconfig
    text[]
pg_catalog.pg_proc r: oid oid, proname name, pronamespace oid, proowner oid, prolang oid,
    procost real, prorows real, provariadic oid, prosupport regproc, prokind "char", prosecdef
    boolean, proleakproof boolean, proisstrict boolean, proretset boolean, provolatile "char",
    proparallel "char", pronargs smallint, pronargdefaults smallint, prorettype oid, proargtypes
    oidvector, proallargtypes oid[], proargmodes "char"[], proargnames text[], proargdefaults
    pg_node_tree, protrftypes oid[], prosrc text, probin text, prosqlbody pg_node_tree,
    proconfig text[], proacl aclitem[]
pg_catalog.pg_tables v: schemaname name, tablename name, tableowner name, tablespace name,
    hasindexes boolean, hasrules boolean, hastriggers boolean, rowsecurity boolean
pg_catalog.pg_views v: schemaname name, viewname name, viewowner name, definition text
pg_catalog.pg_matviews v: schemaname name, matviewname name, matviewowner name, tablespace name,
    hasindexes boolean, ispopulated boolean, definition text
pg_catalog.pg_indexes v: schemaname name, tablename name, indexname name, tablespace name,
    indexdef text
pg_catalog.pg_inherits r: inhrelid oid, inhparent oid, inhseqno integer, inhdetachpending
    boolean
pg_catalog.pg_policy r: oid oid, polname name, polrelid oid, polcmd "char", polpermissive
    boolean, polroles oid[], polqual pg_node_tree, polwithcheck pg_node_tree
pg_catalog.pg_statistic_ext r: oid oid, stxrelid oid, stxname name, stxnamespace oid, stxowner
    oid, stxstattarget integer, stxkeys int2vector, stxkind "char"[], stxexprs pg_node_tree
pg_catalog.pg_publication r: oid oid, pubname name, pubowner oid, puballtables boolean,
    pubinsert boolean, pubupdate boolean, pubdelete boolean, pubtruncate boolean, pubviaroot
    boolean
pg_catalog.pg_publication_namespace r: oid oid, pnpubid oid, pnnspid oid
pg_catalog.pg_publication_rel r: oid oid, prpubid oid, prrelid oid, prqual pg_node_tree, prattrs
    int2vector
pg_catalog.pg_attrdef r: oid oid, adrelid oid, adnum smallint, adbin pg_node_tree
pg_catalog.pg_collation r: oid oid, collname name, collnamespace oid, collowner oid,
    collprovider "char", collisdeterministic boolean, collencoding integer, collcollate text,
    collctype text, colliculocale text, collversion text
pg_catalog.pg_enum r: oid oid, enumtypid oid, enumsortorder real, enumlabel name
pg_catalog.pg_range r: rngtypid oid, rngsubtype oid, rngmultitypid oid, rngcollation oid,
    rngsubopc oid, rngcanonical regproc, rngsubdiff regproc
pg_catalog.pg_sequence r: seqrelid oid, seqtypid oid, seqstart bigint, seqincrement bigint,
    seqmax bigint, seqmin bigint, seqcache bigint, seqcycle boolean
pg_catalog.pg_sequences v: schemaname name, sequencename name, sequenceowner name, data_type
    regtype, start_value bigint, min_value bigint, max_value bigint, increment_by bigint, cycle
    boolean, cache_size bigint, last_value bigint
pg_catalog.pg_stats v: schemaname name, tablename name, attname name, inherited boolean,
    null_frac real, avg_width integer, n_distinct real, most_common_vals anyarray,
    most_common_freqs real[], histogram_bounds anyarray, correlation real, most_common_elems
    anyarray, most_common_elem_freqs real[], elem_count_histogram real[]
pg_catalog.pg_statistic r: starelid oid, staattnum smallint, stainherit boolean, stanullfrac
    real, stawidth integer, stadistinct real, stakind1 smallint, stakind2 smallint, stakind3
    smallint, stakind4 smallint, stakind5 smallint, staop1 oid, staop2 oid, staop3 oid, staop4
    oid, staop5 oid, stacoll1 oid, stacoll2 oid, stacoll3 oid, stacoll4 oid, stacoll5 oid,
    stanumbers1 real[], stanumbers2 real[], stanumbers3 real[], stanumbers4 real[], stanumbers5
    real[], stavalues1 anyarray, stavalues2 anyarray, stavalues3 anyarray, stavalues4 anyarray,
    stavalues5 anyarray
pg_catalog.pg_stat_user_tables v: relid oid, schemaname name, relname name, seq_scan bigint,
    seq_tup_read bigint, idx_scan bigint, idx_tup_fetch bigint, n_tup_ins bigint, n_tup_upd
    bigint, n_tup_del bigint, n_tup_hot_upd bigint, n_live_tup bigint, n_dead_tup bigint,
    n_mod_since_analyze bigint, n_ins_since_vacuum bigint, last_vacuum timestamp with time zone,
    last_autovacuum timestamp with time zone, last_analyze timestamp with time zone,
    last_autoanalyze timestamp with time zone, vacuum_count bigint, autovacuum_count bigint,
    analyze_count bigint, autoanalyze_count bigint
pg_catalog.pg_stat_all_tables v: relid oid, schemaname name, relname name, seq_scan bigint,
    seq_tup_read bigint, idx_scan bigint, idx_tup_fetch bigint, n_tup_ins bigint, n_tup_upd
    bigint, n_tup_del bigint, n_tup_hot_upd bigint, n_live_tup bigint, n_dead_tup bigint,
    n_mod_since_analyze bigint, n_ins_since_vacuum bigint, last_vacuum timestamp with time zone,
    last_autovacuum timestamp with time zone, last_analyze timestamp with time zone,
    last_autoanalyze timestamp with time zone, vacuum_count bigint, autovacuum_count bigint,
    analyze_count bigint, autoanalyze_count bigint
pg_catalog.pg_statio_user_tables v: relid oid, schemaname name, relname name, heap_blks_read
    bigint, heap_blks_hit bigint, idx_blks_read bigint, idx_blks_hit bigint, toast_blks_read
    bigint, toast_blks_hit bigint, tidx_blks_read bigint, tidx_blks_hit bigint
pg_catalog.pg_trigger r: oid oid, tgrelid oid, tgparentid oid, tgname name, tgfoid oid, tgtype
    smallint, tgenabled "char", tgisinternal boolean, tgconstrrelid oid, tgconstrindid oid,
    tgconstraint oid, tgdeferrable boolean, tginitdeferred boolean, tgnargs smallint, tgattr
    int2vector, tgargs bytea, tgqual pg_node_tree, tgoldtable name, tgnewtable name
pg_catalog.pg_rewrite r: oid oid, rulename name, ev_class oid, ev_type "char", ev_enabled
    "char", is_instead boolean, ev_qual pg_node_tree, ev_action pg_node_tree
pg_catalog.pg_depend r: classid oid, objid oid, objsubid integer, refclassid oid, refobjid oid,
    refobjsubid integer, deptype "char"
pg_catalog.pg_foreign_table r: ftrelid oid, ftserver oid, ftoptions text[]
pg_catalog.pg_partitioned_table r: partrelid oid, partstrat "char", partnatts smallint,
    partdefid oid, partattrs int2vector, partclass oidvector, partcollation oidvector, partexprs
    pg_node_tree
pg_catalog.pg_extension r: oid oid, extname name, extowner oid, extnamespace oid, extrelocatable
    boolean, extversion text, extconfig oid[], extcondition text[]
pg_catalog.pg_tablespace r: oid oid, spcname name, spcowner oid, spcacl aclitem[], spcoptions
    text[]
pg_catalog.pg_auth_members r: roleid oid, member oid, grantor oid, admin_option boolean
pg_catalog.pg_language r: oid oid, lanname name, lanowner oid, lanispl boolean, lanpltrusted
    boolean, lanplcallfoid oid, laninline oid, lanvalidator oid, lanacl aclitem[]
pg_catalog.pg_event_trigger r: oid oid, evtname name, evtevent name, evtowner oid, evtfoid oid,
    evtenabled "char", evttags text[]
pg_catalog.pg_foreign_data_wrapper r: oid oid, fdwname name, fdwowner oid, fdwhandler oid,
    fdwvalidator oid, fdwacl aclitem[], fdwoptions text[]
pg_catalog.pg_foreign_server r: oid oid, srvname name, srvowner oid, srvfdw oid, srvtype text,
    srvversion text, srvacl aclitem[], srvoptions text[]
pg_catalog.pg_opclass r: oid oid, opcmethod oid, opcname name, opcnamespace oid, opcowner oid,
    opcfamily oid, opcintype oid, opcdefault boolean, opckeytype oid
pg_catalog.pg_operator r: oid oid, oprname name, oprnamespace oid, oprowner oid, oprkind "char",
    oprcanmerge boolean, oprcanhash boolean, oprleft oid, oprright oid, oprresult oid, oprcom
    oid, oprnegate oid, oprcode regproc, oprrest regproc, oprjoin regproc
pg_catalog.pg_cast r: oid oid, castsource oid, casttarget oid, castfunc oid, castcontext "char",
    castmethod "char"
pg_catalog.pg_aggregate r: aggfnoid regproc, aggkind "char", aggnumdirectargs smallint,
    aggtransfn regproc, aggfinalfn regproc, aggcombinefn regproc, aggserialfn regproc,
    aggdeserialfn regproc, aggmtransfn regproc, aggminvtransfn regproc, aggmfinalfn regproc,
    aggfinalextra boolean, aggmfinalextra boolean, aggfinalmodify "char", aggmfinalmodify
    "char", aggsortop oid, aggtranstype oid, aggtransspace integer, aggmtranstype oid,
    aggmtransspace integer, agginitval text, aggminitval text
pg_catalog.pg_conversion r: oid oid, conname name, connamespace oid, conowner oid,
    conforencoding integer, contoencoding integer, conproc regproc, condefault boolean
pg_catalog.pg_rules v: schemaname name, tablename name, rulename name, definition text
pg_catalog.pg_policies v: schemaname name, tablename name, policyname name, permissive text,
    roles name[], cmd text, qual text, with_check text
pg_catalog.pg_timezone_names v: name text, abbrev text, utc_offset interval, is_dst boolean
pg_catalog.pg_locks v: locktype text, database oid, relation oid, page integer, tuple smallint,
    virtualxid text, transactionid xid, classid oid, objid oid, objsubid smallint,
    virtualtransaction text, pid integer, mode text, granted boolean, fastpath boolean,
    waitstart timestamp with time zone
pg_catalog.pg_stat_activity v: datid oid, datname name, pid integer, leader_pid integer,
    usesysid oid, usename name, application_name text, client_addr inet, client_hostname text,
    client_port integer, backend_start timestamp with time zone, xact_start timestamp with time
    zone, query_start timestamp with time zone, state_change timestamp with time zone,
    wait_event_type text, wait_event text, state text, backend_xid xid, backend_xmin xid,
    query_id bigint, query text, backend_type text
information_schema.tables v: table_catalog sql_identifier, table_schema sql_identifier,
    table_name sql_identifier, table_type character_data, self_referencing_column_name
    sql_identifier, reference_generation character_data, user_defined_type_catalog
    sql_identifier, user_defined_type_schema sql_identifier, user_defined_type_name
    sql_identifier, is_insertable_into yes_or_no, is_typed yes_or_no, commit_action
    character_data
information_schema.columns v: table_catalog sql_identifier, table_schema sql_identifier,
    table_name sql_identifier, column_name sql_identifier, ordinal_position cardinal_number,
    column_default character_data, is_nullable yes_or_no, data_type character_data,
    character_maximum_length cardinal_number, character_octet_length cardinal_number,
    numeric_precision cardinal_number, numeric_precision_radix cardinal_number, numeric_scale
    cardinal_number, datetime_precision cardinal_number, interval_type character_data,
    interval_precision cardinal_number, character_set_catalog sql_identifier,
    character_set_schema sql_identifier, character_set_name sql_identifier, collation_catalog
    sql_identifier, collation_schema sql_identifier, collation_name sql_identifier,
    domain_catalog sql_identifier, domain_schema sql_identifier, domain_name sql_identifier,
    udt_catalog sql_identifier, udt_schema sql_identifier, udt_name sql_identifier,
    scope_catalog sql_identifier, scope_schema sql_identifier, scope_name sql_identifier,
    maximum_cardinality cardinal_number, dtd_identifier sql_identifier, is_self_referencing
    yes_or_no, is_identity yes_or_no, identity_generation character_data, identity_start
    character_data, identity_increment character_data, identity_maximum character_data,
    identity_minimum character_data, identity_cycle yes_or_no, is_generated character_data,
    generation_expression character_data, is_updatable yes_or_no
information_schema.schemata v: catalog_name sql_identifier, schema_name sql_identifier,
    schema_owner sql_identifier, default_character_set_catalog sql_identifier,
    default_character_set_schema sql_identifier, default_character_set_name sql_identifier,
    sql_path character_data
information_schema.views v: table_catalog sql_identifier, table_schema sql_identifier,
    table_name sql_identifier, view_definition character_data, check_option character_data,
    is_updatable yes_or_no, is_insertable_into yes_or_no, is_trigger_updatable yes_or_no,
    is_trigger_deletable yes_or_no, is_trigger_insertable_into yes_or_no
information_schema.table_constraints v: constraint_catalog sql_identifier, constraint_schema
    sql_identifier, constraint_name sql_identifier, table_catalog sql_identifier, table_schema
    sql_identifier, table_name sql_identifier, constraint_type character_data, is_deferrable
    yes_or_no, initially_deferred yes_or_no, enforced yes_or_no, nulls_distinct yes_or_no
information_schema.key_column_usage v: constraint_catalog sql_identifier, constraint_schema
    sql_identifier, constraint_name sql_identifier, table_catalog sql_identifier, table_schema
    sql_identifier, table_name sql_identifier, column_name sql_identifier, ordinal_position
    cardinal_number, position_in_unique_constraint cardinal_number
information_schema.referential_constraints v: constraint_catalog sql_identifier,
    constraint_schema sql_identifier, constraint_name sql_identifier, unique_constraint_catalog
    sql_identifier, unique_constraint_schema sql_identifier, unique_constraint_name
    sql_identifier, match_option character_data, update_rule character_data, delete_rule
    character_data
information_schema.routines v: specific_catalog sql_identifier, specific_schema sql_identifier,
    specific_name sql_identifier, routine_catalog sql_identifier, routine_schema sql_identifier,
    routine_name sql_identifier, routine_type character_data, module_catalog sql_identifier,
    module_schema sql_identifier, module_name sql_identifier, udt_catalog sql_identifier,
    udt_schema sql_identifier, udt_name sql_identifier, data_type character_data,
    character_maximum_length cardinal_number, character_octet_length cardinal_number,
    character_set_catalog sql_identifier, character_set_schema sql_identifier,
    character_set_name sql_identifier, collation_catalog sql_identifier, collation_schema
    sql_identifier, collation_name sql_identifier, numeric_precision cardinal_number,
    numeric_precision_radix cardinal_number, numeric_scale cardinal_number, datetime_precision
    cardinal_number, interval_type character_data, interval_precision cardinal_number,
    type_udt_catalog sql_identifier, type_udt_schema sql_identifier, type_udt_name
    sql_identifier, scope_catalog sql_identifier, scope_schema sql_identifier, scope_name
    sql_identifier, maximum_cardinality cardinal_number, dtd_identifier sql_identifier,
    routine_body character_data, routine_definition character_data, external_name
    character_data, external_language character_data, parameter_style character_data,
    is_deterministic yes_or_no, sql_data_access character_data, is_null_call yes_or_no, sql_path
    character_data, schema_level_routine yes_or_no, max_dynamic_result_sets cardinal_number,
    is_user_defined_cast yes_or_no, is_implicitly_invocable yes_or_no, security_type
    character_data, to_sql_specific_catalog sql_identifier, to_sql_specific_schema
    sql_identifier, to_sql_specific_name sql_identifier, as_locator yes_or_no, created
    time_stamp, last_altered time_stamp, new_savepoint_level yes_or_no, is_udt_dependent
    yes_or_no, result_cast_from_data_type character_data, result_cast_as_locator yes_or_no,
    result_cast_char_max_length cardinal_number, result_cast_char_octet_length cardinal_number,
    result_cast_char_set_catalog sql_identifier, result_cast_char_set_schema sql_identifier,
    result_cast_char_set_name sql_identifier, result_cast_collation_catalog sql_identifier,
    result_cast_collation_schema sql_identifier, result_cast_collation_name sql_identifier,
    result_cast_numeric_precision cardinal_number, result_cast_numeric_precision_radix
    cardinal_number, result_cast_numeric_scale cardinal_number, result_cast_datetime_precision
    cardinal_number, result_cast_interval_type character_data, result_cast_interval_precision
    cardinal_number, result_cast_type_udt_catalog sql_identifier, result_cast_type_udt_schema
    sql_identifier, result_cast_type_udt_name sql_identifier, result_cast_scope_catalog
    sql_identifier, result_cast_scope_schema sql_identifier, result_cast_scope_name
    sql_identifier, result_cast_maximum_cardinality cardinal_number, result_cast_dtd_identifier
    sql_identifier
information_schema.constraint_column_usage v: table_catalog sql_identifier, table_schema
    sql_identifier, table_name sql_identifier, column_name sql_identifier, constraint_catalog
    sql_identifier, constraint_schema sql_identifier, constraint_name sql_identifier
information_schema.check_constraints v: constraint_catalog sql_identifier, constraint_schema
    sql_identifier, constraint_name sql_identifier, check_clause character_data
information_schema.parameters v: specific_catalog sql_identifier, specific_schema
    sql_identifier, specific_name sql_identifier, ordinal_position cardinal_number,
    parameter_mode character_data, is_result yes_or_no, as_locator yes_or_no, parameter_name
    sql_identifier, data_type character_data, character_maximum_length cardinal_number,
    character_octet_length cardinal_number, character_set_catalog sql_identifier,
    character_set_schema sql_identifier, character_set_name sql_identifier, collation_catalog
    sql_identifier, collation_schema sql_identifier, collation_name sql_identifier,
    numeric_precision cardinal_number, numeric_precision_radix cardinal_number, numeric_scale
    cardinal_number, datetime_precision cardinal_number, interval_type character_data,
    interval_precision cardinal_number, udt_catalog sql_identifier, udt_schema sql_identifier,
    udt_name sql_identifier, scope_catalog sql_identifier, scope_schema sql_identifier,
    scope_name sql_identifier, maximum_cardinality cardinal_number, dtd_identifier
    sql_identifier, parameter_default character_data
information_schema.character_sets v: character_set_catalog sql_identifier, character_set_schema
    sql_identifier, character_set_name sql_identifier, character_repertoire sql_identifier,
    form_of_use sql_identifier, default_collate_catalog sql_identifier, default_collate_schema
    sql_identifier, default_collate_name sql_identifier
pg_catalog.pg_cursors v: name text, statement text, is_holdable boolean, is_binary boolean,
    is_scrollable boolean, creation_time timestamp with time zone
"""
