"""Function calls in a catalog query, as the emulated catalog answers them.

Functions whose value depends on the session (current_user, current_schema, version(),
current_setting(), the moment) become literals of the session's values; PostgreSQL's
catalog functions become calls of the emulation's macros (proxy.catalog.functions), with
the privilege functions' user argument dropped: privileges are the session's. DuckDB's
functions that would read the environment, files or other databases are refused: a
catalog query must answer from the emulated catalog alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from proxy.catalog.contents import PUBLIC
from proxy.catalog.functions import FUNCTIONS, macro_call
from proxy.catalog.identifiers import parse_ident_call
from proxy.catalog.local_times import rewrite_moment
from proxy.catalog.refusal import CatalogRefused
from proxy.catalog.relations import PG_CATALOG
from proxy.catalog.session_values import SessionValues
from proxy.catalog.settings import current_setting, refused_set_config, set_config

# DuckDB functions that have no business in a catalog query.
_REFUSED_FUNCTIONS = frozenset({"getenv", "set_config", "query", "query_table", "read_text"})
#: PostgreSQL's advisory lock functions that would take a lock: dpproxy takes none, and
#: does not pretend to (a client would believe it holds one).
_ADVISORY_LOCKS = frozenset(
    f"pg_{attempt}advisory_{scope}lock{mode}"
    for attempt in ("", "try_")
    for scope in ("", "xact_")
    for mode in ("", "_shared")
)
#: The functions that release a session's advisory lock (by key: one bigint, or two int).
_ADVISORY_UNLOCKS = frozenset({"pg_advisory_unlock", "pg_advisory_unlock_shared"})
_PRIVILEGE_ARITY = {
    "has_table_privilege": 3,
    "has_any_column_privilege": 3,
    "has_column_privilege": 4,
    "has_schema_privilege": 3,
    "has_database_privilege": 3,
    "has_sequence_privilege": 3,
    "has_function_privilege": 3,
}


def rewrite_function(node: exp.Expression, session: SessionValues) -> exp.Expression:
    """``node`` as the emulation answers it if it is a function call, else ``node``."""
    moment = rewrite_moment(node, session)
    if moment is not None:
        return moment
    if isinstance(node, exp.CurrentSchema):
        return exp.Literal.string(PUBLIC)
    if isinstance(node, exp.CurrentSchemas):
        implicit = node.this
        with_implicit = not (isinstance(implicit, exp.Boolean) and not implicit.this)
        return _literal_list([PG_CATALOG, PUBLIC] if with_implicit else [PUBLIC])
    if isinstance(node, exp.CurrentUser | exp.SessionUser):
        return exp.Literal.string(session.user)
    if _is_user_keyword(node):
        return exp.Literal.string(session.user)
    if isinstance(node, exp.CurrentDatabase | exp.CurrentCatalog):
        return exp.Literal.string(session.database)
    if isinstance(node, exp.CurrentVersion):
        return exp.Literal.string(session.version)
    if not isinstance(node, exp.Anonymous):
        return node
    name = str(node.this).lower()
    args = list(node.expressions)
    if name == "set_config":
        answer = set_config(args)
        if answer is None:
            raise refused_set_config()
        return answer
    if name in _REFUSED_FUNCTIONS or name.startswith("duckdb_"):
        raise CatalogRefused(f"dpproxy's catalog does not support the function {name}()")
    if name == "version" and not args:
        return exp.Literal.string(session.version)
    advisory = _advisory_lock_call(name, args)
    if advisory is not None:
        return advisory
    if name == "parse_ident":
        return parse_ident_call(args)
    if name == "current_setting" and args:
        return current_setting(args, session)
    if name in ("json_build_object", "jsonb_build_object"):
        return exp.Anonymous(this="json_object", expressions=args)
    if name == "pg_get_userbyid":
        return macro_call(name, *args, exp.Literal.string(session.user))
    if name in _PRIVILEGE_ARITY and len(args) == _PRIVILEGE_ARITY[name]:
        args = args[1:]  # the user argument: privileges are the session's
    if name in FUNCTIONS:
        return macro_call(name, *args)
    return node


def _literal_list(values: Sequence[str]) -> exp.Expression:
    return exp.Array(expressions=[exp.Literal.string(v) for v in values])


def _is_user_keyword(node: exp.Expression) -> bool:
    """``user`` / ``current_role`` (sqlglot reads them as column names)."""
    if not isinstance(node, exp.Column) or node.table:
        return False
    identifier = node.this
    return (
        isinstance(identifier, exp.Identifier)
        and not identifier.quoted
        and identifier.name.lower() in ("user", "current_role")
    )


def _advisory_lock_call(name: str, args: list[exp.Expression]) -> exp.Expression | None:
    """PostgreSQL's advisory lock functions, as a session that holds no lock sees them:
    pg_advisory_unlock_all() releases nothing (void: shown as an empty text; asyncpg's
    reset of a pooled connection calls it), pg_advisory_unlock[_shared](key) is false
    (NULL for a NULL key, as the function is strict); the functions that take a lock are
    refused. None for any other function."""
    if name == "pg_advisory_unlock_all" and not args:
        return exp.Literal.string("")
    if name in _ADVISORY_UNLOCKS and len(args) in (1, 2):
        key_type = "BIGINT" if len(args) == 1 else "INTEGER"
        keys = [exp.cast(arg, exp.DataType.build(key_type)) for arg in args]
        return exp.Case(
            ifs=[exp.If(this=exp.or_(*(k.is_(exp.Null()) for k in keys)), true=exp.Null())],
            default=exp.false(),
        )
    if name in _ADVISORY_LOCKS:
        raise CatalogRefused(
            f"dpproxy does not take advisory locks: {name}() is not supported",
            hint="dpproxy's sessions share no lock; coordinate clients another way "
            "(pg_advisory_unlock_all() is answered: there is never a lock to release)",
        )
    return None
