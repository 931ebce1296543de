"""The noise of an answer is drawn off the event loop (proxy.pipeline, Pipeline._release).

A red-team reviewer's GROUP BY over thousands of groups took a second of noise draws on
the event loop, during which every other session waited and a cancel request went unread
(it was handled only once the answer had been sent)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from proxy.pipeline import Pipeline
from rewriter import OpenDPNoise
from tests.proxy.local_pipeline import alice_session, local_pipeline


class GatedNoise(OpenDPNoise):
    """Draws no noise until the event loop has run a task started after the query:
    ``waited`` tells whether it could (it times out if the draw blocks the loop)."""

    def __init__(self) -> None:
        self.drawing = threading.Event()
        self.gate = threading.Event()
        self.waited: list[bool] = []

    def discrete_laplace_many(self, scale: float, count: int) -> list[int]:
        self.drawing.set()
        self.waited.append(self.gate.wait(timeout=5))
        return [0] * count


def test_the_event_loop_runs_while_the_noise_is_drawn(tmp_path: Path) -> None:
    pipeline: Pipeline = local_pipeline(tmp_path)
    noise = GatedNoise()
    pipeline.noise = noise
    session = alice_session(pipeline)

    async def go() -> object:
        async def open_gate() -> None:
            while not noise.drawing.is_set():
                await asyncio.sleep(0.01)
            noise.gate.set()  # reached only if the loop runs while the noise is drawn

        opener = asyncio.create_task(open_gate())
        try:
            return await session.execute("SELECT COUNT(*) FROM visits")
        finally:
            opener.cancel()

    try:
        result = asyncio.run(go())
    finally:
        pipeline.ledger.close()
    assert getattr(result, "rows", None) is not None
    assert noise.waited and all(noise.waited)
