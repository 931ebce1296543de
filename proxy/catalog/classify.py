"""Whether a statement is a catalog query, and its syntax tree if it is.

A query is a catalog query when every relation it reads is an emulated pg_catalog or
information_schema relation (or it reads none: ``SELECT 1``, ``SELECT version()``). A
query that names any other relation is not ours: the DP pipeline answers or refuses it.
A query that reads a catalog relation dpproxy does not emulate, or a table function other
than the few it provides, is refused rather than passed on.

Every statement an analyst sends is classified, so the classification of short ones is
remembered (for each analyst apart: see catalog_tree).
"""

from __future__ import annotations

import functools

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from proxy.catalog.cache_keys import CACHED_LENGTH, PARSE_CACHE_SIZE
from proxy.catalog.oid_arrays import respell_oid_arrays
from proxy.catalog.refusal import CatalogRefused
from proxy.catalog.relations import INFORMATION_SCHEMA, PG_CATALOG, find_relation
from proxy.catalog.respell import quote_keyword_labels, respelled
from proxy.catalog.scalar_from import SCALAR_FROM_FUNCTIONS

_CATALOG_SCHEMAS = (PG_CATALOG, INFORMATION_SCHEMA)
# Table functions a catalog query may read from.
_TABLE_FUNCTIONS = (
    frozenset(
        {
            "generate_series",
            "exploding_generate_series",
            "unnest",
            "explode",  # sqlglot's name for a schema-qualified unnest (pg_catalog.unnest)
            "pg_get_keywords",
            "_pg_expandarray",
        }
    )
    | SCALAR_FROM_FUNCTIONS
)


def catalog_tree(sql: str, analyst: str) -> exp.Expression | None:
    """The parsed query if ``sql`` is a catalog query, else None; raises CatalogRefused.

    Remembered by text for each analyst (most statements a client sends repeat): the tree
    returned is shared and must not be changed, so translate() rewrites a copy. Not across
    analysts: a remembered statement is answered faster than a parsed one, and the time
    would tell one analyst which statements another sent.
    """
    if len(sql) <= CACHED_LENGTH:
        tree, refusal = _classify_cached(sql, analyst)
    else:
        tree, refusal = _classify(sql)
    if refusal is not None:
        raise CatalogRefused(refusal.message, refusal.hint)
    return tree


def _classify(sql: str) -> tuple[exp.Expression | None, CatalogRefused | None]:
    tree = _parse(sql)
    try:
        if tree is None or not _reads_only_catalog(tree):
            return None, None
    except CatalogRefused as refusal:
        return None, refusal
    return tree, None


@functools.lru_cache(maxsize=PARSE_CACHE_SIZE)
def _classify_cached(sql: str, analyst: str) -> tuple[exp.Expression | None, CatalogRefused | None]:
    return _classify(sql)


def _parse(sql: str) -> exp.Expression | None:
    sql = respell_oid_arrays(respelled(sql))
    try:
        statements = sqlglot.parse(sql, read="postgres")
    except RecursionError:
        return None  # not a catalog query; the rewriter refuses it cleanly
    except SqlglotError:
        try:
            statements = sqlglot.parse(quote_keyword_labels(sql), read="postgres")
        except SqlglotError:
            return None
    statements = [s for s in statements if s is not None]
    if len(statements) != 1:
        return None
    query = statements[0]
    return query if isinstance(query, exp.Select | exp.SetOperation) else None


def _reads_only_catalog(tree: exp.Expression) -> bool:
    """True if every relation read is an emulated catalog relation. Raises CatalogRefused
    for catalog relations or table functions that are not emulated."""
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    for lateral in tree.find_all(exp.Lateral):
        # FROM LATERAL f(…) reads the function as FROM f(…) does (sqlglot does not wrap
        # it in a Table): the same table functions only. A LATERAL subquery's own FROM is
        # checked below as any other.
        # A function of one value (string_to_array) is read as a table by scalar_from,
        # which rewrites FROM items only: refused under LATERAL.
        if not isinstance(lateral.this, exp.Subquery | exp.Select):
            _check_table_function(lateral.this, _TABLE_FUNCTIONS - SCALAR_FROM_FUNCTIONS)
    for table in tree.find_all(exp.Table):
        if table.this is None:  # ROWS FROM (…): its functions are Tables of their own
            raise CatalogRefused(
                "dpproxy does not support ROWS FROM (…) in a catalog query",
                hint="read each function in FROM on its own",
            )
        if not isinstance(table.this, exp.Identifier):
            _check_table_function(table.this, _TABLE_FUNCTIONS)
            continue
        schema = table.db.lower() if table.db else None
        name = table.name.lower() if table.this.quoted is False else table.name
        if schema is None and name in ctes:
            continue
        if table.catalog:
            return False
        if schema in _CATALOG_SCHEMAS or (schema is None and find_relation(None, name)):
            if find_relation(schema, name) is None:
                raise _not_emulated(f"{schema}.{name}")
            continue
        if schema is None and name.startswith("pg_"):
            # PostgreSQL would look in pg_catalog first; a table of the database with such
            # a name is answered by the DP pipeline.
            return False
        return False
    return True


def _check_table_function(call: exp.Expression, allowed: frozenset[str]) -> None:
    """Refuse a function read in FROM unless a catalog query may read it there."""
    name = _function_name(call)
    if name not in allowed:
        raise CatalogRefused(
            f"dpproxy does not support the function {name}() in FROM",
            hint="catalog queries may read pg_catalog and information_schema relations",
        )


def _not_emulated(relation: str) -> CatalogRefused:
    return CatalogRefused(
        f"dpproxy does not provide the catalog relation {relation}",
        hint="dpproxy answers catalog queries from the tables you may query; it provides "
        "pg_class, pg_attribute, pg_namespace, pg_type, information_schema.tables and "
        "columns, and the other relations that clients such as psql and JDBC use",
    )


def _function_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return node.sql(dialect="postgres").split("(", 1)[0].lower()
