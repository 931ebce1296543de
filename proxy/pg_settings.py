"""PostgreSQL's own planner, resource and client parameters, and custom ``a.b`` ones.

Clients and BI tools send PostgreSQL parameters that tune how a server runs a query but
not what it answers (asyncpg's ``server_settings={"jit": "off"}``, ``SET work_mem =
'64MB'``, ``SET enable_seqscan = off``, pg_dump's ``SET row_security = off``). dpproxy
runs its own engine settings, so it checks each such value as PostgreSQL 15 would
(``checked_setting``: booleans, integers with units and ranges, reals, enums), keeps it
in the session so that SHOW, RESET, SET LOCAL, savepoints and ``current_setting()``
behave as in PostgreSQL, and otherwise ignores it. Custom parameters with a dot in the
name (``SET myapp.tenant = 'acme'``, ``-c foo.bar=1``) are kept as strings, as
PostgreSQL keeps placeholders; ``dpproxy.*`` names are dpproxy's own and never
placeholders.

``SETTINGS`` was generated once from PostgreSQL 15.20's ``pg_settings`` (the server of
the tests) with ``SELECT name, vartype, unit, min_val, max_val, enumvals, boot_val FROM
pg_settings WHERE context = 'user'``, keeping the parameters below; each default is
what SHOW gave after ``set_config(name, boot_val, false)``, each enum's hidden
spellings (``constraint_exclusion = yes``) what SET accepted among true/false/yes/no/
1/0/on/off, and 1.79769e+308 is DBL_MAX. Only user-settable (context ``user``)
parameters: dpproxy's analysts are not superusers. The ``tcp_*`` defaults are those
of a Unix-socket connection (0); over TCP PostgreSQL shows the socket's values.

Parameters of context ``user`` that dpproxy does not honour are kept at one value
(``FIXED``): SHOW shows it (PostgreSQL's default), RESET goes back to it, and SET to it
is accepted (pg_dump's ``SET xmloption = content`` and ``SET default_tablespace = ''``),
as each is what dpproxy does anyway; SET to any other value PostgreSQL takes is refused
(0A000) with the reason in ``REFUSED``:

- ``array_nulls`` (on), ``backslash_quote`` (safe_encoding: the client encoding is
  always UTF8), ``default_text_search_config`` (pg_catalog.simple: dpproxy has no text
  search), ``gin_fuzzy_search_limit`` (0), ``quote_all_identifiers`` (off),
  ``transform_null_equals`` (off), ``xmlbinary`` (base64), ``xmloption`` (content):
  other values change what queries answer, or which SQL is read, and dpproxy's engine
  works one way only; ``timezone_abbreviations`` is shown as Default but never set (the
  engine reads abbreviations its own way);
- ``exit_on_error`` (off), ``restrict_nonsystem_relation_kind`` (empty): behaviour the
  client asks for (ending the session at an error, refusing views) that dpproxy would not
  give;
- ``default_tablespace``, ``temp_tablespaces``, ``local_preload_libraries`` (empty): they
  name server objects (tablespaces, libraries) that dpproxy does not have;
- ``default_transaction_deferrable`` (off): dpproxy's transactions are never deferrable
  (``transaction_deferrable`` shows off);
- ``debug_pretty_print`` (on), ``debug_print_parse``, ``debug_print_plan``,
  ``debug_print_rewritten``, ``trace_notify``, ``trace_sort`` (off): server diagnostics
  dpproxy has none of to print.

A session keeps at most ``MAX_CUSTOM_PARAMETERS`` custom parameters, and a custom or
other free-text value (search_path, lc_*) of at most ``MAX_VALUE_LENGTH`` characters
(54000 beyond): each is kept in the session and in its transaction's snapshots.

The others of context ``user`` (DateStyle, IntervalStyle, TimeZone,
application_name, bytea_output, client_encoding, client_min_messages,
default_table_access_method, default_transaction_isolation,
default_transaction_read_only, extra_float_digits,
idle_in_transaction_session_timeout, lc_monetary, lc_numeric, lc_time, lock_timeout,
search_path, standard_conforming_strings, statement_timeout, transaction_deferrable,
transaction_isolation, transaction_read_only) have their own handling in
proxy.session and proxy.set_values. Parameters of other contexts (superuser, sighup,
postmaster...) stay unrecognized (42704), as do ``role`` and ``session_authorization``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Literal, NamedTuple

from proxy.pg_values import (
    DBL_MAX,
    NotANumber,
    integer_setting,
    invalid_value,
    on_off,
    parse_bool,
    read_integer,
    real_setting,
    shown_number,
    strtod,
    to_base_unit,
)
from proxy.seam import QueryError
from proxy.sqlstate import FEATURE_NOT_SUPPORTED, INVALID_PARAMETER_VALUE, PROGRAM_LIMIT_EXCEEDED

INVALID_NAME = "42602"
Kind = Literal["bool", "integer", "real", "enum", "string"]

# --- The parameters ----------------------------------------------------------------------


class Setting(NamedTuple):
    kind: Kind
    default: str  # as SHOW shows it
    lowest: float = 0
    highest: float = 0
    unit: str | None = None  # of the number: B, kB, 8kB (blocks), ms or s
    choices: Mapping[str, str] = {}  # enum: each spelling (lower case) -> the value shown
    visible: tuple[str, ...] = ()  # enum: the values PostgreSQL lists


def _bool(default: str) -> Setting:
    return Setting("bool", default)


def _int(default: str, lowest: int, highest: int, unit: str | None = None) -> Setting:
    return Setting("integer", default, lowest, highest, unit)


def _real(default: str, lowest: float, highest: float, unit: str | None = None) -> Setting:
    return Setting("real", default, lowest, highest, unit)


_ON_OFF = {"true": "on", "false": "off", "yes": "on", "no": "off", "1": "on", "0": "off"}


def _enum(default: str, values: tuple[str, ...], hidden: Mapping[str, str] = {}) -> Setting:
    return Setting("enum", default, choices={**{v: v for v in values}, **hidden}, visible=values)


SETTINGS: dict[str, Setting] = {
    "backend_flush_after": _int("0", 0, 256, "8kB"),
    "check_function_bodies": _bool("on"),
    "client_connection_check_interval": _int("0", 0, 2147483647, "ms"),
    "commit_siblings": _int("5", 0, 1000),
    "constraint_exclusion": _enum("partition", ("partition", "on", "off"), _ON_OFF),
    "cpu_index_tuple_cost": _real("0.005", 0.0, DBL_MAX),
    "cpu_operator_cost": _real("0.0025", 0.0, DBL_MAX),
    "cpu_tuple_cost": _real("0.01", 0.0, DBL_MAX),
    "cursor_tuple_fraction": _real("0.1", 0.0, 1.0),
    "default_statistics_target": _int("100", 1, 10000),
    "default_toast_compression": _enum("pglz", ("pglz", "lz4")),
    "effective_cache_size": _int("4GB", 1, 2147483647, "8kB"),
    "effective_io_concurrency": _int("1", 0, 1000),
    "enable_async_append": _bool("on"),
    "enable_bitmapscan": _bool("on"),
    "enable_gathermerge": _bool("on"),
    "enable_hashagg": _bool("on"),
    "enable_hashjoin": _bool("on"),
    "enable_incremental_sort": _bool("on"),
    "enable_indexonlyscan": _bool("on"),
    "enable_indexscan": _bool("on"),
    "enable_material": _bool("on"),
    "enable_memoize": _bool("on"),
    "enable_mergejoin": _bool("on"),
    "enable_nestloop": _bool("on"),
    "enable_parallel_append": _bool("on"),
    "enable_parallel_hash": _bool("on"),
    "enable_partition_pruning": _bool("on"),
    "enable_partitionwise_aggregate": _bool("off"),
    "enable_partitionwise_join": _bool("off"),
    "enable_seqscan": _bool("on"),
    "enable_sort": _bool("on"),
    "enable_tidscan": _bool("on"),
    # Warns of backslashes in '...' only if standard_conforming_strings is off, which
    # dpproxy refuses: it has no effect, in PostgreSQL either.
    "escape_string_warning": _bool("on"),
    "force_parallel_mode": _enum("off", ("off", "on", "regress"), _ON_OFF),
    "from_collapse_limit": _int("8", 1, 2147483647),
    "geqo": _bool("on"),
    "geqo_effort": _int("5", 1, 10),
    "geqo_generations": _int("0", 0, 2147483647),
    "geqo_pool_size": _int("0", 0, 2147483647),
    "geqo_seed": _real("0", 0.0, 1.0),
    "geqo_selection_bias": _real("2", 1.5, 2.0),
    "geqo_threshold": _int("12", 2, 2147483647),
    "gin_pending_list_limit": _int("4MB", 64, 2147483647, "kB"),
    "hash_mem_multiplier": _real("2", 1.0, 1000.0),
    "idle_session_timeout": _int("0", 0, 2147483647, "ms"),
    "jit": _bool("on"),
    "jit_above_cost": _real("100000", -1.0, DBL_MAX),
    "jit_expressions": _bool("on"),
    "jit_inline_above_cost": _real("500000", -1.0, DBL_MAX),
    "jit_optimize_above_cost": _real("500000", -1.0, DBL_MAX),
    "jit_tuple_deforming": _bool("on"),
    "join_collapse_limit": _int("8", 1, 2147483647),
    "log_parameter_max_length_on_error": _int("0", -1, 1073741823, "B"),
    "logical_decoding_work_mem": _int("64MB", 64, 2147483647, "kB"),
    "maintenance_io_concurrency": _int("10", 0, 1000),
    "maintenance_work_mem": _int("64MB", 1024, 2147483647, "kB"),
    "max_parallel_maintenance_workers": _int("2", 0, 1024),
    "max_parallel_workers": _int("8", 0, 1024),
    "max_parallel_workers_per_gather": _int("2", 0, 1024),
    "min_parallel_index_scan_size": _int("512kB", 0, 715827882, "8kB"),
    "min_parallel_table_scan_size": _int("8MB", 0, 715827882, "8kB"),
    "parallel_leader_participation": _bool("on"),
    "parallel_setup_cost": _real("1000", 0.0, DBL_MAX),
    "parallel_tuple_cost": _real("0.1", 0.0, DBL_MAX),
    "password_encryption": _enum("scram-sha-256", ("md5", "scram-sha-256")),
    "plan_cache_mode": _enum("auto", ("auto", "force_generic_plan", "force_custom_plan")),
    "random_page_cost": _real("4", 0.0, DBL_MAX),
    "recursive_worktable_factor": _real("10", 0.001, 1000000.0),
    # Off makes PostgreSQL refuse queries that a row security policy would filter;
    # dpproxy has no such policies, so it changes nothing, as in PostgreSQL without any.
    "row_security": _bool("on"),
    "seq_page_cost": _real("1", 0.0, DBL_MAX),
    "stats_fetch_consistency": _enum("cache", ("none", "cache", "snapshot")),
    "synchronize_seqscans": _bool("on"),
    "synchronous_commit": _enum(
        "on", ("local", "remote_write", "remote_apply", "on", "off"), _ON_OFF
    ),
    "tcp_keepalives_count": _int("0", 0, 2147483647),
    "tcp_keepalives_idle": _int("0", 0, 2147483647, "s"),
    "tcp_keepalives_interval": _int("0", 0, 2147483647, "s"),
    "tcp_user_timeout": _int("0", 0, 2147483647, "ms"),
    "temp_buffers": _int("8MB", 100, 1073741823, "8kB"),
    "vacuum_cost_delay": _real("0", 0.0, 100.0, "ms"),
    "vacuum_cost_limit": _int("200", 1, 10000),
    "vacuum_cost_page_dirty": _int("20", 0, 10000),
    "vacuum_cost_page_hit": _int("1", 0, 10000),
    "vacuum_cost_page_miss": _int("2", 0, 10000),
    "vacuum_failsafe_age": _int("1600000000", 0, 2100000000),
    "vacuum_freeze_min_age": _int("50000000", 0, 1000000000),
    "vacuum_freeze_table_age": _int("150000000", 0, 2000000000),
    "vacuum_multixact_failsafe_age": _int("1600000000", 0, 2100000000),
    "vacuum_multixact_freeze_min_age": _int("5000000", 0, 1000000000),
    "vacuum_multixact_freeze_table_age": _int("150000000", 0, 2000000000),
    "wal_sender_timeout": _int("1min", 0, 2147483647, "ms"),
    "wal_skip_threshold": _int("2MB", 0, 2147483647, "kB"),
    "work_mem": _int("4MB", 64, 2147483647, "kB"),
}
#: SHOW gives these as bare numbers (PostgreSQL shows the socket's value, without units).
_PLAIN = frozenset(
    {"tcp_keepalives_count", "tcp_keepalives_idle", "tcp_keepalives_interval", "tcp_user_timeout"}
)
#: What SHOW gives for each of SETTINGS when the session has not set it.
DEFAULTS: dict[str, str] = {name: setting.default for name, setting in SETTINGS.items()}

_CHANGES_ANSWERS = "it changes what queries answer, and dpproxy's engine works one way only"
_DIAGNOSTIC = "it prints PostgreSQL's internals to the server log, which dpproxy has none of"
REFUSED: dict[str, str] = {
    "array_nulls": f"{_CHANGES_ANSWERS} (how array input reads NULL)",
    "backslash_quote": "it changes which string literals are read (\\' in E'...' strings)",
    "default_text_search_config": f"{_CHANGES_ANSWERS} (to_tsvector(), to_tsquery())",
    "gin_fuzzy_search_limit": f"{_CHANGES_ANSWERS} (GIN index searches return a subset)",
    "quote_all_identifiers": f"{_CHANGES_ANSWERS} (quote_ident(), format('%I'))",
    "timezone_abbreviations": f"{_CHANGES_ANSWERS} (time zone abbreviations in input)",
    "transform_null_equals": f"{_CHANGES_ANSWERS} (x = NULL would mean x IS NULL)",
    "xmlbinary": f"{_CHANGES_ANSWERS} (how XML output encodes binary values)",
    "xmloption": f"{_CHANGES_ANSWERS} (how strings are read as XML)",
    "exit_on_error": "PostgreSQL would end the session at any error; dpproxy would not",
    "restrict_nonsystem_relation_kind": "dpproxy would not enforce the restriction",
    "default_tablespace": "dpproxy has no tablespaces and creates no tables",
    "temp_tablespaces": "dpproxy has no tablespaces and creates no tables",
    "local_preload_libraries": "dpproxy loads no server libraries",
    "default_transaction_deferrable": "dpproxy's transactions are not deferrable",
    **dict.fromkeys(
        ("debug_pretty_print", "debug_print_parse", "debug_print_plan", "debug_print_rewritten"),
        _DIAGNOSTIC,
    ),
    "trace_notify": _DIAGNOSTIC,
    "trace_sort": _DIAGNOSTIC,
}

#: The one value each of REFUSED is kept at (PostgreSQL's default): what SHOW shows, RESET
#: goes back to, and SET may give (timezone_abbreviations: none, see the module's text).
FIXED: dict[str, Setting] = {
    "array_nulls": _bool("on"),
    "backslash_quote": _enum("safe_encoding", ("safe_encoding", "on", "off"), _ON_OFF),
    "default_text_search_config": Setting("string", "pg_catalog.simple"),
    "gin_fuzzy_search_limit": _int("0", 0, 2147483647),
    "quote_all_identifiers": _bool("off"),
    "timezone_abbreviations": Setting("string", "Default"),
    "transform_null_equals": _bool("off"),
    "xmlbinary": _enum("base64", ("base64", "hex")),
    "xmloption": _enum("content", ("content", "document")),
    "exit_on_error": _bool("off"),
    "restrict_nonsystem_relation_kind": Setting("string", ""),
    "default_tablespace": Setting("string", ""),
    "temp_tablespaces": Setting("string", ""),
    "local_preload_libraries": Setting("string", ""),
    "default_transaction_deferrable": _bool("off"),
    "debug_pretty_print": _bool("on"),
    "debug_print_parse": _bool("off"),
    "debug_print_plan": _bool("off"),
    "debug_print_rewritten": _bool("off"),
    "trace_notify": _bool("off"),
    "trace_sort": _bool("off"),
}
#: What SHOW gives for each of FIXED.
FIXED_DEFAULTS: dict[str, str] = {name: setting.default for name, setting in FIXED.items()}
#: A string parameter of FIXED: what SET may give it (in lower case) -> what SHOW then
#: shows, as PostgreSQL shows it (a list of names quotes each: '' shows as "").
_FIXED_STRINGS: dict[str, dict[str, str]] = {
    "default_text_search_config": dict.fromkeys(
        ("pg_catalog.simple", "simple"), "pg_catalog.simple"
    ),
    "timezone_abbreviations": {},
    "restrict_nonsystem_relation_kind": {"": ""},
    "default_tablespace": {"": ""},
    "temp_tablespaces": {"": '""'},
    "local_preload_libraries": {"": '""'},
}
#: SET of these takes a list (name, name, ...), as in PostgreSQL.
LIST_PARAMETERS = frozenset(
    {"restrict_nonsystem_relation_kind", "temp_tablespaces", "local_preload_libraries"}
)

# --- Limits ------------------------------------------------------------------------------

#: Custom parameters a session may define (SET, RESET or the startup packet), and the
#: longest value of a custom or other free-text parameter (search_path, lc_*): each is
#: kept in the session, in its transaction's snapshots and in what identifies its
#: parameters. A PostgREST-style JSON claim (SET request.jwt.claims = '{...}') fits.
MAX_CUSTOM_PARAMETERS = 100
MAX_VALUE_LENGTH = 8192


def too_many_custom_parameters(name: str) -> QueryError:
    return QueryError(
        PROGRAM_LIMIT_EXCEEDED,
        f'cannot define custom parameter "{name}": this session already has '
        f"{MAX_CUSTOM_PARAMETERS} custom parameters, the most dpproxy keeps",
        hint="reuse the custom parameters already set (SET name = value), or start a new "
        "session (RESET ALL does not remove them, as in PostgreSQL)",
    )


def check_value_length(name: str, value: str) -> None:
    """QueryError 54000 for a free-text value longer than MAX_VALUE_LENGTH characters."""
    if len(value) > MAX_VALUE_LENGTH:
        raise QueryError(
            PROGRAM_LIMIT_EXCEEDED,
            f'the value of parameter "{name}" is {len(value)} characters long; dpproxy '
            f"keeps values of at most {MAX_VALUE_LENGTH} characters",
            hint=f"set {name} to a shorter value",
        )


def parameters_key(parameters: Mapping[str, str]) -> str:
    """What identifies a session's parameters in a cache key: a SHA-256 of their names and
    values (sorted, as JSON), of a fixed size whatever the parameters are."""
    canonical = json.dumps(sorted(parameters.items()), ensure_ascii=True)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


# --- Names -------------------------------------------------------------------------------

# A custom parameter's name: two or more simple identifiers separated by dots.
_IDENTIFIER = r"[A-Za-z_\u0080-\U0010ffff][A-Za-z0-9_$\u0080-\U0010ffff]*"
_CUSTOM_NAME = re.compile(rf"{_IDENTIFIER}(?:\.{_IDENTIFIER})+")


def is_placeholder(name: str) -> bool:
    """A custom parameter (``myapp.tenant``): a dot in its name, not dpproxy's own."""
    return "." in name and not name.startswith("dpproxy.")


def accepts(name: str) -> bool:
    """True for a parameter this module checks: one of SETTINGS or FIXED, or a custom one."""
    return name in SETTINGS or name in FIXED or is_placeholder(name)


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


def refusal(name: str, value: str | None = None) -> QueryError | None:
    """The refusal (0A000) of SET ``name`` = ``value`` (as PostgreSQL would show it) for a
    parameter of FIXED, whose one value SET may give is another; None for other names."""
    reason = REFUSED.get(name)
    if reason is None:
        return None
    only = _only_value(name)
    written = "" if value is None else f" = {_sql_value(value)}"
    leave = (
        f"leave {name} out of the statement and the connection settings "
        "(options, PGOPTIONS, server_settings)"
    )
    if only is None:
        return QueryError(
            FEATURE_NOT_SUPPORTED,
            f'dpproxy does not support parameter "{name}"{written}: {reason}',
            hint=leave,
        )
    other = "" if value is None else f", not {_sql_value(value)}"
    return QueryError(
        FEATURE_NOT_SUPPORTED,
        f"dpproxy supports only {name} = {only}{other}: {reason}",
        hint=f"SET {name} = {only}, or {leave}",
    )


def _only_value(name: str) -> str | None:
    """The value SET may give a parameter of FIXED, as written in SQL; None if none."""
    setting = FIXED[name]
    if setting.kind != "string":
        return setting.default
    accepted = _FIXED_STRINGS[name]
    return None if not accepted else _sql_value(next(iter(accepted)))


def _sql_value(value: str) -> str:
    """A value as SET takes it: a word or number as is, anything else quoted."""
    if re.fullmatch(r"[a-z_][a-z0-9_]*|[0-9]+", value):
        return value
    return "'" + value.replace("'", "''") + "'"


def _fixed_setting(name: str, value: str) -> str:
    """What SHOW gives after SET ``name`` = ``value`` for a parameter of FIXED: its one
    value; QueryError 22023 for a value PostgreSQL refuses, else 0A000 (refusal)."""
    setting = FIXED[name]
    if setting.kind == "string":
        shown = _FIXED_STRINGS[name].get(value.lower())
        if shown is not None:
            return shown
        refused = refusal(name, value)
    else:
        checked = _checked(name, setting, value)
        if checked == setting.default:
            return checked
        refused = refusal(name, checked)
    if refused is None:  # not reached: every parameter of FIXED has its reason
        raise QueryError(FEATURE_NOT_SUPPORTED, f'dpproxy does not support parameter "{name}"')
    raise refused


def checked_setting(name: str, value: str) -> str:
    """What SHOW gives after SET ``name`` = ``value`` (``name`` as accepts() accepts it),
    checked as PostgreSQL 15 checks it: QueryError 22023 for a value it refuses, 42602
    for a malformed custom name, 0A000 for a value of FIXED's other than its one, 54000
    for a custom value longer than MAX_VALUE_LENGTH. A custom parameter keeps its value
    as written."""
    check_name(name)
    if name in FIXED:
        return _fixed_setting(name, value)
    setting = SETTINGS.get(name)
    if setting is None:
        check_value_length(name, value)
        return value
    return _checked(name, setting, value)


def _checked(name: str, setting: Setting, value: str) -> str:
    if setting.kind == "string":
        return value
    if setting.kind == "bool":
        flag = parse_bool(value)
        if flag is None:
            raise QueryError(
                INVALID_PARAMETER_VALUE,
                f'parameter "{name}" requires a Boolean value',
                hint=f"use SET {name} = on or off",
            )
        return on_off(flag)
    if setting.kind == "enum":
        shown = setting.choices.get(value.lower())
        if shown is None:
            raise invalid_value(name, value, f"Available values: {', '.join(setting.visible)}.")
        return shown
    if setting.kind == "integer":
        lowest, highest = int(setting.lowest), int(setting.highest)
        return integer_setting(name, value, lowest, highest, setting.unit, plain=name in _PLAIN)
    return real_setting(name, value, setting.lowest, setting.highest, setting.unit)


# --- pg_settings -------------------------------------------------------------------------

#: The units of the parameters proxy.set_values checks whose values have one.
_OTHER_UNITS = {
    "statement_timeout": "ms",
    "lock_timeout": "ms",
    "idle_in_transaction_session_timeout": "ms",
}


def view_setting(name: str, shown: str) -> tuple[str, str | None]:
    """The ``setting`` and ``unit`` columns of pg_settings for a parameter SHOW gives as
    ``shown``: as PostgreSQL, a number with a unit in the parameter's own unit (work_mem
    '4MB' is setting '4096', unit 'kB'); else the value as SHOW gives it, and no unit."""
    setting = SETTINGS.get(name)
    unit = setting.unit if setting is not None else _OTHER_UNITS.get(name)
    if unit is None:
        return shown, None
    try:
        if setting is not None and setting.kind == "real":
            number, end = strtod(shown)
            return shown_number(to_base_unit(number, shown[end:], unit)), unit
        return str(int(read_integer(shown, unit))), unit
    except NotANumber:
        return shown, unit  # not reached: SHOW's values are read back as they were written
