"""PostgreSQL 15's SQL keywords, as ``pg_get_keywords()`` lists them (DBeaver asks at connect).

Grouped by category code (U unreserved, C unreserved but not a function or type name,
T reserved but allowed as a function or type name, R reserved) and whether the word may
be a bare column label. Copied from PostgreSQL 15; no data of any database.
"""

from __future__ import annotations

KEYWORDS: dict[tuple[str, bool], str] = {
    ("C", False): ("char character precision"),
    ("C", True): (
        "between bigint bit boolean coalesce dec decimal exists extract float greatest "
        "grouping inout int integer interval least national nchar none normalize nullif "
        "numeric out overlay position real row setof smallint substring time timestamp treat "
        "trim values varchar xmlattributes xmlconcat xmlelement xmlexists xmlforest "
        "xmlnamespaces xmlparse xmlpi xmlroot xmlserialize xmltable"
    ),
    ("R", False): (
        "array as create except fetch for from grant group having intersect into limit offset "
        "on order returning to union where window with"
    ),
    ("R", True): (
        "all analyse analyze and any asc asymmetric both case cast check collate column "
        "constraint current_catalog current_date current_role current_time current_timestamp "
        "current_user default deferrable desc distinct do else end false foreign in initially "
        "lateral leading localtime localtimestamp not null only or placing primary references "
        "select session_user some symmetric table then trailing true unique user using "
        "variadic when"
    ),
    ("T", False): ("isnull notnull overlaps"),
    ("T", True): (
        "authorization binary collation concurrently cross current_schema freeze full ilike "
        "inner is join left like natural outer right similar tablesample verbose"
    ),
    ("U", False): ("day filter hour minute month over second varying within without year"),
    ("U", True): (
        "abort absolute access action add admin after aggregate also alter always asensitive "
        "assertion assignment at atomic attach attribute backward before begin breadth by "
        "cache call called cascade cascaded catalog chain characteristics checkpoint class "
        "close cluster columns comment comments commit committed compression configuration "
        "conflict connection constraints content continue conversion copy cost csv cube "
        "current cursor cycle data database deallocate declare defaults deferred definer "
        "delete delimiter delimiters depends depth detach dictionary disable discard document "
        "domain double drop each enable encoding encrypted enum escape event exclude "
        "excluding exclusive execute explain expression extension external family finalize "
        "first following force forward function functions generated global granted groups "
        "handler header hold identity if immediate immutable implicit import include "
        "including increment index indexes inherit inherits inline input insensitive insert "
        "instead invoker isolation key label language large last leakproof level listen load "
        "local location lock locked logged mapping match matched materialized maxvalue merge "
        "method minvalue mode move name names new next nfc nfd nfkc nfkd no normalized "
        "nothing notify nowait nulls object of off oids old operator option options "
        "ordinality others overriding owned owner parallel parameter parser partial partition "
        "passing password plans policy preceding prepare prepared preserve prior privileges "
        "procedural procedure procedures program publication quote range read reassign "
        "recheck recursive ref referencing refresh reindex relative release rename repeatable "
        "replace replica reset restart restrict return returns revoke role rollback rollup "
        "routine routines rows rule savepoint schema schemas scroll search security sequence "
        "sequences serializable server session set sets share show simple skip snapshot sql "
        "stable standalone start statement statistics stdin stdout storage stored strict "
        "strip subscription support sysid system tables tablespace temp template temporary "
        "text ties transaction transform trigger truncate trusted type types uescape "
        "unbounded uncommitted unencrypted unknown unlisten unlogged until update vacuum "
        "valid validate validator value version view views volatile whitespace work wrapper "
        "write xml yes zone"
    ),
}
