"""Decide whether a query is a catalog query, and translate it (PostgreSQL) into SQL for
the emulated catalog in DuckDB.

A query is a catalog query when every relation it reads is an emulated pg_catalog or
information_schema relation (or it reads none: ``SELECT 1``, ``SELECT version()``). A
query that names any other relation is not ours: the DP pipeline answers or refuses it.
The translation works on sqlglot's syntax tree; values from the session are put in as
literals of the tree, never pasted into text.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import sqlglot
from sqlglot import TokenType, exp
from sqlglot.errors import SqlglotError

from proxy.catalog.functions import FUNCTIONS
from proxy.catalog.recent import Recent
from proxy.catalog.relations import (
    FUNCTIONS_SCHEMA,
    INFORMATION_SCHEMA,
    PG_CATALOG,
    Relation,
    find_relation,
)
from proxy.pg_settings import is_placeholder, parameters_key, view_setting
from proxy.pg_values import parse_bool
from proxy.sqlstate import UNDEFINED_OBJECT

PUBLIC = "public"
PARSE_CACHE_SIZE = 1024  # statements whose classification (catalog query or not) is kept
CACHED_LENGTH = 4096  # longer statements are classified every time
_CATALOG_SCHEMAS = (PG_CATALOG, INFORMATION_SCHEMA)
# Table functions a catalog query may read from.
_TABLE_FUNCTIONS = frozenset(
    {
        "generate_series",
        "exploding_generate_series",
        "unnest",
        "explode",  # sqlglot's name for a schema-qualified unnest (pg_catalog.unnest)
        "pg_get_keywords",
        "_pg_expandarray",
    }
)
# DuckDB functions that have no business in a catalog query.
_REFUSED_FUNCTIONS = frozenset({"getenv", "set_config", "query", "query_table", "read_text"})
_OID_TYPES = frozenset({"oid", "xid", "cid", "regrole", "regoper", "regoperator"})
_TEXT_TYPES = frozenset(
    {"name", "text", "varchar", "bpchar", "char", '"char"', "character varying", "character"}
)
_INT_TYPES = {
    "int2": "SMALLINT",
    "smallint": "SMALLINT",
    "int4": "INTEGER",
    "integer": "INTEGER",
    "int": "INTEGER",
    "int8": "BIGINT",
    "bigint": "BIGINT",
}
_OPERATORS: Mapping[str, type[exp.Expression]] = {
    "=": exp.EQ,
    "<>": exp.NEQ,
    "!=": exp.NEQ,
    "<": exp.LT,
    "<=": exp.LTE,
    ">": exp.GT,
    ">=": exp.GTE,
    "~": exp.RegexpLike,
    "~*": exp.RegexpILike,
    "~~": exp.Like,
    "~~*": exp.ILike,
}


class CatalogRefused(Exception):
    """A catalog query dpproxy cannot answer; the message says what instead."""

    def __init__(self, message: str, hint: str | None = None, sqlstate: str = "0A000") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.sqlstate = sqlstate  # feature_not_supported, unless said otherwise


@dataclass(frozen=True)
class SessionValues:
    """What session-dependent functions answer."""

    user: str
    database: str
    version: str
    settings: Mapping[str, str]
    #: pg_settings.parameters_key(settings), what identifies them in cache keys; "": not
    #: given (remembered_translation computes it).
    settings_key: str = ""


@dataclass(frozen=True)
class Translation:
    sql: str  # DuckDB SQL over the emulated catalog
    column_names: tuple[str, ...] | None  # PostgreSQL's output names; None: unknown (*)


def translate(
    sql: str, session: SessionValues, parameters: Sequence[str | None] = ()
) -> Translation | None:
    """The DuckDB translation of ``sql`` if it is a catalog query, else None.

    ``parameters`` are the text values of $1, $2, ... (extended protocol). Raises
    CatalogRefused for a catalog query dpproxy cannot answer.
    """
    tree = catalog_tree(sql, session.user)
    if tree is None:
        return None
    try:
        names = _output_names(tree)
        rewritten = _bottom_up(tree.copy(), lambda node: _rewrite(node, session, parameters))
        if names is not None:
            _set_output_names(rewritten, names)
        return Translation(rewritten.sql(dialect="duckdb"), names)
    except RecursionError:
        # The syntax tree is deeper than Python's recursion allows (thousands of terms
        # nested, e.g. 1+1+...+1): refused as PostgreSQL refuses too deep a statement.
        raise CatalogRefused(
            "the statement is nested too deeply", hint="simplify the query", sqlstate="54001"
        ) from None


def cacheable(sql: str, parameters: Sequence[str | None]) -> bool:
    """Whether a statement's translation is remembered: a short statement, with short
    values of $1, $2... (both are kept in the cache's key)."""
    values = sum(len(value) for value in parameters if value is not None)
    return len(sql) + values <= CACHED_LENGTH


#: A statement's translation is a pure function of these: the statement, the session
#: values (the settings by their key, never by themselves: they may be many and long) and
#: the values of $1, $2...
TranslationKey = tuple[str, str, str, str, str, tuple[str | None, ...]]


def translation_key(
    sql: str, session: SessionValues, parameters: Sequence[str | None]
) -> TranslationKey:
    settings_key = session.settings_key or parameters_key(session.settings)
    return (sql, session.user, session.database, session.version, settings_key, tuple(parameters))


#: The translations of recent short catalog statements, shared by the translating threads.
_TRANSLATIONS: Recent[TranslationKey, Translation | None] = Recent(PARSE_CACHE_SIZE)


def remembered_translation(
    sql: str, session: SessionValues, parameters: Sequence[str | None] = ()
) -> Translation | None:
    """As translate(), remembering the translations of short statements (a translation is
    a pure function of the statement, the session values and the parameters)."""
    if not cacheable(sql, parameters) or catalog_tree(sql, session.user) is None:
        return translate(sql, session, parameters)
    key = translation_key(sql, session, parameters)
    found, translation = _TRANSLATIONS.get(key)
    if not found:
        translation = translate(sql, session, parameters)
        _TRANSLATIONS.put(key, translation)
    return translation


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


def _bottom_up(
    node: exp.Expression, rewrite: Callable[[exp.Expression], exp.Expression]
) -> exp.Expression:
    """Rewrite the children first, then the node (whose result is not visited again)."""
    for key, value in list(node.args.items()):
        if isinstance(value, exp.Expression):
            node.set(key, _bottom_up(value, rewrite))
        elif isinstance(value, list):
            node.set(
                key,
                [_bottom_up(v, rewrite) if isinstance(v, exp.Expression) else v for v in value],
            )
    return rewrite(node)


def _parse(sql: str) -> exp.Expression | None:
    try:
        statements = sqlglot.parse(sql, read="postgres")
    except RecursionError:
        return None  # not a catalog query; the rewriter refuses it cleanly
    except SqlglotError:
        try:
            statements = sqlglot.parse(_quote_keyword_labels(sql), read="postgres")
        except SqlglotError:
            return None
    statements = [s for s in statements if s is not None]
    if len(statements) != 1:
        return None
    query = statements[0]
    return query if isinstance(query, exp.Select | exp.SetOperation) else None


# Reserved words PostgreSQL accepts as column labels after AS and as column names after a
# dot (Metabase writes "... AS select", "t.select"); sqlglot needs them quoted.
_KEYWORD_LABELS = frozenset(
    {"select", "insert", "update", "delete", "table", "schema", "role", "default", "user"}
)


def _quote_keyword_labels(sql: str) -> str:
    try:
        tokens = sqlglot.tokenize(sql, read="postgres")
    except SqlglotError:
        return sql
    pieces: list[str] = []
    position = 0
    for before, token in zip(tokens, tokens[1:], strict=False):
        if (
            before.token_type in (TokenType.ALIAS, TokenType.DOT)
            and token.token_type not in (TokenType.VAR, TokenType.IDENTIFIER, TokenType.STRING)
            and token.text.lower() in _KEYWORD_LABELS
            and sql[token.start : token.end + 1].lower() == token.text.lower()
        ):
            pieces.append(sql[position : token.start])
            pieces.append(f'"{token.text.lower()}"')
            position = token.end + 1
    pieces.append(sql[position:])
    return "".join(pieces)


def _reads_only_catalog(tree: exp.Expression) -> bool:
    """True if every relation read is an emulated catalog relation. Raises CatalogRefused
    for catalog relations or table functions that are not emulated."""
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            name = _function_name(table.this)
            if name not in _TABLE_FUNCTIONS:
                raise CatalogRefused(
                    f"dpproxy does not support the function {name}() in FROM",
                    hint="catalog queries may read pg_catalog and information_schema relations",
                )
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


def _literal_list(values: Sequence[str]) -> exp.Expression:
    return exp.Array(expressions=[exp.Literal.string(v) for v in values])


def _call(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Dot(
        this=exp.to_identifier(FUNCTIONS_SCHEMA),
        expression=exp.Anonymous(this=name, expressions=list(args)),
    )


def _settings_literal(settings: Mapping[str, str]) -> exp.Expression:
    """The session's parameters for the session relations: pg_settings shows each
    setting as PostgreSQL does (a number with a unit in the parameter's own unit:
    work_mem '4MB' is '4096'), custom parameters (myapp.tenant) not at all."""
    return exp.Array(
        expressions=[
            exp.Struct(
                expressions=[
                    exp.PropertyEQ(
                        this=exp.to_identifier("name"), expression=exp.Literal.string(k)
                    ),
                    exp.PropertyEQ(
                        this=exp.to_identifier("setting"),
                        expression=exp.Literal.string(view_setting(k, v)[0]),
                    ),
                ]
            )
            for k, v in sorted(settings.items())
            if not is_placeholder(k)  # custom parameters (myapp.tenant): not, as in PostgreSQL
        ]
    )


def _with_units(
    relation: Relation, rows: exp.Table, session: SessionValues, alias: exp.TableAlias
) -> exp.Expression:
    """pg_settings (the session relation's ``rows``, aliased m) with each parameter's
    unit, as PostgreSQL shows it (kB for work_mem, ms for statement_timeout)."""
    units = [
        exp.If(this=exp.Literal.string(name), true=exp.Literal.string(unit))
        for name, value in sorted(session.settings.items())
        if not is_placeholder(name) and (unit := view_setting(name, value)[1]) is not None
    ]
    columns: list[exp.Expr] = []
    for name, duck in relation.duck_columns():
        column: exp.Expression = exp.column(name, table="m", quoted=True)
        if name == "unit" and units:
            case = exp.Case(this=exp.column("name", table="m", quoted=True), ifs=units)
            column = exp.cast(case, exp.DataType.build(duck))
        columns.append(exp.alias_(column, exp.to_identifier(name, quoted=True)))
    select = exp.select(*columns).from_(rows)
    return exp.Subquery(this=select, alias=alias)


def _rewrite(
    node: exp.Expression, session: SessionValues, parameters: Sequence[str | None]
) -> exp.Expression:
    if isinstance(node, exp.Identifier) and not node.quoted:
        return exp.Identifier(this=str(node.this).lower(), quoted=False)
    if isinstance(node, exp.Table):
        if isinstance(node.this, exp.Identifier):
            return _rewrite_table(node, session)
        node.set("db", None)  # pg_catalog.pg_get_keywords() -> the emulation's function
        return node
    if isinstance(node, exp.Column) and node.args.get("db") is not None:
        # pg_catalog.pg_class.relname -> pg_class.relname
        column = node.copy()
        column.set("db", None)
        column.set("catalog", None)
        return column
    if (
        isinstance(node, exp.Dot)
        and isinstance(node.this, exp.Identifier)
        and node.this.name.lower() == PG_CATALOG
        and not isinstance(node.expression, exp.Identifier)
    ):
        inner: exp.Expression = node.expression  # pg_catalog.f(...): f is rewritten already
        return inner
    if isinstance(node, exp.Operator):
        return _rewrite_operator(node)
    if isinstance(node, exp.Collate):
        collated: exp.Expression = node.this
        return collated
    if isinstance(node, exp.Cast):
        return _rewrite_cast(node)
    if isinstance(node, exp.Placeholder | exp.Parameter):
        return _parameter(node, parameters)
    return _rewrite_function(node, session)


def _rewrite_table(table: exp.Table, session: SessionValues) -> exp.Expression:
    schema = table.db.lower() if table.db else None
    relation = find_relation(schema, table.name.lower())
    if relation is None:
        return table  # a CTE
    alias = table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(relation.name))
    return _duck_relation(relation, session, alias)


def _duck_relation(
    relation: Relation, session: SessionValues, alias: exp.TableAlias
) -> exp.Expression:
    schema, _, name = relation.duck_name.partition(".")
    identifier = exp.to_identifier(name.strip('"'), quoted=True)
    if not relation.session:
        return exp.Table(this=identifier, db=exp.to_identifier(schema), alias=alias)
    call = exp.Anonymous(
        this=identifier,
        expressions=[
            exp.Literal.string(session.user),
            exp.Literal.string(session.database),
            _settings_literal(session.settings),
        ],
    )
    if relation.key == (PG_CATALOG, "pg_settings"):
        rows = exp.Table(this=call, db=exp.to_identifier(schema), alias=exp.TableAlias(this="m"))
        return _with_units(relation, rows, session, alias)
    return exp.Table(this=call, db=exp.to_identifier(schema), alias=alias)


def _rewrite_operator(node: exp.Operator) -> exp.Expression:
    symbol = str(node.args.get("operator", "")).strip().lower()
    symbol = symbol.removeprefix("pg_catalog.")
    negated = symbol.startswith("!") and symbol not in ("!=",)
    kind = _OPERATORS.get(symbol[1:] if negated else symbol)
    if kind is None:
        raise CatalogRefused(f"dpproxy does not support the operator OPERATOR({symbol})")
    built = kind(this=node.this, expression=node.expression)
    return exp.Not(this=built) if negated else built


def _type_name(to: exp.Expression) -> str:
    if isinstance(to, exp.DataType) and to.this == exp.DataType.Type.USERDEFINED:
        kind = to.args.get("kind")
        name = kind.name if isinstance(kind, exp.Dot) else str(kind)
        return name.lower()
    if isinstance(to, exp.ObjectIdentifier):
        return str(to.this).lower()
    if isinstance(to, exp.DataType):
        if to.this == exp.DataType.Type.ARRAY:
            return "array"
        return to.sql(dialect="postgres").lower()
    return to.sql(dialect="postgres").lower()


def _rewrite_cast(node: exp.Cast) -> exp.Expression:
    to = node.args["to"]
    name = _type_name(to)
    value = node.this
    shown = _shown_as_text(node)
    if name == "regclass":
        oid = value if not _is_text(value) else _call("to_regclass", value)
        return _call("regclass_name", oid) if shown else oid
    if name == "regtype":
        oid = value if not _is_text(value) else _call("to_regtype", value)
        return _call("regtype_name", oid) if shown else oid
    if name == "regnamespace":
        oid = value if not _is_text(value) else _call("to_regnamespace", value)
        return _call("regnamespace_name", oid) if shown else oid
    if name in ("regproc", "regprocedure"):
        return _call("regproc_name", value)
    if name in _OID_TYPES:
        return exp.cast(value, exp.DataType.build("BIGINT"))
    if name in _TEXT_TYPES or name.startswith(("varchar", "character", "bpchar")):
        return exp.cast(value, exp.DataType.build("VARCHAR"))
    if name in _INT_TYPES:
        return exp.cast(value, exp.DataType.build(_INT_TYPES[name]))
    if isinstance(to, exp.DataType) and to.this == exp.DataType.Type.ARRAY:
        inner = to.expressions[0] if to.expressions else None
        inner_name = _type_name(inner) if inner is not None else ""
        if inner_name in _INT_TYPES:
            return exp.cast(value, exp.DataType.build(f"{_INT_TYPES[inner_name]}[]"))
        if inner_name in _OID_TYPES or inner_name in ("regtype", "regclass"):
            return exp.cast(value, exp.DataType.build("BIGINT[]"))
        if inner_name in _TEXT_TYPES:
            return exp.cast(value, exp.DataType.build("VARCHAR[]"))
    if isinstance(to, exp.DataType) and to.this == exp.DataType.Type.USERDEFINED:
        raise CatalogRefused(f"dpproxy's catalog does not support the type {name}")
    return node


def _is_text(node: exp.Expression) -> bool:
    if isinstance(node, exp.Literal):
        return bool(node.is_string)
    if isinstance(node, exp.Cast):
        return _type_name(node.args["to"]) in _TEXT_TYPES
    return False


def _shown_as_text(node: exp.Cast) -> bool:
    """Whether a reg* cast's value is shown (output column, ::text, ORDER BY) rather than
    compared: PostgreSQL shows regclass as the relation's name, compares it as an OID."""
    parent = node.parent
    while isinstance(parent, exp.Alias | exp.Paren):
        parent = parent.parent
    if isinstance(parent, exp.Cast):
        return _type_name(parent.args["to"]) in _TEXT_TYPES
    return isinstance(parent, exp.Select | exp.Ordered)


def _parameter(node: exp.Expression, parameters: Sequence[str | None]) -> exp.Expression:
    text = node.name if isinstance(node, exp.Parameter) else ""
    index = int(text) if text.isdigit() else 0
    if not 1 <= index <= len(parameters):
        raise CatalogRefused(
            "this catalog query needs parameter values dpproxy did not receive",
            hint="send the values with the query (extended protocol), or write them in",
        )
    value = parameters[index - 1]
    return exp.Null() if value is None else exp.Literal.string(value)


def _rewrite_function(node: exp.Expression, session: SessionValues) -> exp.Expression:
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
    if name in _REFUSED_FUNCTIONS or name.startswith("duckdb_"):
        raise CatalogRefused(f"dpproxy's catalog does not support the function {name}()")
    if name == "version" and not args:
        return exp.Literal.string(session.version)
    if name == "current_setting" and args:
        return _current_setting(args, session)
    if name in ("json_build_object", "jsonb_build_object"):
        return exp.Anonymous(this="json_object", expressions=args)
    if name == "pg_get_userbyid":
        return _call(name, *args, exp.Literal.string(session.user))
    if name in _PRIVILEGE_ARITY and len(args) == _PRIVILEGE_ARITY[name]:
        args = args[1:]  # the user argument: privileges are the session's
    if name in FUNCTIONS:
        return _call(name, *args)
    return node


_PRIVILEGE_ARITY = {
    "has_table_privilege": 3,
    "has_any_column_privilege": 3,
    "has_column_privilege": 4,
    "has_schema_privilege": 3,
    "has_database_privilege": 3,
    "has_sequence_privilege": 3,
    "has_function_privilege": 3,
}


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


def _current_setting(args: list[exp.Expression], session: SessionValues) -> exp.Expression:
    """current_setting(name [, missing_ok]): as SHOW; NULL for a parameter not set when
    missing_ok is true (true, 'true', 'on'...: current_setting('myapp.tenant', true));
    NULL if either argument is NULL, as PostgreSQL's strict function."""
    argument = _uncast_text(args[0])
    missing = _missing_ok(args[1]) if len(args) == 2 else False
    if isinstance(argument, exp.Null) or missing is None:
        return exp.cast(exp.Null(), exp.DataType.build("text"))
    if not (isinstance(argument, exp.Literal) and argument.is_string):
        raise CatalogRefused("current_setting() needs the parameter's name as a literal")
    name = argument.name.lower()
    if name not in session.settings:
        if missing and len(args) == 2:
            return exp.cast(exp.Null(), exp.DataType.build("text"))
        raise CatalogRefused(
            f'unrecognized configuration parameter "{name}"', sqlstate=UNDEFINED_OBJECT
        )
    return exp.Literal.string(session.settings[name])


def _uncast_text(argument: exp.Expression) -> exp.Expression:
    """A text value without its casts to text (SQLAlchemy sends current_setting(
    %(name)s::VARCHAR): a text literal cast to text)."""
    while isinstance(argument, exp.Cast) and argument.to.is_type(*exp.DataType.TEXT_TYPES):
        argument = argument.this
    return argument


def _missing_ok(argument: exp.Expression) -> bool | None:
    """current_setting()'s missing_ok: true or false, as a boolean or as text PostgreSQL
    reads as one ('true', 'on', 't'...); None for NULL. Any other expression is false,
    as before (a missing parameter is refused)."""
    value = argument
    while isinstance(value, exp.Cast) and (
        value.to.is_type(exp.DataType.Type.BOOLEAN, *exp.DataType.TEXT_TYPES)
    ):
        value = value.this
    if isinstance(value, exp.Null):
        return None
    if isinstance(value, exp.Boolean):
        return bool(value.this)
    if isinstance(value, exp.Literal) and value.is_string:
        flag = parse_bool(value.name.strip(" \t\n\r\f\v"))
        if flag is None:
            raise CatalogRefused(
                f'invalid input syntax for type boolean: "{value.name}"', sqlstate="22P02"
            )
        return flag
    return False


def _first_select(tree: exp.Expression) -> exp.Select | None:
    select = tree
    while isinstance(select, exp.SetOperation):
        select = select.this
    return select if isinstance(select, exp.Select) else None


def _output_names(tree: exp.Expression) -> tuple[str, ...] | None:
    """PostgreSQL's names of the output columns (DuckDB would call ``SELECT 1`` "1")."""
    select = _first_select(tree)
    if select is None:
        return None
    names: list[str] = []
    for projection in select.expressions:
        if isinstance(projection, exp.Star) or (
            isinstance(projection, exp.Column) and isinstance(projection.this, exp.Star)
        ):
            return None
        if isinstance(projection, exp.Alias):
            alias = projection.args["alias"]
            quoted = isinstance(alias, exp.Identifier) and alias.quoted
            names.append(projection.alias if quoted else projection.alias.lower())
        else:
            names.append(_output_name(projection))
    return tuple(names)


def _set_output_names(tree: exp.Expression, names: tuple[str, ...]) -> None:
    select = _first_select(tree)
    if select is None:
        return
    select.set(
        "expressions",
        [
            exp.alias_(p.this if isinstance(p, exp.Alias) else p, exp.to_identifier(n, quoted=True))
            for p, n in zip(select.expressions, names, strict=True)
        ],
    )


def _output_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Column):
        return node.name
    if isinstance(node, exp.Cast):
        inner = _output_name(node.this)
        if inner != "?column?":
            return inner
        to = node.args["to"]
        return _type_name(to) if isinstance(to, exp.DataType) else "?column?"
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Anonymous):
        return _output_name(node.expression)
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    if isinstance(node, exp.Case):
        return "case"
    if isinstance(node, exp.Array):
        return "array"
    if isinstance(node, exp.Exists):
        return "exists"
    if isinstance(node, exp.Subquery):
        inner = node.this
        if isinstance(inner, exp.Select) and len(inner.expressions) == 1:
            first = inner.expressions[0]
            return first.alias if isinstance(first, exp.Alias) else _output_name(first)
        return "?column?"
    if isinstance(node, exp.Literal | exp.Boolean | exp.Null | exp.Binary | exp.Not | exp.Paren):
        return "?column?"
    if isinstance(node, exp.Func):
        return node.sql_name().lower()
    return "?column?"
