"""Which open stores are still alive, so recovery never touches another process's queries.

Several dpproxy processes may share one state file. Each open :class:`StateStore` is an
*owner* with a random id and holds an exclusive ``flock`` on ``<state file>.owners/<id>``
for as long as it is open. Every reservation records its owner. At start-up, recovery
finishes only reservations whose owner's lock is free: the kernel drops the lock when a
process exits or dies, so a free lock means nobody will ever complete those reservations.
(SQLite's WAL mode already requires all processes to be on one host, where flock works.)
"""

from __future__ import annotations

import fcntl
import os
import secrets
from pathlib import Path

from accountant.errors import StateStoreError


def owners_dir(state_path: Path) -> Path:
    return state_path.with_name(state_path.name + ".owners")


class OwnerLock:
    """The lock that marks this open store as alive. Release it with :meth:`release`."""

    def __init__(self, state_path: Path) -> None:
        self.id = secrets.token_hex(16)
        directory = owners_dir(state_path)
        self._path = directory / self.id
        # Lock under a hidden name, then rename: the file never appears unlocked.
        staging = directory / f".{self.id}"
        self._fd: int | None = None
        try:
            directory.mkdir(mode=0o700, exist_ok=True)
            self._fd = os.open(staging, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            staging.rename(self._path)
        except OSError as exc:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
                staging.unlink(missing_ok=True)
            raise StateStoreError(
                state_path,
                f"cannot create the owner lock {self._path} ({exc})",
                "check that the state file's directory is writable by the user running dpproxy",
            ) from exc

    def release(self) -> None:
        if self._fd is None:
            return
        self._path.unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = None


def owner_is_alive(state_path: Path, owner: str) -> bool:
    """True while the store ``owner`` is open in some process (its lock file is locked)."""
    path = owners_dir(state_path) / owner
    if os.sep in owner or not owner or owner.startswith("."):
        return False
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def sweep_dead_owners(state_path: Path) -> None:
    """Remove the lock files of owners that are gone (processes that died while open).

    Call only after their reservations were recovered.
    """
    try:
        entries = list(owners_dir(state_path).iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue  # an owner being created
        if not owner_is_alive(state_path, entry.name):
            entry.unlink(missing_ok=True)
