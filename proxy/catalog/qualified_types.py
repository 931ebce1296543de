"""Types named with their schema, pg_catalog.int4 or "pg_catalog"."int4" (asyncpg's
copy_from_query casts each argument so), read as the built-in types they name.

sqlglot reads a schema-qualified type as a user-defined one, which no rule of the
catalog's casts knows; unqualified, the same name is the type PostgreSQL's parser would
find in pg_catalog: pg_catalog.x is read as "x" (pg_catalog.char is "char", as in
PostgreSQL; "Int4" is no type, and the casts refuse it, naming it).
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError

from proxy.catalog.relations import PG_CATALOG


def unqualified_type(node: exp.DataType) -> exp.DataType:
    """``node`` without its pg_catalog schema if it names a built-in type, else ``node``."""
    kind = node.args.get("kind")
    if node.this != exp.DataType.Type.USERDEFINED or not isinstance(kind, exp.Dot):
        return node
    schema, name = kind.this, kind.expression
    if not (
        isinstance(schema, exp.Identifier)
        and isinstance(name, exp.Identifier)
        and schema.name.lower() == PG_CATALOG
    ):
        return node
    spelled = name.name if name.quoted else name.name.lower()
    if spelled != spelled.lower() or not (spelled.replace("_", "").isalnum() and spelled.isascii()):
        return node  # pg_catalog."Int4" is no type; no text but a plain name is parsed
    # pg_catalog.x is the type named x in pg_catalog: what "x" names unqualified (so
    # pg_catalog.char is "char", not char(1), as in PostgreSQL).
    try:
        cast = sqlglot.parse_one(f'CAST(NULL AS "{spelled}")', read="postgres")
    except ParseError:
        return node
    built = cast.args.get("to") if isinstance(cast, exp.Cast) else None
    if not isinstance(built, exp.DataType):
        return node
    if node.expressions:  # pg_catalog.varchar(3), pg_catalog.numeric(10, 2)
        built.set("expressions", node.expressions)
    return built
