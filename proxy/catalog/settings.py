"""The session's parameters in catalog queries: current_setting() and the rows of
pg_settings.

Both are answered from SessionValues.settings, put into the query as literals of its
syntax tree (never pasted into text); nothing of them reaches a database. Custom
parameters (myapp.tenant) answer current_setting() but are not rows of pg_settings, as in
PostgreSQL; dpproxy's own (dpproxy.epsilon...) are both, as an extension's parameters.
set_config() is refused (function_calls), but for ``set_config('jit', value, false)``, which
asyncpg sends before it looks a type up (and again after, to put jit back): a no-op that
answers as PostgreSQL's (dpproxy runs no JIT: the session's jit is kept, as SET keeps it).
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlglot import exp

from proxy.catalog.refusal import CatalogRefused
from proxy.catalog.relations import Relation
from proxy.catalog.session_values import SessionValues
from proxy.parameter_table import is_placeholder, spelling
from proxy.pg_settings import view_setting
from proxy.pg_values import parse_bool
from proxy.sqlstate import UNDEFINED_OBJECT

#: SHOW's budget left (proxy.session reads it from the ledger): not a session value.
BUDGET_PARAMETER = "dpproxy.budget"
#: The one parameter set_config() takes (asyncpg's type lookup sets it off, then back).
JIT_PARAMETER = "jit"
_SET_HINT = "use SET name = value (SET dpproxy.epsilon = 0.5); current_setting(name) reads it"


def current_setting(args: list[exp.Expression], session: SessionValues) -> exp.Expression:
    """current_setting(name [, missing_ok]): as SHOW; NULL for a parameter not set when
    missing_ok is true (true, 'true', 'on'...: current_setting('myapp.tenant', true));
    NULL if either argument is NULL, as PostgreSQL's strict function. dpproxy's own
    settings (dpproxy.epsilon...) are among the session's, as SHOW gives them; but
    dpproxy.budget is refused whatever missing_ok says (SHOW reads it from the ledger)."""
    argument = _uncast_text(args[0])
    missing = _missing_ok(args[1]) if len(args) == 2 else False
    if isinstance(argument, exp.Null) or missing is None:
        return exp.cast(exp.Null(), exp.DataType.build("text"))
    if not (isinstance(argument, exp.Literal) and argument.is_string):
        raise CatalogRefused("current_setting() needs the parameter's name as a literal")
    name = argument.name.lower()
    if name == BUDGET_PARAMETER:
        raise CatalogRefused(
            f"current_setting() does not give {BUDGET_PARAMETER}: it is read from the "
            "privacy ledger, not kept in the session",
            hint=f"SHOW {BUDGET_PARAMETER} shows the budget left",
        )
    if name not in session.settings:
        if missing and len(args) == 2:
            return exp.cast(exp.Null(), exp.DataType.build("text"))
        raise CatalogRefused(
            f'unrecognized configuration parameter "{name}"', sqlstate=UNDEFINED_OBJECT
        )
    return exp.Literal.string(session.settings[name])


def set_config(args: list[exp.Expression]) -> exp.Expression | None:
    """``set_config('jit', value, false)``: the value as PostgreSQL's set_config() answers it
    ('on' or 'off'; NULL resets it, 'on'), a no-op; None for any other call (refused by
    the caller), and 22023 for a value that is not a boolean, as PostgreSQL."""
    if len(args) != 3:
        return None
    name, value = _uncast_text(args[0]), _uncast_text(args[1])
    local = args[2]
    while isinstance(local, exp.Cast) and local.to.is_type(exp.DataType.Type.BOOLEAN):
        local = local.this
    if not (isinstance(name, exp.Literal) and name.is_string) or not (
        isinstance(local, exp.Boolean) and not local.this
    ):
        return None  # set_config('jit', …, true) and computed arguments: refused
    if name.name.lower() != JIT_PARAMETER:
        return None
    if isinstance(value, exp.Null):
        return exp.Literal.string("on")  # reset: PostgreSQL's default
    if not (isinstance(value, exp.Literal) and value.is_string):
        return None
    flag = parse_bool(value.name.strip(" \t\n\r\f\v"))
    if flag is None:
        raise CatalogRefused(
            f'parameter "{JIT_PARAMETER}" requires a Boolean value', sqlstate="22023"
        )
    return exp.Literal.string("on" if flag else "off")


def refused_set_config() -> CatalogRefused:
    return CatalogRefused("dpproxy's catalog does not support the function set_config()", _SET_HINT)


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


def settings_literal(settings: Mapping[str, str]) -> exp.Expression:
    """The session's parameters for the session relations: pg_settings shows each
    setting as PostgreSQL does (a number with a unit in the parameter's own unit:
    work_mem '4MB' is '4096'), under its name as PostgreSQL spells it (TimeZone,
    DateStyle), custom parameters (myapp.tenant) not at all."""
    return exp.Array(
        expressions=[
            exp.Struct(
                expressions=[
                    exp.PropertyEQ(
                        this=exp.to_identifier("name"), expression=exp.Literal.string(spelling(k))
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


def with_units(
    relation: Relation, rows: exp.Table, session: SessionValues, alias: exp.TableAlias
) -> exp.Expression:
    """pg_settings (the session relation's ``rows``, aliased m) with each parameter's
    unit, as PostgreSQL shows it (kB for work_mem, ms for statement_timeout)."""
    units = [
        exp.If(this=exp.Literal.string(spelling(name)), true=exp.Literal.string(unit))
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
