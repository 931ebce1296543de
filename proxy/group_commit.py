"""Group commit: the audit records of concurrent sessions written in one transaction.

Each session awaits its own record, so nothing is answered before its record is
committed. While one batch is being written on the ledger's thread, the records that
arrive meanwhile wait in a queue; when the batch is done, everything queued is written as
the next batch. One session alone still gets one transaction per record (no waiting for
company); many sessions share transactions, commits and lookups.

All bookkeeping happens on the event loop's thread: only ``write_many`` runs on the
executor, so the queue needs no lock.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from typing import Generic, TypeVar

E = TypeVar("E")
R = TypeVar("R")

#: Writes the entries in order in one transaction; per entry, its result or the exception
#: to raise in the session that asked for it. Raising fails every entry of the batch.
WriteMany = Callable[[Sequence[E]], Sequence[R | BaseException]]


class GroupWriter(Generic[E, R]):
    def __init__(self, executor: Executor, write_many: WriteMany[E, R]) -> None:
        self._executor = executor
        self._write_many = write_many
        self._queue: list[tuple[E, asyncio.Future[R]]] = []
        self._writing = False
        #: How many batches were written, and the largest (for tests and benchmarks).
        self.batches = 0
        self.largest_batch = 0

    async def write(self, entry: E) -> R:
        """Write ``entry`` (together with whatever else is queued) and return its result."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[R] = loop.create_future()
        self._queue.append((entry, future))
        if not self._writing:
            self._start(loop)
        return await future

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        batch, self._queue = self._queue, []
        self._writing = True
        self.batches += 1
        self.largest_batch = max(self.largest_batch, len(batch))
        entries = [entry for entry, _ in batch]
        written = loop.run_in_executor(self._executor, self._write_many, entries)
        written.add_done_callback(lambda done: self._finished(loop, batch, done))

    def _finished(
        self,
        loop: asyncio.AbstractEventLoop,
        batch: list[tuple[E, asyncio.Future[R]]],
        done: asyncio.Future[Sequence[R | BaseException]],
    ) -> None:
        try:
            results = done.result()
            if len(results) != len(batch):
                raise RuntimeError(
                    f"group commit wrote {len(results)} results for {len(batch)} entries"
                )
        except BaseException as failure:  # noqa: BLE001 - handed to every waiting session
            for _, future in batch:
                if not future.done():
                    future.set_exception(failure)
        else:
            for (_, future), result in zip(batch, results, strict=True):
                if future.done():  # the session was cancelled meanwhile
                    continue
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)
        self._writing = False
        if self._queue:
            self._start(loop)
