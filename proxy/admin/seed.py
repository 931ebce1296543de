"""The configuration's [analysts] seed the state store, which is the source of truth.

Precedence: an analyst the state store has never known is added from the configuration
(at server start, and whenever an admin command opens the store). From then on the stored
analyst wins: editing [analysts.NAME] later changes nothing (the server logs a warning),
and `dpproxy analyst|budget ...` are the way to change a password or a budget. A removed
analyst stays removed even if the configuration still names them.
"""

from __future__ import annotations

import getpass
import logging
import os
import shlex
import socket
import sys
from collections.abc import Sequence

from accountant import AdminChange, AnalystBudget, StateStore, StoredAnalyst
from proxy.settings import Settings

logger = logging.getLogger("dpproxy.admin")


def current_actor() -> str:
    """The OS user running this process, and the host (``root@db1``)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid {os.getuid()}"
    return f"{user}@{socket.gethostname()}"


def admin_change(argv: Sequence[str] | None = None) -> AdminChange:
    """Who (the OS user) and what (the command line: it never holds a password)."""
    args = list(sys.argv[1:] if argv is None else argv)
    return AdminChange(actor=current_actor(), command=shlex.join(["dpproxy", *args]))


def configured(settings: Settings) -> dict[str, tuple[str, AnalystBudget]]:
    return {name: (a.password, a.budget()) for name, a in settings.analysts.items()}


def seed(store: StateStore, settings: Settings, command: str) -> list[str]:
    """Add the configured analysts the store has never known; returns their names."""
    change = AdminChange(actor=current_actor(), command=f"{command} (configuration seed)")
    return store.seed_analysts(configured(settings), change)


def differences(settings: Settings, stored: Sequence[StoredAnalyst]) -> list[str]:
    """Configured analysts whose settings differ from the store's (which win)."""
    by_name = {a.name: a for a in stored}
    notes = []
    for name, analyst in sorted(settings.analysts.items()):
        found = by_name.get(name)
        if found is None or found.removed:
            continue
        changed = []
        if found.budget != analyst.budget():
            changed.append("budget")
        if found.verifier != analyst.password:
            changed.append("password")
        if changed:
            notes.append(
                f"[analysts.{name}] {' and '.join(changed)} in the configuration "
                f"{'differs' if len(changed) == 1 else 'differ'} from "
                "the state store, which wins; change them with `dpproxy budget set` or "
                "`dpproxy analyst passwd`"
            )
    return notes
