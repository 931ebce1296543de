"""SET's values checked and written as PostgreSQL checks and writes them.

``checked_value`` gives what SHOW shows (and ParameterStatus reports) after SET of any
parameter of proxy.parameter_table, by its entry: its kind's check (booleans, integers with
units and ranges, reals, enums, free text) or dpproxy's own reading, then, for a
parameter kept at one value, the refusal (0A000) of any other; a custom parameter
(``myapp.tenant``) keeps its value as written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from proxy.parameter_table import PARAMETERS, Parameter, is_placeholder, spelling
from proxy.pg_settings import check_value_length
from proxy.pg_values import integer_setting, invalid_value, on_off, parse_bool, real_setting
from proxy.seam import QueryError
from proxy.sqlstate import (
    CANT_CHANGE_RUNTIME_PARAM,
    FEATURE_NOT_SUPPORTED,
    INVALID_PARAMETER_VALUE,
    UNDEFINED_OBJECT,
)

INVALID_NAME = "42602"

# A custom parameter's name: two or more simple identifiers separated by dots.
_IDENTIFIER = r"[A-Za-z_\u0080-\U0010ffff][A-Za-z0-9_$\u0080-\U0010ffff]*"
_CUSTOM_NAME = re.compile(rf"{_IDENTIFIER}(?:\.{_IDENTIFIER})+")


def check_name(name: str) -> None:
    """QueryError 42602, as PostgreSQL, for a custom parameter's name that is no chain of
    identifiers (``a.b-c``, ``foo.``)."""
    if is_placeholder(name) and not _CUSTOM_NAME.fullmatch(name):
        raise QueryError(
            INVALID_NAME,
            f'invalid configuration parameter name "{name}"',
            detail="Custom parameter names must be two or more simple identifiers "
            "separated by dots.",
        )


def checked_value(
    name: str, value: str, current: Mapping[str, str], reset: Mapping[str, str]
) -> str:
    """What SHOW gives after SET ``name`` = ``value`` (``name``: one of PARAMETERS or a
    custom one), checked as PostgreSQL 15 checks it: QueryError 22023 for a value it
    refuses, 42602 for a malformed custom name, 0A000 for a value dpproxy cannot honour
    (another than the one a refused parameter is kept at, or one that would change how
    dpproxy writes answers), 54000 for a free-text value longer than MAX_VALUE_LENGTH.
    ``current`` and ``reset``: the session's values now and at its start."""
    parameter = PARAMETERS.get(name)
    if parameter is None:
        if not is_placeholder(name):  # not reached: the session knows its parameters
            raise QueryError(UNDEFINED_OBJECT, f'unrecognized configuration parameter "{name}"')
        check_name(name)
        check_value_length(name, value)
        return value
    if parameter.read_only:  # not reached: the session refuses them first, alike
        raise QueryError(CANT_CHANGE_RUNTIME_PARAM, f'parameter "{name}" cannot be changed')
    if parameter.refused is not None:
        return _kept_value(name, parameter, value, current, reset)
    shown = _checked(name, parameter, value, current, reset)
    if parameter.writes_one_way is not None and shown != parameter.default:
        spelled, only = spelling(name), parameter.default
        raise QueryError(
            FEATURE_NOT_SUPPORTED,
            f"dpproxy supports only {spelled} = {only} ({parameter.writes_one_way}), not {shown}",
            hint=f"leave {spelled} out of the connection settings, or SET {spelled} = {only}",
        )
    return shown


def _checked(
    name: str,
    parameter: Parameter,
    value: str,
    current: Mapping[str, str],
    reset: Mapping[str, str],
) -> str:
    """``value`` checked by ``parameter``'s own reading, else its kind's check."""
    if parameter.read is not None:
        return parameter.read(value, current, reset)
    if parameter.kind == "string":
        check_value_length(name, value)  # 54000 past MAX_VALUE_LENGTH characters
        return value  # lc_*, search_path: free text, as dpproxy does not read them
    if parameter.kind == "bool":
        flag = parse_bool(value)
        if flag is None:
            raise _not_boolean(name, parameter, value)
        return on_off(flag)
    if parameter.kind == "enum":
        shown = parameter.choices.get(value.lower())
        if shown is None:
            listed = ", ".join(parameter.visible)
            raise invalid_value(spelling(name), value, f"Available values: {listed}.")
        return shown
    if parameter.kind == "integer":
        lowest, highest = int(parameter.lowest), int(parameter.highest)
        return integer_setting(name, value, lowest, highest, parameter.unit, plain=parameter.plain)
    return real_setting(name, value, parameter.lowest, parameter.highest, parameter.unit)


def _not_boolean(name: str, parameter: Parameter, value: str) -> QueryError:
    if parameter.source == "pg_settings":  # in PostgreSQL's words
        return QueryError(
            INVALID_PARAMETER_VALUE,
            f'parameter "{name}" requires a Boolean value',
            hint=f"use SET {name} = on or off",
        )
    return invalid_value(spelling(name), value, "use on or off")


# --- Parameters kept at one value ------------------------------------------------------


def _kept_value(
    name: str,
    parameter: Parameter,
    value: str,
    current: Mapping[str, str],
    reset: Mapping[str, str],
) -> str:
    """What SHOW gives after SET ``name`` = ``value`` for a refused parameter: its one
    value; QueryError 22023 for a value PostgreSQL refuses, else 0A000 (refusal)."""
    if parameter.kind == "string":
        shown = parameter.choices.get(value.lower())
        if shown is not None:
            return shown
        refused = refusal(name, value)
    else:
        checked = _checked(name, parameter, value, current, reset)
        if checked == parameter.default:
            return checked
        refused = refusal(name, checked)
    if refused is None:  # not reached: every refused parameter has its reason
        raise QueryError(FEATURE_NOT_SUPPORTED, f'dpproxy does not support parameter "{name}"')
    raise refused


def refusal(name: str, value: str | None = None) -> QueryError | None:
    """The refusal (0A000) of SET ``name`` = ``value`` (as PostgreSQL would show it) for a
    parameter dpproxy keeps at one value, whose one value SET may give is another; None
    for other names."""
    parameter = PARAMETERS.get(name)
    if parameter is None or parameter.refused is None:
        return None
    only = _only_value(parameter)
    written = "" if value is None else f" = {_sql_value(value)}"
    leave = (
        f"leave {name} out of the statement and the connection settings "
        "(options, PGOPTIONS, server_settings)"
    )
    if only is None:
        return QueryError(
            FEATURE_NOT_SUPPORTED,
            f'dpproxy does not support parameter "{name}"{written}: {parameter.refused}',
            hint=leave,
        )
    other = "" if value is None else f", not {_sql_value(value)}"
    return QueryError(
        FEATURE_NOT_SUPPORTED,
        f"dpproxy supports only {name} = {only}{other}: {parameter.refused}",
        hint=f"SET {name} = {only}, or {leave}",
    )


def _only_value(parameter: Parameter) -> str | None:
    """The value SET may give a refused parameter, as written in SQL; None if none."""
    if parameter.kind != "string":
        return parameter.default
    return None if not parameter.choices else _sql_value(next(iter(parameter.choices)))


def _sql_value(value: str) -> str:
    """A value as SET takes it: a word or number as is, anything else quoted."""
    if re.fullmatch(r"[a-z_][a-z0-9_]*|[0-9]+", value):
        return value
    return "'" + value.replace("'", "''") + "'"
