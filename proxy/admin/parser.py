"""The admin commands' arguments. Each action sets ``handler(settings, args, command)``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from proxy.admin import audit, people, report
from proxy.admin.config import config_check, config_schema

Handler = Callable[..., int]


def _action(
    group: argparse._SubParsersAction,  # type: ignore[type-arg]
    name: str,
    common: argparse.ArgumentParser,
    help_text: str,
    handler: Handler,
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = group.add_parser(
        name, parents=[common], help=help_text, description=help_text[0].upper() + help_text[1:]
    )
    parser.set_defaults(handler=handler)
    return parser


def _group(
    commands: argparse._SubParsersAction,  # type: ignore[type-arg]
    name: str,
    help_text: str,
) -> argparse._SubParsersAction:  # type: ignore[type-arg]
    parser = commands.add_parser(name, help=help_text, description=help_text + ".")
    actions: argparse._SubParsersAction = parser.add_subparsers(  # type: ignore[type-arg]
        dest=f"{name}_command", metavar="ACTION", required=True
    )
    return actions


def add_admin_commands(
    commands: argparse._SubParsersAction,  # type: ignore[type-arg]
    common: argparse.ArgumentParser,
) -> None:
    config = _group(commands, "config", "check the configuration file; print its JSON schema")
    check = _action(config, "check", common, "validate a configuration file", config_check)
    check.add_argument("file", nargs="?", help="the file (default: --config, $DPPROXY_CONFIG)")
    check.set_defaults(needs_settings=False)
    schema = _action(
        config, "schema", common, "print the configuration's JSON schema", config_schema
    )
    schema.set_defaults(needs_settings=False)

    analyst = _group(commands, "analyst", "manage analysts (in the state store, applies live)")
    add = _action(
        analyst,
        "add",
        common,
        "add an analyst; the password is read from a prompt or stdin",
        people.analyst_add,
    )
    add.add_argument(
        "name",
        type=people.analyst_name,
        help="the user name the analyst connects with (1 to 63 bytes, no control characters)",
    )
    people.add_budget_flags(add, required_total=True)
    remove = _action(
        analyst,
        "remove",
        common,
        "remove an analyst (their charges stay recorded)",
        people.analyst_remove,
    )
    remove.add_argument("name")
    passwd = _action(
        analyst,
        "passwd",
        common,
        "change a password, read from a prompt or stdin",
        people.analyst_passwd,
    )
    passwd.add_argument("name")
    listing = _action(analyst, "list", common, "list analysts and budgets", people.analyst_list)
    listing.add_argument("--json", action="store_true", help="print JSON instead of a table")

    budget = _group(commands, "budget", "show and change privacy budgets (applies live)")
    show = _action(
        budget, "show", common, "each analyst's total, spent and remaining ε", people.budget_show
    )
    show.add_argument("analyst", nargs="?", help="only this analyst")
    show.add_argument("--json", action="store_true", help="print JSON instead of a table")
    change = _action(budget, "set", common, "set an analyst's budget", people.budget_set)
    change.add_argument("analyst")
    people.add_budget_flags(change, required_total=False)
    grant = _action(
        budget, "grant", common, "add ε to an analyst's total budget", people.budget_grant
    )
    grant.add_argument("analyst")
    grant.add_argument("epsilon", metavar="EPS", type=people.epsilon, help="ε to add to the total")
    reset = _action(
        budget,
        "reset",
        common,
        "start an analyst's spending afresh at 0 (charges stay in the audit log)",
        people.budget_reset,
    )
    reset.add_argument("analyst")
    overall = _action(
        budget,
        "global",
        common,
        "show, set or remove the cap on all analysts' spending together",
        people.budget_global,
    )
    which = overall.add_mutually_exclusive_group()
    which.add_argument(
        "--epsilon-total", metavar="EPS", type=people.epsilon, help="set the global cap (ε)"
    )
    which.add_argument("--none", action="store_true", help="remove the global cap")
    overall.add_argument(
        "--delta",
        metavar="DELTA",
        type=people.delta,
        help="δ of the global cap set with --epsilon-total (default 1e-6)",
    )

    cache = _group(commands, "cache", "the answer cache (repeated queries at no cost)")
    _action(
        cache,
        "clear",
        common,
        "forget every cached answer (e.g. after new data was loaded into PostgreSQL)",
        people.cache_clear,
    )

    _add_audit(commands, common)

    out = commands.add_parser(
        "report",
        parents=[common],
        help="write an HTML report of budgets and queries",
        description=(
            "Write one self-contained HTML page: per analyst, ε spent over time, queries "
            "per day and refusals by reason."
        ),
    )
    out.add_argument("--out", type=Path, required=True, metavar="FILE.html")
    out.add_argument("--analyst", help="only this analyst")
    out.add_argument("--since", metavar="TIME", help="records at or after TIME (UTC)")
    out.add_argument("--until", metavar="TIME", help="records before TIME (UTC)")
    out.set_defaults(handler=report.report)


def _add_audit(
    commands: argparse._SubParsersAction,  # type: ignore[type-arg]
    common: argparse.ArgumentParser,
) -> None:
    group = _group(commands, "audit", "review, export and verify the audit log")
    listing = _action(group, "list", common, "list audit records, newest last", audit.audit_list)
    audit.add_filters(listing)
    listing.add_argument(
        "--limit", type=_positive, default=50, help="show the last N records (default 50)"
    )
    audit.add_format(listing, "table")
    listing.add_argument("--json", action="store_true", help="same as --format jsonl")
    show = _action(group, "show", common, "show one audit record in full", audit.audit_show)
    show.add_argument("id", type=_positive, help="the record's id (from `audit list`)")
    audit.add_format(show, "table")
    export = _action(
        group,
        "export",
        common,
        "export audit records for archiving or analysis",
        audit.audit_export,
    )
    audit.add_filters(export)
    audit.add_format(export, "jsonl")
    export.add_argument("--out", type=Path, metavar="FILE", help="write here (default: stdout)")
    _action(group, "verify", common, "check the audit log's hash chain", audit.audit_verify)


def _positive(text: str) -> int:
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {value}")
    return value
