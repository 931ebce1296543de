"""The configuration file (TOML), validated by pydantic.

Table policies come from ``rewriter.policy``; everything else is defined here. Relative
paths are resolved against the directory of the configuration file.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import re
import socket
import tomllib
import types
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, Self, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from accountant import AnalystBudget, Epsilon, InvalidAmount, Mechanism, Period, PostgresState
from accountant.analysts import name_problem
from accountant.budget import budget_delta, budget_epsilon
from accountant.postgres_state import DEFAULT_SCHEMA as DEFAULT_STATE_SCHEMA
from accountant.postgres_state import check_dsn, check_schema_name
from proxy.protocol.scram import InvalidVerifier, parse_verifier
from proxy.settings_errors import describe, shown_value
from rewriter.policy import TablePolicy

DEFAULT_CONFIG = Path("dpproxy.toml")
CONFIG_ENV = "DPPROXY_CONFIG"


class ConfigError(Exception):
    """The configuration cannot be used; the message names the file, key and fix."""


class ServerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    host: str = Field(default="127.0.0.1", description="Address to listen on.")
    port: int = Field(default=6432, ge=0, le=65535, description="TCP port to listen on.")
    max_message_bytes: int = Field(
        default=1 << 20, ge=1024, description="Largest protocol message accepted from a client."
    )
    tls_cert: Path | None = Field(
        default=None, description="PEM certificate (chain) offered to clients that ask for TLS."
    )
    tls_key: Path | None = Field(default=None, description="PEM private key of tls_cert.")
    require_tls: bool = Field(
        default=False, description="Refuse clients that do not encrypt (needs tls_cert)."
    )

    @field_validator("host")
    @classmethod
    def _check_host(cls, value: str) -> str:
        problem = host_syntax_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _check_tls(self) -> Self:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key go together: set both, or neither")
        if self.require_tls and self.tls_cert is None:
            raise ValueError("require_tls = true needs tls_cert and tls_key")
        return self

    def resolve_paths(self, base: Path) -> ServerSettings:
        update = {
            name: base / path
            for name, path in (("tls_cert", self.tls_cert), ("tls_key", self.tls_key))
            if path is not None and not path.is_absolute()
        }
        return self.model_copy(update=update) if update else self


_HOST_ADVICE = "give an address such as 127.0.0.1, or 0.0.0.0 for every interface"


def host_syntax_problem(host: str) -> str | None:
    """Why ``host`` can be neither an address nor a host name (without looking it up), or
    None. Names go to the resolver IDNA-encoded, which refuses e.g. a part over 63 characters."""
    if any(unicodedata.category(c) == "Cc" for c in host):
        return f"contains a control character; {_HOST_ADVICE}, or a host name"
    try:
        host.encode("idna")
    except UnicodeError as error:
        found = re.search(r"UnicodeError: (.*)\)$", str(error))
        reason = found.group(1) if found else str(error)
        return (
            f"{host[:80]} is not a valid host name ({reason}; each dot-separated part is 1 to "
            f"63 characters); {_HOST_ADVICE}"
        )
    return None


def host_problem(host: str) -> str | None:
    """Why the server could not listen on ``host`` (it is neither an address nor a name
    this machine resolves), or None. Looks the name up, so it needs the machine's resolver."""
    syntax = host_syntax_problem(host)
    if syntax is not None:
        return syntax
    try:
        socket.getaddrinfo(host or None, 0, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as error:
        reason = error.strerror or str(error)
    except ValueError as error:  # a NUL character, or a name IDNA cannot encode
        reason = str(error)
    else:
        return None
    return (
        f"{host} is not an address, nor a name this machine can resolve ({reason}); {_HOST_ADVICE}"
    )


class BackendSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    engine: Literal["duckdb", "postgres"] = Field(
        default="duckdb", description="Which database holds the data."
    )
    path: Path | None = Field(default=None, description="DuckDB database file (engine duckdb).")
    dsn: str | None = Field(default=None, description="PostgreSQL connection string.")
    schema_name: str | None = Field(
        default=None,
        alias="schema",
        description="Schema holding the tables (default: main for DuckDB, public for PostgreSQL).",
    )
    pool_size: int = Field(default=4, ge=1, le=64, description="PostgreSQL connections.")
    statement_timeout_seconds: float = Field(
        default=60.0, gt=0, description="Longest a query may run in the database."
    )
    max_public_rows: int = Field(
        default=10_000,
        ge=0,
        description=(
            "The most rows a public table may hold for queries to read it: the time a query"
            " takes to read a large lookup table can tell whether one person's row met a"
            " condition (docs/privacy.md)."
        ),
    )
    answer_cache_seconds: float = Field(
        default=3600.0,
        ge=0,
        description=(
            "How long the same query of the same analyst returns the same noisy answer at no"
            " cost (DuckDB: also until the file changes). 0 turns the answer cache off."
        ),
    )

    @model_validator(mode="after")
    def _check_engine(self) -> Self:
        if self.engine == "duckdb" and self.path is None:
            raise ValueError('engine "duckdb" needs path = "<database file>"')
        if self.engine == "postgres" and not self.dsn:
            raise ValueError('engine "postgres" needs dsn = "postgresql://user@host/db"')
        return self

    @property
    def schema_or_default(self) -> str:
        if self.schema_name:
            return self.schema_name
        return "main" if self.engine == "duckdb" else "public"


class StateSettings(BaseModel):
    """Where the state store lives: a SQLite file (``path``), or a PostgreSQL schema
    (``dsn`` and ``schema``) that several dpproxy servers share."""

    model_config = ConfigDict(extra="forbid")

    path: Path = Field(
        default=Path("dpproxy-state.sqlite"),
        description="SQLite file holding budgets spent and the audit log (when dsn is not set).",
    )
    dsn: str | None = Field(
        default=None,
        description=(
            "PostgreSQL URL (postgresql://user@host:5432/db) of a state store shared by"
            " several dpproxy servers; replaces path."
        ),
    )
    schema_name: str = Field(
        default=DEFAULT_STATE_SCHEMA,
        alias="schema",
        description="Schema holding the state tables in that database (created on first use).",
    )
    lock_timeout_seconds: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description=(
            "How long a query (or admin command) waits for the state store while another"
            " process holds it, before it is refused with nothing charged."
        ),
    )

    @field_validator("dsn")
    @classmethod
    def _check_dsn(cls, value: str | None) -> str | None:
        if value is not None:
            check_dsn(value)
        return value

    @field_validator("schema_name")
    @classmethod
    def _check_schema(cls, value: str) -> str:
        check_schema_name(value)
        return value

    @model_validator(mode="after")
    def _check_choice(self) -> Self:
        if self.dsn is not None and "path" in self.model_fields_set:
            raise ValueError(
                "set either path (a SQLite file) or dsn (a PostgreSQL server), not both"
            )
        if self.dsn is None and "schema_name" in self.model_fields_set:
            raise ValueError("schema applies only to a PostgreSQL state store: set dsn too")
        return self

    @property
    def location(self) -> Path | PostgresState:
        """What ``StateStore.open`` takes: the file, or the PostgreSQL schema."""
        if self.dsn is not None:
            return PostgresState(self.dsn, self.schema_name)
        return self.path

    def describe(self) -> str:
        """For messages: the file, or the server and schema (never a password)."""
        return str(self.location)


class AnalystSettings(BaseModel):
    """One analyst: credentials and privacy budget.

    Only a seed: the state store is the source of truth for analysts (see proxy.admin.seed).
    An analyst the store has never known is added from here; afterwards the stored one wins.
    """

    model_config = ConfigDict(extra="forbid")

    password: str = Field(
        description=(
            "SCRAM-SHA-256 verifier of the password, as made by `dpproxy passwd` "
            "(never the password itself)."
        )
    )
    epsilon_total: float = Field(gt=0, description="Total ε the analyst may spend.")
    epsilon_default: float = Field(
        default=1.0, gt=0, description="ε of a query when the session has not SET dpproxy.epsilon."
    )
    epsilon_per_query_max: float | None = Field(
        default=None, gt=0, description="Largest ε one query may spend (default: no cap)."
    )
    delta: float = Field(
        default=1e-6,
        ge=0,
        le=1e-3,
        description=(
            "δ of the analyst's (ε, δ) budget: Gaussian (zCDP) answers are converted to ε at"
            " this δ. 0 allows only Laplace (pure ε) answers."
        ),
    )
    mechanism: Literal["laplace", "gaussian"] = Field(
        default="laplace",
        description="Noise of a query when the session has not SET dpproxy.mechanism.",
    )
    period: Literal["never", "daily", "weekly", "monthly"] = Field(
        default="never",
        description=(
            "How often the analyst's spending starts again from zero (00:00 UTC; weeks on"
            " Monday, months on the 1st). epsilon_total is then per period."
        ),
    )

    @field_validator("password")
    @classmethod
    def _check_password(cls, value: str) -> str:
        try:
            parse_verifier(value)
        except InvalidVerifier as error:
            if value.upper().startswith("SCRAM-"):
                raise ValueError(
                    f"this SCRAM-SHA-256 verifier is damaged or incomplete "
                    f"({_verifier_damage(value, error)}): a whole "
                    "one is SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>, on one "
                    "line; copy all of what `dpproxy passwd` printed, or run it again"
                ) from None
            raise ValueError(
                "must be a SCRAM-SHA-256 verifier (run `dpproxy passwd` to make one), "
                "never a plain-text password"
            ) from None
        return value

    @model_validator(mode="after")
    def _check(self) -> Self:
        self.budget()  # validates the amounts and their order
        return self

    def budget(self) -> AnalystBudget:
        amounts: dict[str, Epsilon | None] = {}
        for name in ("epsilon_total", "epsilon_default", "epsilon_per_query_max"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number")
            try:
                amounts[name] = None if value is None else budget_epsilon(str(value))
            except InvalidAmount as error:
                raise ValueError(f"{name} = {error}") from None
        try:
            delta = budget_delta(str(self.delta))
        except InvalidAmount as error:
            raise ValueError(f"delta: {error}") from None
        total, default = amounts["epsilon_total"], amounts["epsilon_default"]
        if total is None or default is None:
            raise ValueError("epsilon_total and epsilon_default are required")
        try:
            return AnalystBudget(
                total=total,
                default_per_query=default,
                per_query_cap=amounts["epsilon_per_query_max"],
                delta=delta,
                mechanism=Mechanism(self.mechanism),
                period=Period(self.period),
            )
        except ValidationError as error:
            problem = error.errors()[0]["msg"].removeprefix("Value error, ")
            problem = problem.replace("per_query_cap", "epsilon_per_query_max")
            problem = problem.replace("default_per_query", "epsilon_default")
            raise ValueError(problem.replace("total", "epsilon_total")) from None


def _verifier_damage(value: str, error: InvalidVerifier) -> str:
    """What is missing from a verifier cut short, or else what parse_verifier found."""
    parts = value.split("$")
    if len(parts) != 3:
        return f"it has {len(parts)} of its 3 parts separated by $"
    if ":" not in parts[1]:
        return "its <iterations>:<salt> part has no ':'"
    if ":" not in parts[2]:
        return "its :<ServerKey> part is missing"
    if str(error) == "not a SCRAM-SHA-256 verifier":
        return "a number or base64 key in it cannot be read"
    return str(error)


class Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    server: ServerSettings = Field(default_factory=ServerSettings)
    backend: BackendSettings
    state: StateSettings = Field(default_factory=StateSettings)
    analysts: dict[str, AnalystSettings] = Field(default_factory=dict)
    tables: dict[str, TablePolicy] = Field(default_factory=dict)

    @model_validator(mode="wrap")
    @classmethod
    def _check_value_types(
        cls, data: object, handler: ModelWrapValidatorHandler[Settings]
    ) -> Settings:
        """Refuse values of the wrong TOML type, which pydantic would convert (``true`` to 1,
        ``"10"`` to 10.0): each is reported with its key, together with the other problems
        (those that the converted value caused are left out)."""
        problems = value_type_problems(cls, data)
        if not problems:
            return handler(data)
        errors = [
            InitErrorDetails(type=PydanticCustomError("wrong_type", message), loc=loc, input=value)
            for loc, message, value in problems
        ]
        try:
            handler(data)
        except ValidationError as error:
            errors += [
                InitErrorDetails(
                    type=PydanticCustomError(item["type"], item["msg"]),
                    loc=item["loc"],
                    input=item["input"],
                )
                for item in error.errors()
                if not any(_caused_by(item["loc"], loc) for loc, _, _ in problems)
            ]
        raise ValidationError.from_exception_data(cls.__name__, errors)

    @field_validator("analysts")
    @classmethod
    def _check_names(cls, value: dict[str, AnalystSettings]) -> dict[str, AnalystSettings]:
        for name in value:
            problem = name_problem(name)
            if problem is not None:
                raise ValueError(problem)
        return value

    @field_validator("tables")
    @classmethod
    def _check_unit_paths(cls, value: dict[str, TablePolicy]) -> dict[str, TablePolicy]:
        problems = unit_path_problems(value)
        if problems:
            raise ValidationError.from_exception_data(
                "tables",
                [
                    InitErrorDetails(
                        type=PydanticCustomError("privacy_unit_path", problem),
                        loc=(name, "privacy_unit"),
                        input=value[name].privacy_unit,
                    )
                    for name, problem in problems.items()
                ],
            )
        return value

    def resolve_paths(self, base: Path) -> Settings:
        backend = self.backend
        if backend.path is not None and not backend.path.is_absolute():
            backend = backend.model_copy(update={"path": base / backend.path})
        state = self.state
        if not state.path.is_absolute():
            state = state.model_copy(update={"path": base / state.path})
        server = self.server.resolve_paths(base)
        return self.model_copy(update={"server": server, "backend": backend, "state": state})


def unit_path_problems(tables: Mapping[str, TablePolicy]) -> dict[str, str]:
    """What is wrong with the tables' privacy units that the configuration alone shows
    (table name -> the problem): a blank unit, and a foreign-key path to a table without a
    section, to a public table, or round a cycle. ``dpproxy config check`` and ``dpproxy
    serve`` both load the file through this; what only the database can tell (the columns,
    their types and keys) is checked when the server starts (rewriter.catalog)."""
    by_key = {name.lower(): name for name in tables}
    problems: dict[str, str] = {}
    for name, policy in tables.items():
        unit = policy.privacy_unit
        if policy.public or unit is None:
            continue
        if not unit.strip():
            problems[name] = (
                "is blank: name the column identifying the person, or a foreign-key path "
                '("<column> -> <table>.<column>")'
            )
            continue
        link = policy.unit_link
        if link is None:
            if _ARROW_LIKE.search(unit):
                problems[name] = (
                    f'"{unit}" is neither a column name nor a foreign-key path of the form '
                    '"<column> -> <table>.<column>" (written with ->; the spaces around it '
                    "are optional): write the column identifying the person, or such a path"
                )
            continue
        target = by_key.get(link[1].lower())
        if target is None:
            problems[name] = (
                f'"{unit}": no table "{link[1]}" has a [tables.{link[1]}] section; the path must '
                "reach a protected table of this file: add its section, or fix the name"
            )
        elif tables[target].public:
            problems[name] = (
                f'"{unit}": "{link[1]}" is public; the path must reach a protected table'
            )
    for name in tables:
        if name in problems:
            continue
        path = [name]
        link = tables[name].unit_link
        while link is not None:
            step = by_key.get(link[1].lower())
            if step is None or step in problems:
                break  # reported at that table
            if step in path:
                route = " -> ".join([*path, step])
                problems[name] = (
                    f'"{tables[name].privacy_unit}": the foreign-key paths form a cycle '
                    f"({route}) and never reach a table whose privacy_unit is a column"
                )
                break
            path.append(step)
            link = None if tables[step].public else tables[step].unit_link
    return problems


#: What a privacy_unit that is not a path ("->") holds when it was meant as a path written
#: otherwise ("purchase_id => purchases", "a → b.c"); no column name is expected to.
_ARROW_LIKE = re.compile(r"[<>=→⇒⟶]")

#: A field's location in the configuration: section, name, key, ...
_Location = tuple[str | int, ...]


def value_type_problems(
    model: type[BaseModel], data: object, where: _Location = ()
) -> list[tuple[_Location, str, object]]:
    """The values in ``data`` (a TOML table for ``model``, nested models included) whose
    TOML type does not fit their field: (location, message, value). A boolean is never a
    number, a number is written without quotes, numbers are finite, and a whole number
    has no decimal point. Strings are accepted where a field is also a date (the bounds
    of a date or timestamp column), unless they hold a number."""
    if not isinstance(data, Mapping):
        return []  # pydantic reports it
    problems: list[tuple[_Location, str, object]] = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        if key not in data:
            continue
        value, loc = data[key], (*where, key)
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            problems += value_type_problems(annotation, value, loc)
        elif get_origin(annotation) is dict:
            inner = get_args(annotation)[1]
            if (
                isinstance(inner, type)
                and issubclass(inner, BaseModel)
                and isinstance(value, Mapping)
            ):
                for entry, item in value.items():
                    problems += value_type_problems(inner, item, (*loc, entry))
        else:
            problem = _value_type_problem(_scalar_types(annotation), value)
            if problem is not None:
                problems.append((loc, problem, value))
    return problems


def _scalar_types(annotation: object) -> frozenset[type]:
    """The classes a field's annotation admits, None left out; none for a list or a table."""
    origin = get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        return frozenset().union(*(_scalar_types(arg) for arg in get_args(annotation)))
    if origin is Literal:
        return frozenset({str})
    if origin is None and isinstance(annotation, type) and annotation is not type(None):
        return frozenset({annotation})
    return frozenset()


def _value_type_problem(kinds: frozenset[type], value: object) -> str | None:
    if bool in kinds:
        if isinstance(value, bool):
            return None
        return f"expected true or false (a TOML boolean, without quotes), got {shown_value(value)}"
    if float in kinds:
        dates = dt.date in kinds
        expected = (
            "expected a number (without quotes), or for a date or timestamp column a date "
            "(2020-01-01) or date-time (2020-01-01T08:30:00)"
            if dates
            else "expected a number (without quotes)"
        )
        if isinstance(value, float) and not math.isfinite(value):
            return f"expected a finite number, got {value!r} (nan and inf are not allowed)"
        if isinstance(value, int | float) and not isinstance(value, bool):
            return None
        if dates and isinstance(value, dt.date):
            return None
        if dates and isinstance(value, str) and not _holds_number(value):
            return None  # an ISO date or date-time, read (or refused) by the column's policy
        return f"{expected}, got {shown_value(value)}{_fix(value)}"
    if int in kinds:
        if isinstance(value, int) and not isinstance(value, bool):
            return None
        return f"expected a whole number (without quotes), got {shown_value(value)}{_fix(value)}"
    return None


def _holds_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _fix(value: object) -> str:
    if isinstance(value, bool):
        return "; true and false are not numbers"
    if isinstance(value, str) and _holds_number(value):
        return "; write the number without quotes"
    return ""


def _caused_by(loc: _Location, problem: _Location) -> bool:
    """Whether pydantic's error at ``loc`` is about the value refused at ``problem`` (or
    about the table holding it, which pydantic checked with the converted value)."""
    return loc[: len(problem)] == problem or loc == problem[:-1]


def config_path(explicit: str | None) -> Path:
    """--config, else $DPPROXY_CONFIG, else ./dpproxy.toml."""
    if explicit:
        return Path(explicit)
    from_env = os.environ.get(CONFIG_ENV)
    return Path(from_env) if from_env else DEFAULT_CONFIG


def load_settings(path: Path) -> Settings:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: no such configuration file; pass --config FILE, set {CONFIG_ENV}, "
            "or run `dpproxy demo` to create one"
        ) from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{path}: not a UTF-8 text file (byte {error.start + 1} cannot be read as UTF-8); "
            "a configuration is TOML text: save it as UTF-8, or pass --config with the right file"
        ) from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: not valid TOML: {error}") from None
    try:
        settings = Settings.model_validate(raw)
    except ValidationError as error:
        raise ConfigError(f"{path}: invalid configuration:\n{describe(error, Settings)}") from None
    return settings.resolve_paths(path.resolve().parent)
