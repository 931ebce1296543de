"""`dpproxy analyst add|remove|passwd|list` and `dpproxy budget show|set|grant|reset`.

Every change goes to the state store in one transaction with its audit record (who: the
OS user; what: the command line and the change). A running server sees it at the next
login or query: no restart.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from pydantic import ValidationError

from accountant import (
    AnalystBudget,
    AnalystExists,
    Epsilon,
    GlobalBudget,
    InvalidAmount,
    Mechanism,
    Period,
    StateStore,
    StoredAnalyst,
    UnknownAnalyst,
    format_delta,
)
from accountant.analysts import name_problem
from accountant.budget import DEFAULT_DELTA, budget_delta, budget_epsilon
from accountant.ledger import NOTHING_SPENT, largest_fitting_epsilon, session_cost
from accountant.zcdp import as_epsilon
from proxy.admin.common import (
    UsageError,
    change,
    emit,
    open_reader,
    open_store,
    read_password,
    render,
)
from proxy.protocol.scram import make_verifier
from proxy.settings import Settings

_FLAGS = {
    "total": "--epsilon-total",
    "default_per_query": "--epsilon-default",
    "per_query_cap": "--epsilon-per-query-max",
    "delta": "--delta",
    "mechanism": "--mechanism",
}
_BUDGET_KEYS = (
    "analyst",
    "total",
    "spent",
    "remaining",
    "per_query_default",
    "per_query_max",
    "delta",
    "delta_spent",
    "delta_remaining",
)
BUDGET_COLUMNS = (
    ("analyst", "analyst"),
    ("total", "ε total"),
    ("spent", "ε spent"),
    ("remaining", "ε left"),
    ("per_query_default", "ε per query"),
    ("per_query_max", "max per query"),
    ("delta", "δ"),
    ("delta_spent", "δ spent (partition selection)"),
    ("delta_remaining", "δ left"),
)


def analyst_name(text: str) -> str:
    """argparse type of a new analyst's name (the rule: ``accountant.analysts.NAME_RULE``)."""
    problem = name_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def epsilon(text: str) -> Epsilon:
    """argparse type of a budget's ε: exact to 10⁻⁹, never rounded up."""
    try:
        return budget_epsilon(text)
    except InvalidAmount as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def delta(text: str) -> Decimal:
    """argparse type of a budget's δ: 0, or between 1e-15 and 0.001."""
    try:
        return budget_delta(text)
    except InvalidAmount as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def add_budget_flags(parser: argparse.ArgumentParser, *, required_total: bool) -> None:
    parser.add_argument(
        "--epsilon-total",
        metavar="EPS",
        type=epsilon,
        required=required_total,
        help="all the ε the analyst may spend (until a `budget reset`)",
    )
    parser.add_argument(
        "--epsilon-default",
        metavar="EPS",
        type=epsilon,
        help="ε of a query unless the session SETs one",
    )
    cap = parser.add_mutually_exclusive_group()
    cap.add_argument(
        "--epsilon-per-query-max", metavar="EPS", type=epsilon, help="most one query may spend"
    )
    cap.add_argument("--no-per-query-max", action="store_true", help="remove the per-query cap")
    parser.add_argument(
        "--delta",
        metavar="DELTA",
        type=delta,
        help="δ of the (ε, δ) budget (default 1e-6; 0: pure ε only)",
    )
    parser.add_argument(
        "--mechanism",
        choices=[m.value for m in Mechanism],
        help="noise of a query unless the session SETs dpproxy.mechanism",
    )
    parser.add_argument(
        "--period",
        choices=[p.value for p in Period],
        help="how often spending starts again from zero (00:00 UTC)",
    )


def make_budget(
    total: Epsilon,
    default: Epsilon,
    cap: Epsilon | None,
    *,
    like: AnalystBudget | None = None,
    args: argparse.Namespace | None = None,
) -> AnalystBudget:
    """A budget of these amounts; δ, mechanism and period from ``args`` (the flags given),
    else from ``like`` (the current budget), else the defaults."""
    extra: dict[str, Any] = {}
    if like is not None:
        extra = {"delta": like.delta, "mechanism": like.mechanism, "period": like.period}
    for name in ("delta", "mechanism", "period"):
        given = None if args is None else getattr(args, name, None)
        if given is not None:
            extra[name] = given
    try:
        return AnalystBudget(total=total, default_per_query=default, per_query_cap=cap, **extra)
    except ValidationError as error:
        problem = error.errors()[0]["msg"].removeprefix("Value error, ")
        for name, flag in _FLAGS.items():
            problem = problem.replace(name, flag)
        raise InvalidAmount(f"{problem}; nothing was changed") from None


#: How `analyst add` and `budget set` name the settings in default_query_problem's advice.
FLAG_NAMES = {
    "default": "--epsilon-default",
    "mechanism": "--mechanism laplace",
    "total": "--epsilon-total",
}


def default_query_problem(budget: AnalystBudget, names: dict[str, str], fix: str) -> str | None:
    """Why a query at the budget's default ε and mechanism can never be answered (its cost
    alone, as the ledger charges it, is more than the whole budget: with Gaussian noise ρ =
    ε²/2 converts to a larger ε), with the largest default that fits; None if it fits.
    ``names``: how to call the default, the mechanism and the total in the advice, which
    follows ``fix`` (how to change them)."""
    gaussian = budget.mechanism is Mechanism.GAUSSIAN
    cost = session_cost(budget.default_per_query, gaussian=gaussian)
    alone = NOTHING_SPENT.plus(cost).epsilon_nano(budget.delta)
    if alone <= budget.total.nano:
        return None
    fits = largest_fitting_epsilon(NOTHING_SPENT, cost, budget)
    options = []
    if not fits.is_zero():
        options.append(f"{names['default']} {fits.plain} (the most that fits)")
    if gaussian:
        options.append(names["mechanism"])
    options.append(f"a larger {names['total']}")
    advice = ", ".join(options[:-1]) + f" or {options[-1]}" if len(options) > 1 else options[0]
    noise = "Laplace noise"
    if gaussian:
        noise = (
            f"Gaussian noise ({cost.rho}, that is {as_epsilon(alone)} at "
            f"δ={format_delta(budget.delta)})"
        )
    return (
        f"a query at the default ε={budget.default_per_query.plain} with {noise} costs "
        f"more than the whole budget of {budget.total}, so every query that does not SET "
        f"dpproxy.epsilon lower will be refused; {fix} {advice}"
    )


def _warn_default_query(name: str, budget: AnalystBudget) -> None:
    problem = default_query_problem(
        budget, FLAG_NAMES, f"change it with `dpproxy budget set {name}` and"
    )
    if problem is not None:
        print(f"warning: {name}: {problem}", file=sys.stderr)


def _or(value: Epsilon | None, current: Epsilon) -> Epsilon:
    return current if value is None else value


def _row(analyst: StoredAnalyst) -> dict[str, Any]:
    return analyst.to_dict()


def _budget_row(analyst: StoredAnalyst) -> dict[str, Any]:
    return {key: value for key, value in analyst.to_dict().items() if key in _BUDGET_KEYS}


# -- analyst -------------------------------------------------------------------------------


def analyst_add(settings: Settings, args: argparse.Namespace, command: str) -> int:
    total: Epsilon = args.epsilon_total
    cap: Epsilon | None = args.epsilon_per_query_max
    default = _or(args.epsilon_default, min(Epsilon(1), total if cap is None else cap))
    budget = make_budget(total, default, cap, args=args)
    with open_store(settings, command) as store:
        if store.analyst(args.name) is not None:
            raise AnalystExists(args.name)  # say so before asking for a password
        verifier = make_verifier(read_password(f"password for {args.name}: "))
        record = store.add_analyst(args.name, verifier, budget, change(command))
    print(f"{args.name}: {record.reason} (audit record {record.id})")
    _warn_default_query(args.name, budget)
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
    with open_reader(settings, command, seed_config=True) as store:
        rows = [_row(a) for a in store.analysts()]
    fmt = "json" if args.json else "table"
    if fmt == "table":
        rows = [r | {"updated_at": r["updated_at"][:19].replace("T", " ")} for r in rows]
    columns = (*BUDGET_COLUMNS, ("updated_at", "changed (UTC)"))
    emit(render(rows, fmt, columns=columns, empty="no analysts yet: `dpproxy analyst add NAME`"))
    return 0


# -- budget --------------------------------------------------------------------------------


def budget_show(settings: Settings, args: argparse.Namespace, command: str) -> int:
    with open_reader(settings, command, seed_config=True) as store:
        if args.analyst is not None:
            rows = [_budget_row(_active(store, args.analyst))]
        else:
            rows = [_budget_row(a) for a in store.analysts()]
    fmt = "json" if args.json else "table"
    emit(render(rows, fmt, columns=BUDGET_COLUMNS, empty="no analysts yet"))
    return 0


def budget_set(settings: Settings, args: argparse.Namespace, command: str) -> int:
    total: Epsilon | None = args.epsilon_total
    default: Epsilon | None = args.epsilon_default
    cap: Epsilon | None = args.epsilon_per_query_max
    given = (total, default, cap, args.delta, args.mechanism, args.period)
    if all(value is None for value in given) and not args.no_per_query_max:
        raise UsageError(
            "nothing to set; give --epsilon-total, --epsilon-default, "
            "--epsilon-per-query-max, --no-per-query-max, --delta, --mechanism or --period"
        )

    def update(current: AnalystBudget) -> AnalystBudget:
        new_cap = cap if cap is not None else current.per_query_cap
        if args.no_per_query_max:
            new_cap = None
        return make_budget(
            _or(total, current.total),
            _or(default, current.default_per_query),
            new_cap,
            like=current,
            args=args,
        )

    return _change_budget(settings, args.analyst, command, update)


def budget_grant(settings: Settings, args: argparse.Namespace, command: str) -> int:
    extra: Epsilon = args.epsilon
    if extra.is_zero():
        raise InvalidAmount("grant an amount greater than 0")

    def update(current: AnalystBudget) -> AnalystBudget:
        return make_budget(
            current.total + extra, current.default_per_query, current.per_query_cap, like=current
        )

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
    _warn_default_query(name, after.budget)
    return 0


def _active(store: StateStore, name: str) -> StoredAnalyst:
    found = store.analyst(name)
    if found is None:
        raise UnknownAnalyst(name, [a.name for a in store.analysts()])
    return found


def budget_global(settings: Settings, args: argparse.Namespace, command: str) -> int:
    """Show, set or remove the cap on all analysts' charges together."""
    total: Epsilon | None = args.epsilon_total
    if args.delta is not None and total is None:
        raise UsageError(
            "--delta is the δ of a new global cap and goes with --epsilon-total (e.g. "
            "`dpproxy budget global --epsilon-total 50 --delta 1e-6`); nothing was changed"
        )
    if total is not None and total.is_zero():
        raise InvalidAmount("the global total must be greater than 0; nothing was changed")
    if not args.none and total is None:  # only show it
        with open_reader(settings, command) as store:
            _show_global(store)
        return 0
    with open_store(settings, command) as store:
        if args.none:
            record = store.set_global_budget(None, change(command))
            print(f"{record.reason} (audit record {record.id})")
            return 0
        if total is not None:
            cap_delta = DEFAULT_DELTA if args.delta is None else args.delta
            record = store.set_global_budget(GlobalBudget(total, cap_delta), change(command))
            print(f"{record.reason} (audit record {record.id})")
        _show_global(store)
    return 0


def _show_global(store: StateStore) -> None:
    current = store.global_budget()
    if current is None:
        print("no global budget: only each analyst's own budget applies")
        return
    spent = store.global_spent(current.delta)
    print(
        f"global budget: ε={current.total.plain} at δ={format_delta(current.delta)} over all "
        f"analysts; {spent.plain} spent (all charges ever), "
        f"{current.total.saturating_sub(spent).plain} left"
    )


def cache_clear(settings: Settings, args: argparse.Namespace, command: str) -> int:
    """Raise the answer-cache epoch: running servers forget their cached answers."""
    with open_store(settings, command) as store:
        record = store.clear_answer_cache(change(command))
    print(f"{record.reason} (audit record {record.id})")
    return 0
