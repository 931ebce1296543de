"""Every session parameter dpproxy knows, in one table: ``PARAMETERS``.

Each entry says what SHOW gives by default, how SET's value is checked and shown
(proxy.parameter_checks), whether the client is told of a change (ParameterStatus), and
whether it takes a list, is read-only or is kept at one value. The session's defaults,
the parameters it reports and those SET reads as one value are derived from it: a new
parameter is one entry. ``dpproxy.*`` settings are proxy.session's own (their defaults
are the analyst's); custom parameters (``SET myapp.tenant = 'acme'``) are kept as
strings, as PostgreSQL keeps placeholders. Others, of PostgreSQL's other contexts
(superuser, sighup...), ``role`` and ``session_authorization``, are unrecognized (42704).

- PostgreSQL's planner and resource parameters (``SET work_mem = '64MB'``, asyncpg's
  ``server_settings={"jit": "off"}``, pg_dump's ``SET row_security = off``) tune how a
  server runs a query, not what it answers: dpproxy, running its own engine settings,
  checks each value as PostgreSQL 15 does, keeps it for SHOW, RESET, SET LOCAL,
  savepoints and ``current_setting()``, and otherwise ignores it. Generated once from
  PostgreSQL 15.20's ``SELECT name, vartype, unit, min_val, max_val, enumvals, boot_val
  FROM pg_settings WHERE context = 'user'`` (analysts are not superusers): each default
  is what SHOW gave after ``set_config(name, boot_val, false)``, each enum's hidden
  spellings (``constraint_exclusion = yes``) what SET took among true/false/yes/no/1/0/
  on/off; 1.79769e+308 is DBL_MAX; ``tcp_*`` show a Unix socket's 0.
- PostgreSQL's parameters of context ``user`` that dpproxy does not honour (``refused``):
  kept at PostgreSQL's default, which SHOW shows, RESET goes back to and SET may give
  (pg_dump's ``SET xmloption = content``), as dpproxy behaves so; SET to any other value
  PostgreSQL takes is refused (0A000), with the reason.
- The client's parameters, which dpproxy handles itself (source ``dpproxy``: its own
  defaults and checks, e.g. DateStyle ISO only), and read-only ones clients SHOW.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Literal, NamedTuple

from proxy import __version__
from proxy.client_values import clean_application_name, client_encoding, date_style
from proxy.pg_values import DBL_MAX
from proxy.time_zones import time_zone

Kind = Literal["bool", "integer", "real", "enum", "string"]
#: "pg_settings": kind, range, unit, values and default are PostgreSQL 15's, and values
#: are refused in its words; "dpproxy": dpproxy's own (tests compare the first with the
#: server).
Source = Literal["pg_settings", "dpproxy"]
#: dpproxy's own reading of a value: (value, the session's values now, the session's
#: values at its start) -> the value shown; QueryError if refused.
Reader = Callable[[str, Mapping[str, str], Mapping[str, str]], str]


class Parameter(NamedTuple):
    """One parameter: its default, how its value is checked, and how it is kept."""

    kind: Kind  # its values' type, as pg_settings' vartype
    default: str  # what SHOW gives when the session has not set it
    source: Source = "pg_settings"
    lowest: float = 0  # integer and real: the range
    highest: float = 0
    unit: str | None = None  # of the number: B, kB, 8kB (blocks), ms or s
    plain: bool = False  # an integer SHOW gives as a bare number (without its unit)
    #: enum, or a refused string: each spelling SET may give (lower case) -> the value shown
    choices: Mapping[str, str] = {}
    visible: tuple[str, ...] = ()  # enum: the values listed (PostgreSQL's, in its order)
    read: Reader | None = None  # dpproxy's own reading, instead of the kind's check
    refused: str | None = None  # why dpproxy keeps it at its default (0A000 for others)
    #: what the value decides in answers, which dpproxy writes one way only: values other
    #: than the default are refused (0A000)
    writes_one_way: str | None = None
    read_only: bool = False  # SET and RESET are refused (55P02)
    reported: bool = False  # sent to the client (ParameterStatus) when it changes
    shown: str = ""  # PostgreSQL's spelling in messages and ParameterStatus, if not the name
    takes_list: bool = False  # SET takes a list (a, b, ...); else one value


_OWN: Source = "dpproxy"


def _bool(default: str) -> Parameter:
    return Parameter("bool", default)


def _int(
    default: str, lowest: int, highest: int, unit: str | None = None, *, plain: bool = False
) -> Parameter:
    return Parameter("integer", default, "pg_settings", lowest, highest, unit, plain=plain)


def _real(default: str, lowest: float, highest: float, unit: str | None = None) -> Parameter:
    return Parameter("real", default, "pg_settings", lowest, highest, unit)


_ON_OFF = {"true": "on", "false": "off", "yes": "on", "no": "off", "1": "on", "0": "off"}


def _enum(default: str, values: tuple[str, ...], hidden: Mapping[str, str] = {}) -> Parameter:
    return Parameter("enum", default, choices={**{v: v for v in values}, **hidden}, visible=values)


def _string(default: str, choices: Mapping[str, str], *, takes_list: bool = False) -> Parameter:
    return Parameter("string", default, choices=choices, takes_list=takes_list)


def _refused(parameter: Parameter, reason: str) -> Parameter:
    return parameter._replace(refused=reason)


def _answers(what: str) -> str:
    return f"it changes what queries answer, and dpproxy's engine works one way only ({what})"


def _own(
    parameter: Parameter,
    *,
    read: Reader | None = None,
    shown: str = "",
    reported: bool = False,
    writes_one_way: str | None = None,
) -> Parameter:
    """``parameter`` as dpproxy describes it."""
    return parameter._replace(
        source=_OWN, read=read, shown=shown, reported=reported, writes_one_way=writes_one_way
    )


def _alone(read: Callable[[str], str]) -> Reader:
    """A reading of the value alone."""
    return lambda value, _now, _start: read(value)


def _text(default: str, *, takes_list: bool = False) -> Parameter:
    """One of the client's free-text parameters, kept as written."""
    return Parameter("string", default, _OWN, takes_list=takes_list)


def _read_only(kind: Kind, default: str) -> Parameter:
    return Parameter(kind, default, _OWN, read_only=True)


_DIAGNOSTIC = "it prints PostgreSQL's internals to the server log, which dpproxy has none of"
_NO_TABLESPACES = "dpproxy has no tablespaces and creates no tables"
_INT_MAX = 2147483647
_ISOLATION = ("serializable", "repeatable read", "read committed", "read uncommitted")
_LEVELS = ("debug5", "debug4", "debug3", "debug2", "debug1", "log", "notice", "warning", "error")

PARAMETERS: dict[str, Parameter] = {
    # --- PostgreSQL's planner and resource parameters: kept for SHOW, otherwise ignored
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
    "tcp_keepalives_count": _int("0", 0, 2147483647, plain=True),
    "tcp_keepalives_idle": _int("0", 0, 2147483647, "s", plain=True),
    "tcp_keepalives_interval": _int("0", 0, 2147483647, "s", plain=True),
    "tcp_user_timeout": _int("0", 0, 2147483647, "ms", plain=True),
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
    # --- PostgreSQL's parameters that dpproxy keeps at their default ------------------
    # Other values change what queries answer, or which SQL is read:
    "array_nulls": _refused(_bool("on"), _answers("how array input reads NULL")),
    "backslash_quote": _refused(
        _enum("safe_encoding", ("safe_encoding", "on", "off"), _ON_OFF),
        "it changes which string literals are read (\\' in E'...' strings)",
    ),
    "default_text_search_config": _refused(
        _string(
            "pg_catalog.simple", dict.fromkeys(("pg_catalog.simple", "simple"), "pg_catalog.simple")
        ),
        _answers("to_tsvector(), to_tsquery()"),
    ),
    "gin_fuzzy_search_limit": _refused(
        _int("0", 0, _INT_MAX), _answers("GIN index searches return a subset")
    ),
    "quote_all_identifiers": _refused(_bool("off"), _answers("quote_ident(), format('%I')")),
    # Shown, never set (the engine reads abbreviations its own way):
    "timezone_abbreviations": _refused(
        _string("Default", {}), _answers("time zone abbreviations in input")
    ),
    "transform_null_equals": _refused(_bool("off"), _answers("x = NULL would mean x IS NULL")),
    "xmlbinary": _refused(
        _enum("base64", ("base64", "hex")), _answers("how XML output encodes binary values")
    ),
    "xmloption": _refused(
        _enum("content", ("content", "document")), _answers("how strings are read as XML")
    ),
    # Behaviour the client asks for that dpproxy would not give:
    "exit_on_error": _refused(
        _bool("off"), "PostgreSQL would end the session at any error; dpproxy would not"
    ),
    "restrict_nonsystem_relation_kind": _refused(
        _string("", {"": ""}, takes_list=True), "dpproxy would not enforce the restriction"
    ),
    # Server objects that dpproxy does not have (an empty list shows as ""):
    "default_tablespace": _refused(_string("", {"": ""}), _NO_TABLESPACES),
    "temp_tablespaces": _refused(_string("", {"": '""'}, takes_list=True), _NO_TABLESPACES),
    "local_preload_libraries": _refused(
        _string("", {"": '""'}, takes_list=True), "dpproxy loads no server libraries"
    ),
    # transaction_deferrable shows off:
    "default_transaction_deferrable": _refused(
        _bool("off"), "dpproxy's transactions are not deferrable"
    ),
    # Server diagnostics dpproxy has none of to print:
    "debug_pretty_print": _refused(_bool("on"), _DIAGNOSTIC),
    "debug_print_parse": _refused(_bool("off"), _DIAGNOSTIC),
    "debug_print_plan": _refused(_bool("off"), _DIAGNOSTIC),
    "debug_print_rewritten": _refused(_bool("off"), _DIAGNOSTIC),
    "trace_notify": _refused(_bool("off"), _DIAGNOSTIC),
    "trace_sort": _refused(_bool("off"), _DIAGNOSTIC),
    # --- The client's parameters, which dpproxy handles itself ------------------------
    # Reported to the client (ParameterStatus) when they change, in this order:
    "application_name": _own(_text(""), read=_alone(clean_application_name), reported=True),
    "client_encoding": _own(_text("UTF8"), read=_alone(client_encoding), reported=True),
    "datestyle": _own(
        _text("ISO, MDY", takes_list=True), read=date_style, shown="DateStyle", reported=True
    ),
    "default_transaction_read_only": _own(_bool("on"), reported=True),
    "timezone": _own(_text("UTC"), read=_alone(time_zone), shown="TimeZone", reported=True),
    "intervalstyle": _own(
        _enum("postgres", ("postgres", "postgres_verbose", "sql_standard", "iso_8601")),
        shown="IntervalStyle",
        reported=True,
        writes_one_way="the format dpproxy writes intervals in",
    ),
    # Not reported:
    "bytea_output": _own(
        _enum("hex", ("escape", "hex")), writes_one_way="the format dpproxy writes bytea values in"
    ),
    "client_min_messages": _own(_enum("notice", (*_LEVELS, "info"), {"debug": "debug2"})),
    # pg_dump sends SET default_table_access_method = heap; heap is the only one there is
    # (SQLAlchemy's table reflection asks for it).
    "default_table_access_method": _own(_enum("heap", ("heap",))),
    "default_transaction_isolation": _own(_enum("read committed", _ISOLATION)),
    "extra_float_digits": _own(_int("1", -15, 3)),
    "idle_in_transaction_session_timeout": _own(_int("0", 0, _INT_MAX, "ms")),
    # lc_*, search_path, transaction_deferrable: free text, as dpproxy does not read them.
    "lc_messages": _text("C"),
    "lc_monetary": _text("C"),
    "lc_numeric": _text("C"),
    "lc_time": _text("C"),
    "lock_timeout": _own(_int("0", 0, _INT_MAX, "ms")),
    "search_path": _text('"$user", public', takes_list=True),
    "standard_conforming_strings": _own(
        _bool("on"), writes_one_way="write backslash escapes in E'...' strings"
    ),
    "statement_timeout": _own(_int("0", 0, _INT_MAX, "ms")),
    "transaction_deferrable": _text("off"),
    "transaction_isolation": _own(_enum("read committed", _ISOLATION)),
    # Read only (clients ask for them with SHOW):
    "integer_datetimes": _read_only("bool", "on"),
    "server_encoding": _read_only("string", "UTF8"),
    "transaction_read_only": _read_only("bool", "on"),
    "server_version": _read_only("string", f"15.0 (dpproxy {__version__})"),
    "server_version_num": _read_only("integer", "150000"),
    "max_identifier_length": _read_only("integer", "63"),
    "is_superuser": _read_only("bool", "off"),
    "in_hot_standby": _read_only("bool", "off"),
}

# --- Derived from the table ------------------------------------------------------------

#: What SHOW gives for each parameter when the session has not set it.
DEFAULTS: dict[str, str] = {name: parameter.default for name, parameter in PARAMETERS.items()}
#: Sent to the client (ParameterStatus) when they change, under PostgreSQL's names.
REPORTED_PARAMETERS: dict[str, str] = {
    name: parameter.shown or name for name, parameter in PARAMETERS.items() if parameter.reported
}
READ_ONLY_PARAMETERS = frozenset(name for name, p in PARAMETERS.items() if p.read_only)
#: SET of these takes one value (proxy.set_statement.read_set); others take a list.
SINGLE_VALUED = frozenset(name for name, p in PARAMETERS.items() if not p.takes_list)


def spelling(name: str) -> str:
    """The parameter's name as PostgreSQL spells it in messages (DateStyle)."""
    parameter = PARAMETERS.get(name)
    return name if parameter is None or not parameter.shown else parameter.shown


def is_placeholder(name: str) -> bool:
    """A custom parameter (``myapp.tenant``): a dot in its name, not dpproxy's own."""
    return "." in name and not name.startswith("dpproxy.")


def known(name: str) -> bool:
    """True for a parameter SET, SHOW and RESET know: one of PARAMETERS or a custom one."""
    return name in PARAMETERS or is_placeholder(name)
