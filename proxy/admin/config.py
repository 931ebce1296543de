"""`dpproxy config check FILE` and `dpproxy config schema`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from accountant import AnalystBudget, StateStore, StateStoreError, StoredAnalyst
from proxy.admin.people import FLAG_NAMES, default_query_problem
from proxy.admin.seed import differences
from proxy.settings import Settings, config_path, host_problem, load_settings
from proxy.tls import TLSConfigError, server_context

#: Where the generated JSON schema lives in the repository (editors can validate with it).
SCHEMA_FILE = Path("config") / "dpproxy.schema.json"


def schema_text() -> str:
    """The JSON schema of the configuration file, generated from the settings models."""
    schema = Settings.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "dpproxy configuration (dpproxy.toml)"
    return json.dumps(schema, indent=2, ensure_ascii=False, sort_keys=True) + "\n"


def config_schema(args: argparse.Namespace) -> int:
    print(schema_text(), end="")
    return 0


def config_check(args: argparse.Namespace) -> int:
    """Load and validate; errors (exit 2) name the file, the key and the fix."""
    path = Path(args.file) if args.file else config_path(args.config)
    settings = load_settings(path)
    print(f"{path}: valid configuration")
    for line in _summary(settings):
        print(f"  {line}")
    warnings = _warnings(settings)
    for warning in warnings:
        print(f"  warning: {warning}")
    return 0


def _summary(settings: Settings) -> list[str]:
    backend = settings.backend
    where = backend.path if backend.engine == "duckdb" else "(dsn)"
    protected = sorted(n for n, t in settings.tables.items() if not t.public)
    public = sorted(n for n, t in settings.tables.items() if t.public)
    return [
        f"server: {settings.server.host}:{settings.server.port}",
        f"backend: {backend.engine} {where}, schema {backend.schema_or_default}",
        f"state store: {settings.state.describe()}",
        f"analysts seeded from this file: {', '.join(sorted(settings.analysts)) or 'none'}",
        f"protected tables: {', '.join(protected) or 'none'}",
        f"public tables: {', '.join(public) or 'none'}",
    ]


_SERVE_REFUSES = " (`dpproxy serve` refuses to start until this is fixed)"


def _warnings(settings: Settings) -> list[str]:
    notes = []
    server = settings.server
    problem = host_problem(server.host)
    if problem is not None:
        notes.append(f"[server] host {problem}{_SERVE_REFUSES}")
    if server.tls_cert is not None and server.tls_key is not None:
        try:
            server_context(server.tls_cert, server.tls_key)
        except TLSConfigError as error:
            notes.append(f"{error}{_SERVE_REFUSES}")
    backend = settings.backend
    if backend.engine == "duckdb" and backend.path is not None and not backend.path.exists():
        notes.append(f"[backend] path {backend.path} does not exist yet")
    location = settings.state.location
    stored = None
    # The state store is opened and read as the server would (a PostgreSQL schema is
    # created if it is not there yet); a SQLite file not there yet is created at start.
    if isinstance(location, Path) and not location.parent.is_dir():
        notes.append(f"[state] path: directory {location.parent} does not exist")
    elif not isinstance(location, Path) or location.exists():
        key = "[state] path" if isinstance(location, Path) else "[state] dsn"
        timeout = 5 if not isinstance(location, Path) else settings.state.lock_timeout_seconds
        try:
            with StateStore.open_reader(location, timeout=timeout) as store:
                stored = store.analysts(include_removed=True)
        except StateStoreError as error:
            notes.append(f"{key}: {error.describe()}{_SERVE_REFUSES}")
    if stored is not None:
        notes += differences(settings, [a for a in stored if not a.removed])
    if not settings.analysts and not stored:
        notes.append("no analysts: add [analysts.NAME] or run `dpproxy analyst add NAME`")
    notes += _default_query_notes(settings, stored)
    return notes


def _default_query_notes(settings: Settings, stored: list[StoredAnalyst] | None) -> list[str]:
    """Analysts whose query at their default ε can never fit their budget (the stored
    budget wins over the configuration's, as for the server)."""
    budgets: dict[str, tuple[str, AnalystBudget, dict[str, str], str]] = {}
    for name, analyst in settings.analysts.items():
        budgets[name] = (f"[analysts.{name}]", analyst.budget(), _CONFIG_NAMES, "set")
    for found in stored or []:
        if not found.removed:
            fix = f"change it with `dpproxy budget set {found.name}` and"
            budgets[found.name] = (f'analyst "{found.name}"', found.budget, FLAG_NAMES, fix)
    notes = []
    for where, budget, names, fix in budgets.values():
        problem = default_query_problem(budget, names, fix)
        if problem is not None:
            notes.append(f"{where}: {problem}")
    return notes


#: How config check names the settings in default_query_problem's advice.
_CONFIG_NAMES = {
    "default": "epsilon_default =",
    "mechanism": 'mechanism = "laplace"',
    "total": "epsilon_total",
}
