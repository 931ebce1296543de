"""`dpproxy config check FILE` and `dpproxy config schema`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from accountant import StateStore, StateStoreError
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
    if not isinstance(location, Path):
        try:  # (creates the schema if it is not there yet, as the server would)
            with StateStore.open_reader(location, timeout=5) as store:
                stored = store.analysts(include_removed=True)
        except StateStoreError as error:
            notes.append(f"[state] dsn: {error}")
    elif not location.parent.is_dir():
        notes.append(f"[state] path: directory {location.parent} does not exist")
    elif location.exists():
        with StateStore.open_reader(location, timeout=settings.state.lock_timeout_seconds) as store:
            stored = store.analysts(include_removed=True)
    if stored is not None:
        notes += differences(settings, [a for a in stored if not a.removed])
    if not settings.analysts and not stored:
        notes.append("no analysts: add [analysts.NAME] or run `dpproxy analyst add NAME`")
    return notes
