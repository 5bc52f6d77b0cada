"""The engine's real-time clock: an asyncio task that plans a step, sleeps until its simulated
end, then completes it (pushing tokens to the requests' sinks).

The engine clock is ``loop.time()``. A step ends at ``start + duration``; the loop sleeps until
then and records how late it woke (``specload_sim_step_lag_seconds``). The next step starts at
the previous step's simulated end, so short lags are caught up (see ``TIMER_SLACK_S`` for the
timer's resolution); a lag over ``resync_s`` (the
process was starved) restarts the clock at the current time instead of bursting.
"""

from __future__ import annotations

import asyncio

from specload.sim.engine import Engine
from specload.sim.request import Request

__all__ = ["EngineLoop"]

#: asyncio's epoll wait rounds timeouts up to the next millisecond, so a sleep wakes 0-1 ms
#: late. Aiming half a millisecond early centres the error: steps complete within about
#: +-0.5 ms of their simulated end instead of 0..+1 ms (early completions count as lag 0).
TIMER_SLACK_S = 0.0005


class EngineLoop:
    """Runs ``engine`` against the event loop's clock."""

    def __init__(self, engine: Engine, resync_s: float = 0.25) -> None:
        self.engine = engine
        self.resync_s = resync_s
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.engine.t0 = asyncio.get_running_loop().time()  # the host's clock starts here
        self._task = asyncio.get_running_loop().create_task(self.run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def submit(self, req: Request) -> None:
        """Hand ``req`` to the engine after the profile's API-server delay."""
        delay = self.engine.prof.frontend_delay_s
        if delay > 0:
            asyncio.get_running_loop().call_later(delay, self._add, req)
        else:
            self._add(req)

    def _add(self, req: Request) -> None:
        if req.finished:  # aborted while in the API server
            return
        self.engine.add(req)
        self._wake.set()

    def abort(self, req: Request) -> None:
        self.engine.abort(req)
        self._wake.set()

    async def run(self) -> None:
        try:
            await self._run()
        except asyncio.CancelledError:
            raise
        except Exception:  # a dead engine must be loud: log and exit the process
            import logging
            import os

            logging.getLogger("specload.sim").exception("engine loop crashed")
            os._exit(70)

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        engine, lag_hist = self.engine, self.engine.metrics.step_lag
        t = loop.time()
        while True:
            if not engine.has_work:
                self._wake.clear()
                await self._wake.wait()
                t = loop.time()
            plan = engine.plan(t)
            if not plan.items:  # nothing fits (e.g. KV full of waiting work): wait for change
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), 0.05)
                except asyncio.TimeoutError:
                    pass
                t = loop.time()
                continue
            end = t + plan.duration
            delay = end - loop.time() - TIMER_SLACK_S
            if delay > 0:
                await asyncio.sleep(delay)
            else:  # behind: still let HTTP handlers run between steps
                await asyncio.sleep(0)
            now = loop.time()
            lag = now - end
            lag_hist.observe(lag if lag > 0 else 0.0)
            engine.complete(plan, end)
            t = end if lag < self.resync_s else now
