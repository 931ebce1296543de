"""What the admin commands share: errors, opening the store, passwords, times, output."""

from __future__ import annotations

import csv
import getpass
import io
import json
import os
import signal
import sys
import unicodedata
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from accountant import AdminChange, StateStore
from proxy.admin.seed import current_actor, seed
from proxy.settings import Settings
from proxy.tables import render_table

FORMATS = ("table", "csv", "json", "jsonl")
#: The exit status of a command whose reader went away (``dpproxy audit list | head -1``):
#: that of a Unix tool ended by SIGPIPE, as the shell reports it.
EXIT_READER_GONE = 128 + signal.SIGPIPE


class CommandError(Exception):
    """A command cannot proceed; the message says why and what to do."""


class UsageError(CommandError):
    """The command line cannot be used as given (exit status 2, like argparse's errors)."""


def open_store(settings: Settings, command: str, *, seed_config: bool = True) -> StateStore:
    """Open (creating if needed) the state store and, unless ``seed_config`` is False (for
    read-only reviews), seed it from the configuration's [analysts]."""
    location = settings.state.location
    if isinstance(location, Path) and not location.parent.is_dir():
        raise CommandError(
            f"{location}: its directory does not exist; create it or fix [state] path"
        )
    store = StateStore.open(location, timeout=settings.state.lock_timeout_seconds)
    if not seed_config:
        return store
    try:
        seed(store, settings, command)
    except BaseException:
        store.close()
        raise
    return store


def open_reader(settings: Settings, command: str, *, seed_config: bool = False) -> StateStore:
    """Open the state store to read only (for commands that only look): it reads while
    another process holds the write lock, as SQLite's WAL and PostgreSQL let readers do.
    A store not created (or upgraded) yet is opened as by open_store. With ``seed_config``,
    the configuration's [analysts] the store has never known are added first (a write,
    only when there are such analysts)."""
    location = settings.state.location
    if isinstance(location, Path) and not location.parent.is_dir():
        raise CommandError(
            f"{location}: its directory does not exist; create it or fix [state] path"
        )
    # Not bounded: reading a long audit log may take a while (Ctrl-C stops it).
    store = StateStore.open_reader(
        location, timeout=settings.state.lock_timeout_seconds, bounded=False
    )
    if not seed_config:
        return store
    try:
        known = {a.name for a in store.analysts(include_removed=True)}
    except BaseException:
        store.close()
        raise
    if known.issuperset(settings.analysts):
        return store
    store.close()
    return open_store(settings, command)


def change(command: str) -> AdminChange:
    return AdminChange(actor=current_actor(), command=command)


def read_password(prompt: str = "password: ") -> str:
    """A password from the terminal (asked twice) or one line of standard input."""
    if sys.stdin.isatty():
        first = getpass.getpass(prompt)
        if getpass.getpass("again: ") != first:
            raise CommandError("the two passwords differ; nothing was changed")
        password = first
    else:
        password = _stdin_line().rstrip("\r\n")
    if not password:
        raise CommandError("empty password; type one at the prompt or pipe it on stdin")
    if "\x00" in password:
        raise CommandError(
            "the password contains a NUL character, which no PostgreSQL client can send; "
            "choose another password (nothing was changed)"
        )
    return password


def _stdin_line() -> str:
    """One line of standard input. Bytes that are not UTF-8 are kept as they are (as
    surrogate escapes, which make_verifier hashes as the original bytes, as PostgreSQL
    does), whatever the locale's encoding."""
    binary = getattr(sys.stdin, "buffer", None)
    if binary is None:  # a text stream with no bytes underneath (tests)
        return sys.stdin.readline()
    line: bytes = binary.readline()
    return line.decode("utf-8", "surrogateescape")


def parse_time(text: str) -> datetime:
    """``2026-01-31`` or ``2026-01-31T12:00`` (UTC unless an offset is given)."""
    try:
        value = datetime.fromisoformat(text.strip().replace(" ", "T", 1))
    except ValueError:
        raise CommandError(
            f"cannot read the time {text!r}; use e.g. 2026-01-31 or 2026-01-31T12:00:00 "
            "(UTC unless an offset like +02:00 is given)"
        ) from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def render(
    rows: Sequence[dict[str, Any]],
    fmt: str,
    *,
    columns: Sequence[tuple[str, str]],
    empty: str,
) -> str:
    """``rows`` as a table for people (``columns``: key and header), or CSV/JSON/JSON lines
    with every key for scripts."""
    if fmt == "json":
        return json.dumps(list(rows), indent=2, ensure_ascii=False)
    if fmt == "jsonl":
        return "\n".join(json.dumps(r, ensure_ascii=False) for r in rows)
    if fmt == "csv":
        out = io.StringIO()
        keys = list(rows[0]) if rows else [key for key, _ in columns]
        writer = csv.DictWriter(out, fieldnames=keys, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
        return out.getvalue().rstrip("\n")
    if not rows:
        return empty
    return render_table(
        [header for _, header in columns],
        [[_cell(r.get(key)) for key, _ in columns] for r in rows],
    )


def _cell(value: object) -> str:
    if value is None:
        return ""
    text = printable(" ".join(str(value).split()))
    return text if len(text) <= 60 else text[:59] + "…"


#: Unicode categories written as escapes: control characters (terminal escape sequences
#: start with ESC), format characters (bidirectional overrides reorder what a terminal
#: shows) and lone surrogates (bytes that were not UTF-8).
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs"})


def printable(text: str, *, keep: str = "") -> str:
    """``text`` safe to print on a terminal: control and format characters (except those
    in ``keep``) are written as Python escapes (ESC as ``\\x1b``). User names of failed
    logins and the SQL analysts send are whatever a client sent."""
    if text.isprintable():
        return text
    return "".join(
        ch.encode("unicode_escape", "backslashreplace").decode("ascii")
        if ch not in keep and unicodedata.category(ch) in _ESCAPED_CATEGORIES
        else ch
        for ch in text
    )


def emit(text: str) -> None:
    if text:
        print(text)


def until_reader_leaves(command: Callable[[], int]) -> int:
    """Run ``command`` (one that prints and then ends, not the server) and flush what it
    printed. If the reader of standard output goes away first (``| head -1``, ``| true``),
    stop quietly as other Unix tools do, with no traceback: EXIT_READER_GONE. Every command
    that prints goes through here (proxy.cli.main), so none needs its own handling."""
    try:
        code = command()
        sys.stdout.flush()
    except BrokenPipeError:
        _discard_stdout()
        return EXIT_READER_GONE
    return code


def _discard_stdout() -> None:
    """Point standard output at the null device, so that what is still buffered for the
    reader that left is dropped when Python flushes it at exit (which would otherwise
    print "Exception ignored ... BrokenPipeError")."""
    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # not a file (a test's capture): nothing is flushed at exit
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)
