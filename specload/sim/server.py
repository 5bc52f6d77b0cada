"""The OpenAI-compatible HTTP front of the simulator (aiohttp on asyncio).

Routes mirror vLLM's server: ``/v1/chat/completions`` and ``/v1/completions`` (streamed and
not), ``/v1/models``, ``/version``, ``/health``, ``/metrics``, ``/tokenize``,
``/reset_prefix_cache``, plus the simulator's own ``/debug/requests[/{id}]`` (ground truth),
``/debug/faults`` (GET/POST), ``/debug/counts`` (what the endpoint faults met) and ``/debug/host`` (this start's host speed, ``host.py``).
Handlers validate, build an engine ``Request`` with a sink, hand it to the engine loop and
wait for its last token.
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

from specload.sim.engine import Engine, EngineConfig
from specload.sim.faults import Faults
from specload.sim.groundtruth import GroundTruth, regime_truth
from specload.sim.host import HostDraw
from specload.sim.kvcache import block_hashes
from specload.sim.loop import EngineLoop
from specload.sim.metrics import SimMetrics
from specload.sim.profiles import Profile
from specload.sim.protocol import (
    SYSTEM_FINGERPRINT,
    ApiError,
    ChunkFormat,
    GenRequest,
    error_body,
    parse_generation,
    usage_dict,
)
from specload.sim.request import Request
from specload.sim.sinks import BufferSink, StreamSink
from specload.sim.spec import NgramIndex, SpecConfig
from specload.sim.textgen import OutputText
from specload.sim.tokenizer import chat_tokens, token_ids, tokenize

__all__ = ["SIM_VERSION", "SimSettings", "build_app"]

SIM_VERSION = "0.26.0+specload.sim"
_JSON = "application/json"


@dataclass
class SimSettings:
    """Everything ``specload sim`` was started with."""

    profile: Profile
    served_model_names: tuple[str, ...] = ("specload-sim",)
    spec: SpecConfig | None = None
    prefix_caching: bool = False
    max_num_seqs: int | None = None
    max_model_len: int | None = None
    num_gpu_blocks: int | None = None
    seed: int = 0
    ground_truth: bool = False
    ground_truth_max: int = 10_000
    faults: Faults = field(default_factory=Faults)
    host: HostDraw = field(default_factory=HostDraw)


class SimState:
    """The app's shared objects: engine, its loop, metrics, faults, ground truth."""

    def __init__(self, s: SimSettings) -> None:
        self.settings = s
        self.metrics = SimMetrics(
            s.served_model_names[0],
            s.spec.max_k if s.spec else 0,
            cache_config={
                "block_size": str(s.profile.block_size),
                "cache_dtype": "auto",
                "enable_prefix_caching": str(bool(s.prefix_caching)),
            },
        )
        self.engine = Engine(
            EngineConfig(
                s.profile,
                s.spec,
                s.prefix_caching,
                s.max_num_seqs,
                s.max_model_len,
                s.num_gpu_blocks,
                s.seed,
                host=s.host,
            ),
            self.metrics,
        )
        self.loop = EngineLoop(self.engine)
        self.truth = GroundTruth(s.ground_truth_max) if s.ground_truth else None
        self.faults = s.faults
        self.rng = random.Random(s.seed ^ 0x5EED)
        self.created = int(time.time())
        #: What the endpoint faults met (``GET /debug/counts``): tests hold runs against it.
        self.counts = {"tokenize_requests": 0, "tokenize_resets": 0, "metrics_requests": 0}
        self.started_at = time.time()  # reset when the engine loop starts (the host's t = 0)


def _json(obj: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(obj), status=status, content_type=_JSON)


def _error(status: int, message: str, param: str | None = None) -> web.Response:
    return web.Response(body=error_body(status, message, param), status=status, content_type=_JSON)


def _engine_request(st: SimState, g: GenRequest, rid: str, sink: Any) -> Request:
    s = st.settings
    seed = g.seed if g.seed is not None else s.seed
    text = OutputText(g.prompt, seed)
    max_len = st.engine.max_model_len
    max_tokens = g.max_tokens if g.max_tokens is not None else max_len - len(g.prompt)
    if g.ignore_eos:
        target = max_tokens
    else:
        target = min(max_tokens, max(text.natural_length(), g.min_tokens))
    req = Request(
        rid=rid,
        prompt=g.prompt,
        text=text,
        target_len=target,
        finish_reason="length" if target >= max_tokens else "stop",
        sink=sink,
        arrival=asyncio.get_running_loop().time(),
        stop=g.stop,
    )
    if s.prefix_caching:
        req.block_hashes = block_hashes(g.prompt, st.engine.kv.block_size)
    if s.spec is not None and s.spec.is_ngram:
        req.ngram = NgramIndex(g.prompt, s.spec.lookup_min, s.spec.lookup_max)
    return req


async def _generate(request: web.Request, chat: bool) -> web.StreamResponse:
    st: SimState = request.app["sim"]
    rid = request.headers.get("X-Request-Id") or uuid.uuid4().hex
    arrived, arrived_mono = time.time(), time.monotonic()  # the truth's anchor
    try:
        g = parse_generation(
            await request.read(), chat, st.settings.served_model_names, st.engine.max_model_len
        )
    except ApiError as exc:
        return _error(exc.status, exc.message, exc.param)
    kv_tokens = st.engine.kv.num_blocks * st.engine.kv.block_size
    if len(g.prompt) + (g.max_tokens or 1) > kv_tokens:
        return _error(
            400,
            f"prompt plus max_tokens ({len(g.prompt) + (g.max_tokens or 1)}) "
            f"exceeds the KV cache ({kv_tokens} tokens)",
            "max_tokens",
        )
    status = st.faults.request_error(st.rng)
    if status is not None:
        msg = "Too many requests (simulated)" if status == 429 else "Internal error (simulated)"
        return _error(status, msg)
    truth = (
        st.truth.start(rid, arrived, len(g.prompt), arrived_mono) if st.truth is not None else None
    )
    resp_id = ("chatcmpl-" if chat else "cmpl-") + rid
    if g.stream:
        return await _stream(request, st, g, rid, resp_id, truth)
    done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
    sink = BufferSink(done)
    req = _engine_request(st, g, rid, sink)
    st.loop.submit(req)
    try:
        await done
    finally:
        if not req.finished:
            st.loop.abort(req)
    text = "".join(sink.parts)
    if truth is not None:
        truth.chunk_times.append(truth.now())
        truth.chunk_tokens.append(req.generated)
        truth.cached_tokens = req.cached_tokens
    usage = usage_dict(
        len(g.prompt), req.generated, req.cached_tokens if st.settings.prefix_caching else None
    )
    resp = _json(
        _full_body(chat, resp_id, int(arrived), g.model, text, sink.finish, usage, req.stop_reason)
    )
    resp.headers["X-Request-Id"] = rid
    return resp


def _full_body(
    chat: bool,
    rid: str,
    created: int,
    model: str,
    text: str,
    finish: str,
    usage: dict[str, Any],
    stop_reason: str | None = None,
) -> dict[str, Any]:
    if chat:
        choice: dict[str, Any] = {
            "index": 0,
            "message": {
                "role": "assistant",
                "content": text,
                "refusal": None,
                "annotations": None,
                "audio": None,
                "function_call": None,
                "tool_calls": [],
                "reasoning_content": None,
            },
            "logprobs": None,
            "finish_reason": finish,
            "stop_reason": stop_reason,
        }
        obj = "chat.completion"
    else:
        choice = {
            "index": 0,
            "text": text,
            "logprobs": None,
            "finish_reason": finish,
            "stop_reason": stop_reason,
            "prompt_logprobs": None,
        }
        obj = "text_completion"
    return {
        "id": rid,
        "object": obj,
        "created": created,
        "model": model,
        "choices": [choice],
        "usage": usage,
        "system_fingerprint": SYSTEM_FINGERPRINT,
    }


async def _stream(
    request: web.Request, st: SimState, g: GenRequest, rid: str, resp_id: str, truth: Any
) -> web.StreamResponse:
    resp = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream; charset=utf-8",
            "Cache-Control": "no-cache",
            "X-Request-Id": rid,
        }
    )
    resp.enable_chunked_encoding()
    try:
        await resp.prepare(request)
        request.writer.send_headers()  # flush headers now: chunks go straight to the transport
    except ConnectionError:  # the client left before the first byte
        return resp
    transport = request.transport
    if transport is None or transport.is_closing():
        return resp
    loop = asyncio.get_running_loop()
    done: asyncio.Future[bool] = loop.create_future()
    fmt = ChunkFormat(g.chat, resp_id, int(time.time()), g.model)
    faults = (
        st.faults
        if st.faults.stream_active()
        and (st.faults.stream_fault_rate >= 1 or st.rng.random() < st.faults.stream_fault_rate)
        else None
    )
    holder: list[Request] = []

    def on_gone() -> None:
        if holder:
            st.loop.abort(holder[0])

    sink = StreamSink(
        transport, fmt, g.include_usage, st.settings.prefix_caching, truth, done, faults, on_gone
    )
    req = _engine_request(st, g, rid, sink)
    holder.append(req)
    if g.chat:
        sink.head = fmt.role()
    st.loop.submit(req)
    try:
        ok = await done
    finally:
        if not req.finished:
            st.loop.abort(req)
    if truth is not None:
        truth.cached_tokens = req.cached_tokens
    if ok:
        try:
            await resp.write_eof()
        except ConnectionError:
            pass
    return resp


async def chat_completions(request: web.Request) -> web.StreamResponse:
    return await _generate(request, chat=True)


async def completions(request: web.Request) -> web.StreamResponse:
    return await _generate(request, chat=False)


async def models(request: web.Request) -> web.Response:
    st: SimState = request.app["sim"]
    data = [
        {
            "id": name,
            "object": "model",
            "created": st.created,
            "owned_by": "vllm",
            "root": name,
            "parent": None,
            "max_model_len": st.engine.max_model_len,
            "permission": [_permission(st.created, i)],
        }
        for i, name in enumerate(st.settings.served_model_names)
    ]
    return _json({"object": "list", "data": data})


def _permission(created: int, i: int) -> dict[str, Any]:
    """vLLM's (OpenAI's legacy) ``model_permission`` object, as /v1/models lists it."""
    return {
        "id": f"modelperm-specload-sim-{i}",
        "object": "model_permission",
        "created": created,
        "allow_create_engine": False,
        "allow_sampling": True,
        "allow_logprobs": True,
        "allow_search_indices": False,
        "allow_view": True,
        "allow_fine_tuning": False,
        "organization": "*",
        "group": None,
        "is_blocking": False,
    }


async def version(request: web.Request) -> web.Response:
    return _json({"version": SIM_VERSION})


async def health(request: web.Request) -> web.Response:
    return web.Response(status=200)


async def metrics(request: web.Request) -> web.Response:
    st: SimState = request.app["sim"]
    st.counts["metrics_requests"] += 1
    if st.faults.metrics_delay_s:
        await asyncio.sleep(st.faults.metrics_delay_s)
    if st.faults.metrics_status is not None:
        return _error(st.faults.metrics_status, "metrics unavailable (fault switch)")
    return web.Response(
        body=st.metrics.render(),
        headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
    )


def _reset(request: web.Request) -> web.Response:
    """Close the connection with an RST (SO_LINGER 0): the client sees a reset, no answer."""
    transport = request.transport
    sock = transport.get_extra_info("socket") if transport is not None else None
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    if transport is not None:
        transport.abort()
    return web.Response(status=499)  # never reaches the client


async def tokenize_route(request: web.Request) -> web.Response:
    st: SimState = request.app["sim"]
    st.counts["tokenize_requests"] += 1
    every = st.faults.tokenize_reset_every
    if every and st.counts["tokenize_requests"] % every == 0:
        st.counts["tokenize_resets"] += 1
        await request.read()
        return _reset(request)
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError:
        return _error(400, "request body is not valid JSON")
    if not isinstance(body, dict):
        return _error(400, "request body must be a JSON object")
    model = body.get("model") or st.settings.served_model_names[0]
    if model not in st.settings.served_model_names:
        return _error(404, f"The model `{model}` does not exist.", "model")
    try:
        if "messages" in body:
            toks = chat_tokens(body["messages"], bool(body.get("add_generation_prompt", True)))
        elif isinstance(body.get("prompt"), str):
            toks = tokenize(body["prompt"])
        else:
            return _error(400, "give 'prompt' (string) or 'messages'", "prompt")
    except ValueError as exc:
        return _error(400, str(exc), "messages")
    out: dict[str, Any] = {
        "count": len(toks),
        "max_model_len": st.engine.max_model_len,
        "tokens": token_ids(toks),
        "token_strs": None,
    }
    if body.get("return_token_strs"):
        out["token_strs"] = toks
    return _json(out)


async def reset_prefix_cache(request: web.Request) -> web.Response:
    st: SimState = request.app["sim"]
    st.engine.reset_prefix_cache()
    return web.Response(status=200)


async def debug_requests(request: web.Request) -> web.Response:
    st: SimState = request.app["sim"]
    if st.truth is None:
        return _error(404, "ground truth is off; start the simulator with --ground-truth")
    return _json(st.truth.all())


async def debug_request(request: web.Request) -> web.Response:
    st: SimState = request.app["sim"]
    if st.truth is None:
        return _error(404, "ground truth is off; start the simulator with --ground-truth")
    rec = st.truth.get(request.match_info["request_id"])
    if rec is None:
        return _error(404, f"no ground truth for request {request.match_info['request_id']}")
    return _json(rec.to_dict())


async def debug_host(request: web.Request) -> web.Response:
    """This start's host (``--spec-overhead-scale``, ``--start-jitter``, ``--spec-regime``):
    what was drawn, and the regime's slow windows so far."""
    st: SimState = request.app["sim"]
    host = st.engine.host
    out = host.to_dict()
    now_s = asyncio.get_running_loop().time() - st.engine.t0
    w = out["slow_window"]
    if w is not None:
        w["start_at"] = st.started_at + w["start_s"]
        w["end_at"] = st.started_at + w["end_s"]
    out.update(
        speculative=st.settings.spec is not None,
        started_at=st.started_at,
        uptime_s=now_s,
        current_scale=host.spec_scale(now_s),
        in_slow_window=w is not None and w["start_s"] <= now_s < w["end_s"],
        spec_regime=regime_truth(host.regime, st.started_at, now_s),
    )
    return _json(out)


async def get_counts(request: web.Request) -> web.Response:
    return _json(request.app["sim"].counts)


async def get_faults(request: web.Request) -> web.Response:
    return _json(request.app["sim"].faults.to_dict())


async def post_faults(request: web.Request) -> web.Response:
    st: SimState = request.app["sim"]
    try:
        body = orjson.loads(await request.read())
        if not isinstance(body, dict):
            raise ValueError("body must be a JSON object of fault settings")  # noqa: TRY004
        st.faults.update(body)
    except (orjson.JSONDecodeError, ValueError) as exc:
        return _error(400, str(exc))
    return _json(st.faults.to_dict())


def build_app(settings: SimSettings) -> web.Application:
    """The aiohttp application; the engine loop starts and stops with it."""
    app = web.Application(client_max_size=64 * 1024 * 1024)
    state = SimState(settings)
    app["sim"] = state

    async def on_startup(app: web.Application) -> None:
        state.started_at = time.time()
        state.loop.start()

    async def on_cleanup(app: web.Application) -> None:
        await state.loop.stop()

    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    r = app.router
    r.add_post("/v1/chat/completions", chat_completions)
    r.add_post("/v1/completions", completions)
    r.add_get("/v1/models", models)
    r.add_get("/version", version)
    r.add_get("/health", health)
    r.add_get("/metrics", metrics)
    r.add_post("/tokenize", tokenize_route)
    r.add_post("/reset_prefix_cache", reset_prefix_cache)
    r.add_get("/debug/requests", debug_requests)
    r.add_get("/debug/requests/{request_id}", debug_request)
    r.add_get("/debug/faults", get_faults)
    r.add_get("/debug/counts", get_counts)
    r.add_get("/debug/host", debug_host)
    r.add_post("/debug/faults", post_faults)
    return app
