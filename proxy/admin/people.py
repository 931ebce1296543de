"""`dpproxy analyst add|remove|passwd|list` and `dpproxy budget show|set|grant|reset`.

Every change goes to the state store in one transaction with its audit record (who: the
OS user; what: the command line and the change). A running server sees it at the next
login or query: no restart.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from accountant import (
    AnalystBudget,
    AnalystExists,
    Epsilon,
    InvalidAmount,
    StateStore,
    StoredAnalyst,
    UnknownAnalyst,
)
from proxy.admin.common import change, emit, open_store, read_password, render
from proxy.protocol.scram import make_verifier
from proxy.settings import Settings

_FLAGS = {
    "total": "--epsilon-total",
    "default_per_query": "--epsilon-default",
    "per_query_cap": "--epsilon-per-query-max",
}
_BUDGET_KEYS = ("analyst", "total", "spent", "remaining", "per_query_default", "per_query_max")
BUDGET_COLUMNS = (
    ("analyst", "analyst"),
    ("total", "ε total"),
    ("spent", "ε spent"),
    ("remaining", "ε left"),
    ("per_query_default", "ε per query"),
    ("per_query_max", "max per query"),
)


def add_budget_flags(parser: argparse.ArgumentParser, *, required_total: bool) -> None:
    parser.add_argument(
        "--epsilon-total",
        metavar="EPS",
        required=required_total,
        help="all the ε the analyst may spend (until a `budget reset`)",
    )
    parser.add_argument(
        "--epsilon-default", metavar="EPS", help="ε of a query unless the session SETs one"
    )
    cap = parser.add_mutually_exclusive_group()
    cap.add_argument("--epsilon-per-query-max", metavar="EPS", help="most one query may spend")
    cap.add_argument("--no-per-query-max", action="store_true", help="remove the per-query cap")


def make_budget(total: Epsilon, default: Epsilon, cap: Epsilon | None) -> AnalystBudget:
    try:
        return AnalystBudget(total=total, default_per_query=default, per_query_cap=cap)
    except ValidationError as error:
        problem = error.errors()[0]["msg"].removeprefix("Value error, ")
        for name, flag in _FLAGS.items():
            problem = problem.replace(name, flag)
        raise InvalidAmount(f"{problem}; nothing was changed") from None


def _or(value: Epsilon | None, current: Epsilon) -> Epsilon:
    return current if value is None else value


def _amount(text: str | None) -> Epsilon | None:
    return None if text is None else Epsilon(text)


def _row(analyst: StoredAnalyst) -> dict[str, Any]:
    return analyst.to_dict()


def _budget_row(analyst: StoredAnalyst) -> dict[str, Any]:
    return {key: value for key, value in analyst.to_dict().items() if key in _BUDGET_KEYS}


# -- analyst -------------------------------------------------------------------------------


def analyst_add(settings: Settings, args: argparse.Namespace, command: str) -> int:
    total = Epsilon(args.epsilon_total)
    cap = _amount(args.epsilon_per_query_max)
    default = _or(_amount(args.epsilon_default), min(Epsilon(1), total if cap is None else cap))
    budget = make_budget(total, default, cap)
    with open_store(settings, command) as store:
        if store.analyst(args.name) is not None:
            raise AnalystExists(args.name)  # say so before asking for a password
        verifier = make_verifier(read_password(f"password for {args.name}: "))
        record = store.add_analyst(args.name, verifier, budget, change(command))
    print(f"{args.name}: {record.reason} (audit record {record.id})")
    return 0


def analyst_remove(settings: Settings, args: argparse.Namespace, command: str) -> int:
    with open_store(settings, command) as store:
        record = store.remove_analyst(args.name, change(command))
    print(f"{args.name}: {record.reason} (audit record {record.id})")
    return 0


def analyst_passwd(settings: Settings, args: argparse.Namespace, command: str) -> int:
    with open_store(settings, command) as store:
        _active(store, args.name)  # say so before asking for a password
        verifier = make_verifier(read_password(f"new password for {args.name}: "))
        record = store.set_verifier(args.name, verifier, change(command))
    print(f"{args.name}: {record.reason}; open sessions stay logged in (audit record {record.id})")
    return 0


def analyst_list(settings: Settings, args: argparse.Namespace, command: str) -> int:
    with open_store(settings, command) as store:
        rows = [_row(a) for a in store.analysts()]
    fmt = "json" if args.json else "table"
    if fmt == "table":
        rows = [r | {"updated_at": r["updated_at"][:19].replace("T", " ")} for r in rows]
    columns = (*BUDGET_COLUMNS, ("updated_at", "changed (UTC)"))
    emit(render(rows, fmt, columns=columns, empty="no analysts yet: `dpproxy analyst add NAME`"))
    return 0


# -- budget --------------------------------------------------------------------------------


def budget_show(settings: Settings, args: argparse.Namespace, command: str) -> int:
    with open_store(settings, command) as store:
        if args.analyst is not None:
            rows = [_budget_row(_active(store, args.analyst))]
        else:
            rows = [_budget_row(a) for a in store.analysts()]
    fmt = "json" if args.json else "table"
    emit(render(rows, fmt, columns=BUDGET_COLUMNS, empty="no analysts yet"))
    return 0


def budget_set(settings: Settings, args: argparse.Namespace, command: str) -> int:
    total = _amount(args.epsilon_total)
    default = _amount(args.epsilon_default)
    cap = _amount(args.epsilon_per_query_max)
    if total is None and default is None and cap is None and not args.no_per_query_max:
        raise InvalidAmount(
            "nothing to set; give --epsilon-total, --epsilon-default, "
            "--epsilon-per-query-max or --no-per-query-max"
        )

    def update(current: AnalystBudget) -> AnalystBudget:
        new_cap = cap if cap is not None else current.per_query_cap
        if args.no_per_query_max:
            new_cap = None
        return make_budget(
            _or(total, current.total), _or(default, current.default_per_query), new_cap
        )

    return _change_budget(settings, args.analyst, command, update)


def budget_grant(settings: Settings, args: argparse.Namespace, command: str) -> int:
    extra = Epsilon(args.epsilon)
    if extra.is_zero():
        raise InvalidAmount("grant an amount greater than 0")

    def update(current: AnalystBudget) -> AnalystBudget:
        return make_budget(current.total + extra, current.default_per_query, current.per_query_cap)

    return _change_budget(settings, args.analyst, command, update)


def budget_reset(settings: Settings, args: argparse.Namespace, command: str) -> int:
    with open_store(settings, command) as store:
        record = store.reset_spending(args.analyst, change(command))
        after = _active(store, args.analyst)
    print(
        f"{args.analyst}: {record.reason}; {after.remaining.plain} of "
        f"{after.budget.total.plain} left (audit record {record.id})"
    )
    return 0


def _change_budget(
    settings: Settings,
    name: str,
    command: str,
    update: Callable[[AnalystBudget], AnalystBudget],
) -> int:
    with open_store(settings, command) as store:
        record = store.update_budget(name, update, change(command))
        after = _active(store, name)
    print(f"{name}: {record.reason} (audit record {record.id})")
    print(f"{name}: {after.spent.plain} spent, {after.remaining.plain} left; applies at once")
    return 0


def _active(store: StateStore, name: str) -> StoredAnalyst:
    found = store.analyst(name)
    if found is None:
        raise UnknownAnalyst(name, [a.name for a in store.analysts()])
    return found
