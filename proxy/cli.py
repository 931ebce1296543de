"""The `dpproxy` command: serve, demo, budget, audit, passwd."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from accountant import AccountantError, AuditRecord, StateStore
from proxy import __version__
from proxy.backends import BackendError
from proxy.demo import CONFIG_FILE, connection_banner, prepare
from proxy.demo_data import DEFAULT_SEED, MAX_PATIENTS
from proxy.protocol.scram import make_verifier
from proxy.runner import run
from proxy.settings import CONFIG_ENV, ConfigError, Settings, config_path, load_settings
from proxy.tables import render_table
from rewriter import PolicyError

EXIT_USAGE = 2
EXIT_FAILURE = 1


class CommandError(Exception):
    """A command cannot proceed; the message says why and what to do."""


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config",
        metavar="FILE",
        help=f"configuration file (default: ${CONFIG_ENV}, else ./{CONFIG_FILE})",
    )
    parser = argparse.ArgumentParser(
        prog="dpproxy",
        description="A differentially private SQL proxy for PostgreSQL clients.",
    )
    parser.add_argument("--version", action="version", version=f"dpproxy {__version__}")
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="how much the server logs to stderr (default: info)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    serve = commands.add_parser(
        "serve",
        parents=[common],
        help="serve the configured database",
        description="Serve the database named in the configuration.",
    )
    serve.add_argument("--host", help="address to listen on (overrides [server] host)")
    serve.add_argument("--port", type=_port, help="port to listen on (overrides [server] port)")

    demo = commands.add_parser(
        "demo",
        help="create and serve the embedded demo database",
        description=(
            "Write a synthetic medical database (DuckDB), a commented configuration and the "
            "state store into DIR, then serve it. An existing demo in DIR is reused."
        ),
    )
    demo.add_argument(
        "--dir",
        default="dpproxy-demo",
        type=Path,
        help="where the demo lives (default: ./dpproxy-demo)",
    )
    demo.add_argument("--host", default="127.0.0.1", help="address to listen on")
    demo.add_argument("--port", type=_port, default=6432, help="port (default 6432; 0: any)")
    demo.add_argument(
        "--patients",
        type=_patients,
        default=10_000,
        help="patients to generate for a new demo (default 10,000)",
    )
    demo.add_argument(
        "--seed",
        type=int,
        default=DEFAULT_SEED,
        help=f"random seed of the data (default {DEFAULT_SEED})",
    )

    budget = commands.add_parser(
        "budget", help="show privacy budgets", description="Show analysts' privacy budgets."
    )
    budget_commands = budget.add_subparsers(dest="budget_command", metavar="ACTION", required=True)
    show = budget_commands.add_parser(
        "show",
        parents=[common],
        help="budget spent and left per analyst",
        description="Show each analyst's total, spent and remaining ε.",
    )
    show.add_argument("analyst", nargs="?", help="only this analyst")
    show.add_argument("--json", action="store_true", help="print JSON instead of a table")

    audit = commands.add_parser(
        "audit", help="review the audit log", description="Review and verify the audit log."
    )
    audit_commands = audit.add_subparsers(dest="audit_command", metavar="ACTION", required=True)
    listing = audit_commands.add_parser(
        "list",
        parents=[common],
        help="list audit records, newest last",
        description="List audit records (every query attempt), newest last.",
    )
    listing.add_argument("--analyst", help="only this analyst's records")
    listing.add_argument(
        "--limit", type=_positive, default=50, help="show the last N records (default 50)"
    )
    listing.add_argument("--json", action="store_true", help="print JSON lines")
    audit_commands.add_parser(
        "verify",
        parents=[common],
        help="check the audit log's hash chain",
        description="Check that no audit record was edited or removed.",
    )

    commands.add_parser(
        "passwd",
        help="make a password verifier for the configuration",
        description=(
            "Read a password (prompt, or one line on standard input) and print the "
            "SCRAM-SHA-256 verifier to put in [analysts.NAME] password."
        ),
    )
    return parser


def _port(text: str) -> int:
    value = _integer(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be between 0 and 65535, got {value}")
    return value


def _patients(text: str) -> int:
    value = _integer(text)
    if not 1 <= value <= MAX_PATIENTS:
        raise argparse.ArgumentTypeError(f"patients must be between 1 and {MAX_PATIENTS:,}")
    return value


def _positive(text: str) -> int:
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value}")
    return value


def _integer(text: str) -> int:
    try:
        return int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        return _dispatch(args)
    except (ConfigError, CommandError, PolicyError, BackendError) as error:
        print(f"dpproxy: {error}", file=sys.stderr)
        return EXIT_USAGE if isinstance(error, ConfigError) else EXIT_FAILURE
    except AccountantError as error:
        print(f"dpproxy: {error}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 130


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "serve":
        settings = load_settings(config_path(args.config))
        server = settings.server.model_copy(
            update={k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None}
        )
        settings = settings.model_copy(update={"server": server})
        _serve(settings, banner=None)
        return 0
    if args.command == "demo":
        directory: Path = args.dir
        prepare(directory, host=args.host, port=args.port, patients=args.patients, seed=args.seed)
        settings = load_settings(directory / CONFIG_FILE)
        server = settings.server.model_copy(update={"host": args.host, "port": args.port})
        _serve(settings.model_copy(update={"server": server}), banner=directory)
        return 0
    if args.command == "passwd":
        print(make_verifier(_read_password()))
        return 0
    settings = load_settings(config_path(args.config))
    if args.command == "budget":
        return _budget_show(settings, args.analyst, as_json=args.json)
    if args.audit_command == "list":
        return _audit_list(settings, args.analyst, args.limit, as_json=args.json)
    return _audit_verify(settings)


def _serve(settings: Settings, banner: Path | None) -> None:
    def ready(port: int) -> None:
        if banner is not None:
            print(connection_banner(banner, settings.server.host, port), flush=True)
        else:
            print(f"dpproxy listening on {settings.server.host}:{port}", flush=True)

    asyncio.run(run(settings, ready))


def _read_password() -> str:
    if sys.stdin.isatty():
        first = getpass.getpass("password: ")
        if getpass.getpass("again: ") != first:
            raise CommandError("the two passwords differ; nothing was written")
        password = first
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        raise CommandError("empty password; type one at the prompt or pipe it on stdin")
    return password


def _open_store(settings: Settings) -> StateStore:
    path = settings.state.path
    if not path.exists():
        raise CommandError(
            f"{path}: no state store yet; it is created when `dpproxy serve` first starts"
        )
    return StateStore.open(path)


def _budget_show(settings: Settings, analyst: str | None, *, as_json: bool) -> int:
    names = sorted(settings.analysts)
    if analyst is not None:
        if analyst not in settings.analysts:
            raise CommandError(
                f'no analyst "{analyst}" in the configuration; '
                f"analysts: {', '.join(names) or 'none'}"
            )
        names = [analyst]
    rows = []
    with _open_store(settings) as store:
        for name in names:
            budget = settings.analysts[name].budget()
            spent = store.spent(name)
            rows.append(
                {
                    "analyst": name,
                    "total": budget.total.plain,
                    "spent": spent.plain,
                    "remaining": store.remaining(name, budget).plain,
                    "per_query_default": budget.default_per_query.plain,
                    "per_query_max": budget.effective_cap.plain,
                }
            )
    if as_json:
        print(json.dumps(rows, indent=2))
    else:
        print(
            render_table(
                ["analyst", "ε total", "ε spent", "ε left", "ε per query", "max per query"],
                [
                    [
                        r["analyst"],
                        r["total"],
                        r["spent"],
                        r["remaining"],
                        r["per_query_default"],
                        r["per_query_max"],
                    ]
                    for r in rows
                ],
            )
        )
    return 0


def _audit_list(settings: Settings, analyst: str | None, limit: int, *, as_json: bool) -> int:
    with _open_store(settings) as store:
        records = store.audit_records(analyst=analyst)[-limit:]
    if as_json:
        for record in records:
            print(json.dumps(record.to_dict(), default=str))
        return 0
    if not records:
        print("no audit records" + (f" for {analyst}" if analyst else ""))
        return 0
    print(
        render_table(
            ["id", "time (UTC)", "analyst", "decision", "ε", "ε left", "sql", "reason"],
            [_audit_row(r) for r in records],
        )
    )
    return 0


def _audit_row(record: AuditRecord) -> list[str]:
    data = record.to_dict()
    time = str(data.get("time", ""))[:19].replace("T", " ")
    sql = " ".join(str(data.get("sql") or "").split())
    return [
        str(data.get("id", "")),
        time,
        str(data.get("analyst", "")),
        str(data.get("decision", "")),
        _amount(data.get("epsilon")),
        _amount(data.get("remaining")),
        _shorten(sql, 60),
        _shorten(str(data.get("reason") or ""), 60),
    ]


def _amount(value: object) -> str:
    return "" if value is None else str(value)


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _audit_verify(settings: Settings) -> int:
    with _open_store(settings) as store:
        result = store.verify_audit()
    if result.intact:
        print(f"audit log intact: {result.records} records, hash chain verified")
        return 0
    print(
        f"audit log BROKEN at record {result.first_bad_id}: {result.problem} "
        f"({result.records} records verified before it, {result.expected_records} expected)"
    )
    return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
