"""Thread pools shared fairly between analysts (planning, catalog queries)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


class Workers:
    """A bounded pool of threads, shared fairly between analysts.

    Each key (an analyst) has at most one job in flight: its next job waits until the
    previous one has finished, even when whoever awaited that one has gone (a thread
    cannot be stopped), so one analyst, however many connections it opens, holds at most
    one thread and cannot starve the others. Jobs of different keys run in parallel, up
    to ``threads`` at a time, first come first served.
    """

    def __init__(self, threads: int, name: str) -> None:
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
        self._turns: dict[str, _Turn] = {}

    async def run(self, key: str, work: Callable[[], T]) -> T:
        """``work()`` on one of the threads, after ``key``'s previous job has finished."""
        loop = asyncio.get_running_loop()
        turn = self._turns.get(key)
        if turn is None:
            turn = self._turns[key] = _Turn()
        turn.users += 1
        try:
            await turn.lock.acquire()
        except BaseException:
            self._leave(key, turn)
            raise
        try:
            job: Future[T] = self._executor.submit(work)
        except BaseException:
            self._release(key, turn)
            raise
        # Released when the job ends (or is cancelled before it starts), on the loop.
        job.add_done_callback(lambda _: _call_soon(loop, self._release, key, turn))
        return await asyncio.wrap_future(job, loop=loop)

    def _release(self, key: str, turn: _Turn) -> None:
        turn.lock.release()
        self._leave(key, turn)

    def _leave(self, key: str, turn: _Turn) -> None:
        turn.users -= 1
        if turn.users == 0 and self._turns.get(key) is turn:
            del self._turns[key]

    def close(self) -> None:
        """Start no more jobs; the ones running finish on their own."""
        self._executor.shutdown(wait=False, cancel_futures=True)


class _Turn:
    """One key's place in Workers: its lock and how many jobs hold or wait for it."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


def _call_soon(
    loop: asyncio.AbstractEventLoop, callback: Callable[[str, _Turn], None], key: str, turn: _Turn
) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is closed: nothing waits any more
        loop.call_soon_threadsafe(callback, key, turn)
