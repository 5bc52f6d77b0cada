"""One process's load: its pacer, its arrival queue, its client, and its record outbox.

Runs in every process that has users (a worker, or the local runner). The master says what
to do with messages (``RunStart``, ``StepChange``, ``Drain``); this module turns them into
open-loop arrivals: the pacer greenlet sleeps until each arrival's absolute time and puts it
on a queue, and idle users take from the queue. Users never pace themselves, so the load does
not depend on response times; an arrival that finds no idle user waits in the queue and its
``queue_delay_s`` says so. Records go back through ``RecordOutbox`` in batches (every 0.5 s
or 200 records, and at the end) together with the counts the master checks them against.
"""

from __future__ import annotations

import hashlib
import logging
import time
from bisect import insort
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import gevent
import gevent.event
import gevent.queue

from specload.core.pacer import CountedWindow, Pacer, derive_seed
from specload.core.records import ANSWER_KEY, ErrorInfo, RequestRecord, counts_as_load
from specload.locust.messages import (
    Drain,
    FinalCounts,
    RecordBatch,
    RunStart,
    StepChange,
    WorkerReady,
)

__all__ = ["Arrival", "LoadProcess", "RecordOutbox"]

log = logging.getLogger("specload")

Send = Callable[[str, dict[str, Any]], None]


class PacingClock:
    """Wall-clock time for the pacer: ``now()`` and a wait on an event that a new share cuts
    short. A test puts a virtual clock in its place, so pacing is checked without real sleeps."""

    def now(self) -> float:
        return time.time()

    def wait(self, event: gevent.event.Event, timeout: float) -> None:
        event.wait(timeout)


@dataclass(frozen=True, slots=True)
class Arrival:
    """One arrival: which step it belongs to and when it was due (unix s). An open-loop
    arrival is turn 1; a conversation's later turns carry their id and the history so far."""

    plan: StepChange
    scheduled_at: float
    prompt_index: int
    turn: int = 1
    conversation_id: str | None = None
    history: tuple[dict[str, Any], ...] | None = None

    @property
    def warmup(self) -> bool:
        """Due before its step's warm-up ended, or in an interleaved block's cool-down: its
        record says ``warmup`` (left out of figures)."""
        return self.scheduled_at < self.plan.warmup_end or self.cooldown

    @property
    def cooldown(self) -> bool:
        """Due after an open-ended block's measured window: load that keeps the batch as it
        was while the block's measured requests finish, never measured itself."""
        return self.plan.open_end and self.scheduled_at >= self.plan.end


class RecordOutbox:
    """Batches records to the master: at 200 records, every 0.5 s, and on ``flush()``."""

    def __init__(
        self, send: Send, worker: str, *, max_records: int = 200, interval_s: float = 0.5
    ) -> None:
        self._send = send
        self.worker = worker
        self.run_id = ""
        self._buf: list[dict[str, Any]] = []
        self._max = max_records
        self._interval_s = interval_s
        self.sent = 0
        self.sent_in_window: dict[int, int] = defaultdict(int)
        self.due: dict[int, int] = defaultdict(int)
        self.queued: dict[int, int] = defaultdict(int)
        self.sent_by: dict[str, int] = defaultdict(int)
        self._dirty = False
        self._loop: gevent.Greenlet | None = None

    def start(self, run_id: str) -> None:
        self.stop()
        self.run_id, self.sent, self._buf, self._dirty = run_id, 0, [], False
        self.sent_in_window = defaultdict(int)
        self.due = defaultdict(int)
        self.queued = defaultdict(int)
        self.sent_by = defaultdict(int)
        self._loop = gevent.spawn(self._tick)

    def count_sent(self, step: int | None, condition: str = "") -> None:
        self.sent += 1
        if step is not None:
            self.sent_in_window[step] += 1
        if condition:
            self.sent_by[condition] += 1
        self._dirty = True

    def count_queued(self, step: int, measured: bool) -> None:
        """An arrival of ``step`` was queued: one more record that step waits for (``due``
        counts the measured ones)."""
        self.queued[step] += 1
        if measured:
            self.due[step] += 1
        self._dirty = True

    def add(self, record: dict[str, Any]) -> None:
        self._buf.append(record)
        if len(self._buf) >= self._max:
            self.try_flush()

    def flush(self, force: bool = False) -> None:
        """Send what is buffered, with the cumulative counts (also when no record waits;
        ``force``: also when nothing changed, so the master knows the counts are current).

        The records leave the buffer only once the send returned: a send that raises keeps
        them (and the counts' dirty mark) for the next try, so no record is lost to a hiccup
        between worker and master. Records added while the send yields stay for the next batch.
        """
        if not self.run_id or (not self._buf and not self._dirty and not force):
            return
        n = len(self._buf)
        msg = RecordBatch(
            self.run_id,
            self.worker,
            self._buf[:n],
            self.sent,
            dict(self.sent_in_window),
            dict(self.due),
            dict(self.queued),
            dict(self.sent_by),
        )
        self._dirty = False
        try:
            self._send(RecordBatch.TYPE, msg.to_wire())
        except BaseException:
            self._dirty = True
            raise
        del self._buf[:n]

    def try_flush(self, force: bool = False) -> None:
        """``flush``, never raising: for the tick, a full buffer, and a block's last measured
        records and counts (sent at once, the master waits for them)."""
        try:
            self.flush(force)
        except Exception:  # a send failing must not kill the caller; the records stay buffered
            log.exception("sending records to the master failed; kept for the next try")

    def _tick(self) -> None:
        while True:
            gevent.sleep(self._interval_s)
            self.try_flush()

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.kill(block=False)
            self._loop = None


def _min_tokens(scenario_min: int | None, prompt_cap: int | None) -> int | None:
    """The scenario's ``min_tokens``, never above a prompt's own ``max_tokens`` (a prompt file
    line with a smaller cap would otherwise ask for an impossible length)."""
    if scenario_min is None or prompt_cap is None:
        return scenario_min
    return min(scenario_min, prompt_cap)


def worker_tag(worker: str) -> str:
    """A short, stable tag for request ids (``local`` stays readable)."""
    return worker if len(worker) <= 8 else hashlib.sha1(worker.encode()).hexdigest()[:6]


class LoadProcess:
    """The load side of one Locust process (see module doc). ``send(type, data)`` reaches the master."""

    def __init__(
        self,
        worker: str,
        send: Send,
        *,
        api_key: Callable[[], str | None] = lambda: None,
        stop_users: Callable[[], None] = lambda: None,
        report_stats: Callable[[], None] = lambda: None,
        clock: PacingClock | None = None,
    ) -> None:
        self.worker = worker
        self._clock = clock or PacingClock()
        self._send = send
        self._api_key = api_key
        self._stop_users = stop_users
        self._report_stats = report_stats
        self.queue: gevent.queue.Queue[Arrival] = gevent.queue.Queue()
        self.outbox = RecordOutbox(send, worker)
        self.run: RunStart | None = None
        self.scenario: Any = None
        self.requests: list[Any] = []
        self.trace_offsets: tuple[float, ...] = ()  # a trace replay: each request's time
        self.client: Any = None
        #: an interleaved session's clients and models, by condition (``RunStart.targets``)
        self.clients: dict[str, Any] = {}
        self.models: dict[str, str] = {}
        self.recorded = 0
        self.inflight = 0
        self._seq = 0
        self._pending: list[tuple[float, int, StepChange]] = []
        self._changed = gevent.event.Event()
        self._ready = gevent.event.Event()
        self._draining = False
        self._greenlets: list[gevent.Greenlet] = []
        self._pacer_g: gevent.Greenlet | None = None
        self._steps_seen: dict[int, StepChange] = {}
        #: the closed-loop share being kept full, and how many arrivals it has made
        self._closed: StepChange | None = None
        self._closed_n = 0
        #: closed-loop requests (or conversations) in flight, by step index: a new share of
        #: the same step (a re-split, a block held longer) takes them over, not adds to them
        self._closed_live: defaultdict[int, int] = defaultdict(int)

    # --- messages from the master -------------------------------------------------------
    def on_run_start(self, msg: RunStart) -> None:
        if self.run is not None and self.run.run_id == msg.run_id:
            return
        self.stop()
        self.run, self.recorded, self.inflight, self._seq = msg, 0, 0, 0
        self._pending, self._draining = [], False
        self._steps_seen = {}
        self._closed, self._closed_live = None, defaultdict(int)
        self._ready = gevent.event.Event()
        while not self.queue.empty():  # users may be blocked on this queue: keep the object
            self.queue.get_nowait()
        self.outbox.start(msg.run_id)
        self._pacer_g = gevent.spawn(self._pace)
        self._greenlets = [gevent.spawn(self._prepare, msg), self._pacer_g]

    def on_step(self, msg: StepChange) -> None:
        if self.run is None or msg.run_id != self.run.run_id:
            return
        # a re-split replaces a not-yet-started share of the same step
        self._pending = [
            p for p in self._pending if not (p[2].index == msg.index and p[2].epoch < msg.epoch)
        ]
        insort(self._pending, (msg.begin_at, msg.epoch, msg), key=lambda p: (p[0], p[1]))
        self._steps_seen[msg.index] = msg  # a conversation's next turn finds its step here
        self._changed.set()

    def on_drain(self, msg: Drain) -> None:
        if self.run is None or msg.run_id != self.run.run_id or self._draining:
            return
        self._draining = True
        self._changed.set()
        self._greenlets.append(gevent.spawn(self._abort if msg.abort else self._finish))

    # --- setup --------------------------------------------------------------------------
    def _prepare(self, msg: RunStart) -> None:
        """Take the master's prompt set, build the requests and the client; tell the master."""
        from specload.client import ClientSettings, make_client
        from specload.client.request import ChatRequest
        from specload.scenario import parse_scenario
        from specload.scenario.prompts import PromptSet

        error = None
        try:
            sc = parse_scenario(msg.scenario, file=msg.scenario_path or "<scenario>")
            key = self._api_key()  # read now: a worker may get its options after init
            if msg.prompts is None:
                raise ValueError(
                    "the run's start carries no prompt set (a master older than this worker?)"
                )
            prompts = PromptSet.from_wire(msg.prompts)
            if sc.arrival == "trace":
                self.trace_offsets = tuple(p.at_s or 0.0 for p in prompts)
            contract = sc.contract
            self.requests = [
                ChatRequest(
                    model=msg.model,
                    messages=prompts[i].messages,
                    max_tokens=prompts[i].max_tokens or sc.max_tokens,
                    min_tokens=_min_tokens(sc.min_tokens, prompts[i].max_tokens),
                    ignore_eos=sc.ignore_eos,
                    temperature=sc.temperature,
                    seed=sc.seed,
                    stop=sc.stop,
                    stream=sc.stream,
                    tools=list(contract.tools) if contract and contract.tools else None,
                    extra=dict(sc.extra_body),
                    prompt_index=i,
                    category=prompts[i].category,
                    expect_json=bool(contract and contract.json),
                    required_fields=tuple(contract.required_fields) if contract else (),
                )
                for i in range(len(prompts))
            ]
            settings = ClientSettings(
                api_key=key,
                timeout_s=sc.request_timeout_s,
                store_text=msg.store_text,
                concurrency=max(8, sc.max_concurrency),
                record_itl=sc.record_itl,
            )
            self.client = make_client(sc.client, msg.base_url, settings)
            self.clients = {  # the run's own server keeps its one client (and its pool)
                label: self.client if url == msg.base_url else make_client(sc.client, url, settings)
                for label, (url, _) in msg.targets.items()
            }
            self.models = {label: model for label, (_, model) in msg.targets.items()}
            self.scenario = sc
            self._ready.set()
        except Exception as exc:  # reported to the master, which fails the run with it
            log.exception("preparing the run failed")
            error = f"{type(exc).__name__}: {exc}"
        from specload.client.lookup import WordTokenizer  # the method RecordBuilder uses

        ready = WorkerReady(msg.run_id, self.worker, WordTokenizer.method, error)
        self._send(WorkerReady.TYPE, ready.to_wire())

    # --- pacing -------------------------------------------------------------------------
    def _limit(self, plan: StepChange) -> float:
        """Arrivals of ``plan`` stop at its end or where the next share takes over; an
        open-ended block's go on past its end until the next share or the drain."""
        if plan.open_end:
            if self._draining:
                return float("-inf")
            return self._pending[0][0] if self._pending else float("inf")
        nxt = self._pending[0][0] if self._pending else plan.end
        return min(plan.end, nxt)

    def _next_plan(self) -> StepChange | None:
        while not self._pending:
            if self._draining:
                return None
            self._changed.clear()
            self._changed.wait()
        return self._pending.pop(0)[2]

    def _sleep_until(self, t: float, plan: StepChange) -> bool:
        """Sleep until ``t``; False as soon as ``t`` falls outside the plan's (moving) limit."""
        while True:
            if t >= self._limit(plan):
                return False
            remaining = t - self._clock.now()
            if remaining <= 0:
                return True
            self._changed.clear()
            self._clock.wait(self._changed, remaining)

    def _pacer(self, plan: StepChange) -> tuple[Pacer | CountedWindow, int]:
        """This share's arrivals and the index of its first one. A trace is replayed from the
        step's start at the step's speedup, so a share that takes over mid-step continues it
        where it stands; other arrival processes start afresh at ``begin_at``."""
        sc = self.scenario
        if plan.seed is not None:  # a block: both conditions of a unit get the same draw
            seed = derive_seed(plan.seed, "block")
        else:
            seed = derive_seed(sc.seed, plan.index, plan.epoch)
        if sc.arrival == "trace":
            trace = Pacer.share(
                plan.target_qps, "trace", seed, plan.start, index=plan.slot, count=plan.slots,
                offsets=self.trace_offsets, speed=plan.target_qps / sc.trace_rate_qps,
            )  # fmt: skip
            return trace, trace.first_at_or_after(plan.begin_at)
        origin = plan.begin_at if plan.origin is None else plan.origin
        pacer = Pacer.share(
            plan.target_qps, sc.arrival, seed, origin, index=plan.slot, count=plan.slots,
            burstiness=sc.burstiness,
        )  # fmt: skip
        chosen: Pacer | CountedWindow = pacer
        if plan.block is not None and sc.arrival == "poisson":  # the block runs at its load
            chosen = CountedWindow(
                pacer, plan.target_qps, seed, plan.warmup_end, plan.end,
                index=plan.slot, count=plan.slots,
            )  # fmt: skip
        return chosen, (0 if origin >= plan.begin_at else chosen.first_at_or_after(plan.begin_at))

    def _pace(self) -> None:
        self._ready.wait()
        n_prompts = max(1, len(self.requests))
        while (plan := self._next_plan()) is not None:
            if plan.slots == 0:  # left out of a re-split: no arrivals until the next share
                self.outbox.flush()
                continue
            if plan.open_end:  # the master waits for the measured window's counts: send them
                at = max(0.0, plan.end - self._clock.now()) + 0.01  # sent even if unchanged:
                # the master's cool-down waits for counts from after the window
                self._greenlets.append(gevent.spawn_later(at, self.outbox.try_flush, True))
            if plan.concurrency:
                self._closed_loop(plan)
                continue
            pacer, i = self._pacer(plan)
            while self._sleep_until(t := pacer.next_send_at(i), plan):
                prompt = (plan.prompt_offset + i * plan.slots + plan.slot) % n_prompts
                self._enqueue(Arrival(plan, t, prompt))
                i += 1
            self.outbox.flush()

    def _enqueue(self, a: Arrival) -> None:
        """Queue an arrival, counted (its step waits for its record; a measured one is due)."""
        self.outbox.count_queued(a.plan.index, measured=not a.warmup)
        self.queue.put(a)

    # --- sending ------------------------------------------------------------------------
    def execute(self, a: Arrival) -> RequestRecord:
        """Send one arrival; always returns (or, if killed, records) exactly one record."""
        from specload.client import RequestCancelled

        plan, run = a.plan, self.run
        assert run is not None
        self._seq += 1
        request_id = f"{run.run_id}-{worker_tag(self.worker)}-{self._seq}"
        warmup = a.warmup
        now = time.time()
        # the step's achieved rate counts what it scheduled (records.counts_as_load)
        in_window = not warmup and now < plan.end and counts_as_load(a.turn)
        self.outbox.count_sent(plan.index if in_window else None, plan.condition)
        self.inflight += 1
        try:
            rec: RequestRecord = self._client(plan).send(
                self._request(a),
                request_id=request_id,
                worker=self.worker,
                step=plan.index,
                repeat=plan.repeat,
                target_qps=plan.target_qps,
                warmup=warmup,
                scheduled_at=a.scheduled_at,
            )
        except RequestCancelled as exc:
            self._keep(self._tagged(a, self._converse(a, exc.record)[0]))
            raise
        except Exception as exc:  # a client bug must still leave exactly one record
            log.exception("client raised")
            rec = RequestRecord(
                request_id=request_id,
                worker=self.worker,
                step=plan.index,
                target_qps=plan.target_qps,
                warmup=warmup,
                scheduled_at=a.scheduled_at,
                sent_at=now,
                done_at=time.time(),
                queue_delay_s=now - a.scheduled_at,
                repeat=plan.repeat,
                prompt_index=a.prompt_index,
                category=self.requests[a.prompt_index].category,
                error=ErrorInfo("bad_payload", f"client error: {type(exc).__name__}"),
            )
        finally:
            self.inflight -= 1
        rec, continues = self._converse(a, rec)
        rec = self._tagged(a, rec)
        if a.plan.concurrency:
            rec = replace(rec, concurrency=a.plan.concurrency)
            if not continues:  # a conversation holds its slot until its last turn
                self._closed_live[a.plan.index] -= 1
                self._refill(a.plan)
        self._keep(rec)
        if plan.open_end and time.time() >= plan.end:
            # a block's cool-down ends when its measured records are in, and the next block's
            # window opens once its cool-down's requests are in too: the master waits on both
            self.outbox.try_flush()
        return rec

    @staticmethod
    def _tagged(a: Arrival, rec: RequestRecord) -> RequestRecord:
        """An interleaved block's record carries its condition and block as written (a
        cancelled one too: every record lands in its condition's run dir)."""
        if not a.plan.condition:
            return rec
        return replace(rec, condition=a.plan.condition, block=a.plan.block, cooldown=a.cooldown)

    def _client(self, plan: StepChange) -> Any:
        """The client of the server that gets this step's load (a block's condition's)."""
        return self.clients[plan.condition] if plan.condition else self.client

    def _keep(self, rec: RequestRecord) -> None:
        self.recorded += 1
        self.outbox.add(rec.to_dict())

    # --- closed-loop steps ---------------------------------------------------------------
    def _closed_loop(self, plan: StepChange) -> None:
        """A ``{concurrency: N}`` step: this share's requests in flight from ``begin_at``, each
        replaced when it returns (``_refill``), until the share ends."""
        share = plan.concurrency // plan.slots + (
            1 if plan.slot < plan.concurrency % plan.slots else 0
        )
        if not self._sleep_until(plan.begin_at, plan):
            return
        if self._closed_live[plan.index] == 0:
            self._closed_n = 0
        self._closed = plan
        share -= self._closed_live[plan.index]  # an earlier share's requests still in flight
        if plan.continues is not None:  # and those of the block whose load this one took over
            share -= self._closed_live[plan.continues]
        gap = self._stagger_s(plan, share)
        for i in range(share):
            if i == 0 or gap <= 0:
                self._refill(plan)
            else:
                at = plan.begin_at + i * gap
                self._greenlets.append(gevent.spawn(self._refill_at, plan, at))
        while (remaining := self._limit(plan) - self._clock.now()) > 0:
            self._changed.clear()
            self._clock.wait(self._changed, remaining)
        self._closed = None
        self.outbox.flush()

    @staticmethod
    def _stagger_s(plan: StepChange, share: int) -> float:
        """Seconds between a closed-loop share's first requests: spread over the warm-up.

        Started at once, N users with equal output lengths finish together and refill
        together, so every later round is a burst of N prefills and TTFT measures the bursts.
        Spread over the warm-up they start out of phase."""
        warmup = max(0.0, plan.warmup_end - plan.begin_at)
        return warmup / share if share > 1 else 0.0

    def _refill_at(self, plan: StepChange, t: float) -> None:
        """A staggered first request of a closed-loop share, at ``t`` if the share lasts."""
        if self._sleep_until(t, plan):
            self._refill(plan)

    def _refill(self, plan: StepChange) -> None:
        """One more arrival of ``plan``'s closed-loop step, sent now in the share running it
        (a later share of the same step, or a block that continues ``plan``'s, takes over),
        while that share lasts."""
        cur = self._closed
        if cur is None or plan.index not in (cur.index, cur.continues) or self._draining:
            return
        if self._clock.now() >= self._limit(cur):
            return
        n_prompts = max(1, len(self.requests))
        prompt = (cur.prompt_offset + cur.slot + cur.slots * self._closed_n) % n_prompts
        self._closed_n += 1
        self._closed_live[cur.index] += 1
        self._enqueue(Arrival(cur, self._clock.now(), prompt))

    # --- conversations ------------------------------------------------------------------
    def _request(self, a: Arrival) -> Any:
        """The request of arrival ``a``: its prompt, or, in a conversation, the history so far,
        asking for the answer's text when another turn follows."""
        req = self.requests[a.prompt_index]
        model = self.models.get(a.plan.condition)
        if model is not None and model != req.model:  # servers that name the model otherwise
            req = replace(req, model=model)
        conv = self.scenario.conversation if self.scenario is not None else None
        if conv is None:
            return req
        return replace(
            req,
            messages=a.history if a.history is not None else req.messages,
            keep_answer=a.turn < conv.turns,
        )

    def _converse(self, a: Arrival, rec: RequestRecord) -> tuple[RequestRecord, bool]:
        """A conversation's record, labelled, and whether another turn follows: after a good
        answer the next turn is scheduled (its think time after the answer; the answer text
        goes into the history only)."""
        conv = self.scenario.conversation if self.scenario is not None else None
        answer = rec.extra.pop(ANSWER_KEY, None)
        if conv is None:
            return rec, False
        rec = replace(rec, turn=a.turn, conversation_id=a.conversation_id or rec.request_id)
        if a.turn >= conv.turns or not rec.ok or answer is None or rec.done_at is None:
            return rec, False
        base = a.history if a.history is not None else self.requests[a.prompt_index].messages
        nxt = a.turn + 1
        history = (
            *base,
            {"role": "assistant", "content": answer},
            {"role": "user", "content": conv.follow_up(self.scenario.seed, a.prompt_index, nxt)},
        )
        due = rec.done_at + conv.think_time(self.scenario.seed, rec.conversation_id, a.turn)
        later = Arrival(a.plan, due, a.prompt_index, nxt, rec.conversation_id, history)
        self._greenlets.append(gevent.spawn(self._next_turn, later))
        return rec, True

    def _next_turn(self, a: Arrival) -> None:
        """Send a later turn when it is due, in the step running then; none once the run
        drains or past its last step (the conversation ends there)."""
        run = self.run
        gevent.sleep(max(0.0, a.scheduled_at - self._clock.now()))
        if self._draining or self.run is not run:
            return
        plan = next(
            (s for s in self._steps_seen.values() if s.start <= a.scheduled_at < s.end), None
        )
        if plan is not None:  # a worker left out of a re-split still ends its conversations
            self._enqueue(replace(a, plan=plan))

    # --- ending -------------------------------------------------------------------------
    def _finish(self) -> None:
        """After ``Drain``: wait for the queue and in-flight requests, then report counts."""
        run = self.run
        assert run is not None
        timeout_s = (self.scenario.request_timeout_s if self.scenario else 60.0) + 10.0
        deadline = time.time() + timeout_s
        if self._pacer_g is not None and self._ready.is_set():  # a process that fell behind
            self._pacer_g.join(timeout=timeout_s)  # (paused, busy) queues overdue arrivals first
        while (not self.queue.empty() or self.inflight) and time.time() < deadline:
            gevent.sleep(0.05)
        self._send_final(run)

    def _abort(self) -> None:
        """The run was stopped: cancel what is in flight (one ``cancelled`` record each), report."""
        run = self.run
        assert run is not None
        self._stop_users()  # kills user greenlets; their requests end as cancelled records
        self._send_final(run)

    def _send_final(self, run: RunStart) -> None:
        """The last records, Locust's statistics, then the final counts, in that order on the
        one connection: when the master has the counts it has every request in its Locust
        totals too. (A worker reports statistics every few seconds and once more on ``quit``,
        which the master awaits for only 0.5 s: on a busy machine the last requests were
        missing from ``--csv`` and ``--html``.)"""
        self.outbox.flush()
        self._report_stats()
        final = FinalCounts(run.run_id, self.worker, self.outbox.sent, self.recorded)
        self._send(FinalCounts.TYPE, final.to_wire())

    def stop(self) -> None:
        """Stop pacing and send whatever records are still buffered (test stop, quit)."""
        for g in self._greenlets:
            if g is not gevent.getcurrent():
                g.kill(block=False)
        self._greenlets = []
        try:
            self.outbox.flush()
        except Exception:
            log.exception("final record flush failed")
        self.outbox.stop()
