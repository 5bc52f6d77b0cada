"""OpenAI/vLLM wire shapes: request validation and byte templates for responses.

Streaming bodies are built from per-request byte templates (``ChunkFormat``) so a content chunk
costs one ``orjson.dumps`` of the text and a concatenation, not a dict per token. Shapes follow
vLLM's ``/v1/chat/completions`` and ``/v1/completions``: a role-only first chunk (chat), one
chunk per engine step, the last content chunk carrying ``finish_reason``, an optional
``choices: []`` usage chunk, then ``data: [DONE]``. Errors are vLLM's
``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from specload.sim.tokenizer import chat_tokens, tokenize

__all__ = [
    "SYSTEM_FINGERPRINT",
    "ApiError",
    "ChunkFormat",
    "GenRequest",
    "error_body",
    "parse_generation",
    "usage_dict",
]

#: vLLM's ``system_fingerprint`` (``vllm-<version>-<hash>``), sent with the usage chunk.
SYSTEM_FINGERPRINT = "vllm-0.26.0-specload-sim"

_ERROR_TYPES = {
    400: "BadRequestError",
    404: "NotFoundError",
    429: "RateLimitError",
    500: "InternalServerError",
    503: "ServiceUnavailableError",
}


class ApiError(Exception):
    """An error the server answers with ``status`` and vLLM's error object."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param = status, message, param


def error_body(status: int, message: str, param: str | None = None) -> bytes:
    err = {
        "message": message,
        "type": _ERROR_TYPES.get(status, "Error"),
        "param": param,
        "code": status,
    }
    return orjson.dumps({"error": err})


@dataclass(slots=True)
class GenRequest:
    """A validated generation request (chat or completion)."""

    chat: bool
    model: str
    prompt: list[str]
    max_tokens: int | None
    min_tokens: int
    ignore_eos: bool
    stop: tuple[str, ...]
    temperature: float
    seed: int | None
    stream: bool
    include_usage: bool


def _int(body: dict[str, Any], key: str, lo: int) -> int | None:
    v = body.get(key)
    if v is None:
        return None
    if not isinstance(v, int) or isinstance(v, bool) or v < lo:
        raise ApiError(400, f"{key} must be an integer >= {lo}", key)
    return v


def _stop(body: dict[str, Any]) -> tuple[str, ...]:
    stop = body.get("stop")
    if stop is None:
        return ()
    if isinstance(stop, str):
        return (stop,) if stop else ()
    if isinstance(stop, list) and all(isinstance(s, str) for s in stop):
        return tuple(s for s in stop if s)
    raise ApiError(400, "stop must be a string or a list of strings", "stop")


def _prompt(body: dict[str, Any], chat: bool) -> list[str]:
    try:
        if chat:
            if "messages" not in body:
                raise ApiError(400, "messages: field required", "messages")
            return chat_tokens(body["messages"], bool(body.get("add_generation_prompt", True)))
    except ValueError as exc:
        raise ApiError(400, str(exc), "messages") from None
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if not isinstance(prompt, str):
        raise ApiError(400, "prompt must be a string", "prompt")
    return tokenize(prompt)


def parse_generation(raw: bytes, chat: bool, models: tuple[str, ...], max_len: int) -> GenRequest:
    """Validate a request body; ``ApiError`` (400/404) says what is wrong."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise ApiError(400, "request body is not valid JSON") from None
    if not isinstance(body, dict):
        raise ApiError(400, "request body must be a JSON object")
    model = body.get("model") or models[0]
    if model not in models:
        raise ApiError(404, f"The model `{model}` does not exist.", "model")
    prompt = _prompt(body, chat)
    max_tokens = _int(body, "max_completion_tokens", 1) if chat else None
    if max_tokens is None:
        max_tokens = _int(body, "max_tokens", 1)
    if len(prompt) + (max_tokens or 1) > max_len or len(prompt) >= max_len:
        raise ApiError(
            400,
            f"This model's maximum context length is {max_len} tokens. However, you requested "
            f"{len(prompt) + (max_tokens or 0)} tokens ({len(prompt)} in the messages, "
            f"{max_tokens or 0} in the completion). Please reduce the length of the messages "
            "or completion.",
            "input_tokens" if chat else "prompt",
        )
    temperature = body.get("temperature", 1.0)
    if temperature is None:
        temperature = 1.0
    if not isinstance(temperature, (int, float)) or temperature < 0:
        raise ApiError(400, "temperature must be a number >= 0", "temperature")
    opts = body.get("stream_options") or {}
    if not isinstance(opts, dict):
        raise ApiError(400, "stream_options must be an object", "stream_options")
    if body.get("n", 1) != 1:
        raise ApiError(400, "the simulator supports n=1 only", "n")
    return GenRequest(
        chat=chat,
        model=model,
        prompt=prompt,
        max_tokens=max_tokens,
        min_tokens=_int(body, "min_tokens", 0) or 0,
        ignore_eos=bool(body.get("ignore_eos", False)),
        stop=_stop(body),
        temperature=float(temperature),
        seed=_int(body, "seed", -(2**63)),
        stream=bool(body.get("stream", False)),
        include_usage=bool(opts.get("include_usage", False)),
    )


def usage_dict(prompt: int, completion: int, cached: int | None) -> dict[str, Any]:
    u: dict[str, Any] = {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
    }
    if cached is not None:
        u["prompt_tokens_details"] = {"cached_tokens": cached}
    return u


class ChunkFormat:
    """Byte templates for one streamed response (chat or completions)."""

    __slots__ = ("chat", "head", "mid", "obj", "open_")

    def __init__(self, chat: bool, rid: str, created: int, model: str) -> None:
        self.chat = chat
        self.obj = "chat.completion.chunk" if chat else "text_completion"
        self.head = (
            b'data: {"id":'
            + orjson.dumps(rid)
            + b',"object":"'
            + self.obj.encode()
            + b'","created":'
            + str(created).encode()
            + b',"model":'
            + orjson.dumps(model)
            + b',"choices":'
        )
        self.open_ = b'[{"index":0,"delta":{"content":' if chat else b'[{"index":0,"text":'
        self.mid = (
            b'},"logprobs":null,"finish_reason":null}]}\n\n'
            if chat
            else b',"logprobs":null,"finish_reason":null,"stop_reason":null}]}\n\n'
        )

    def role(self) -> bytes:
        """vLLM's first chat chunk: role only, empty content."""
        return (
            self.head + b'[{"index":0,"delta":{"role":"assistant","content":""},'
            b'"logprobs":null,"finish_reason":null}]}\n\n'
        )

    def content(self, text: str) -> bytes:
        return self.head + self.open_ + orjson.dumps(text) + self.mid

    def final(self, text: str, finish: str, stop_reason: str | None = None) -> bytes:
        close = b"}" if self.chat else b""
        return (
            self.head + self.open_ + orjson.dumps(text) + close + b',"logprobs":null,'
            b'"finish_reason":"'
            + finish.encode()
            + b'","stop_reason":'
            + orjson.dumps(stop_reason)
            + b"}]}\n\n"
        )

    def usage(self, usage: dict[str, Any]) -> bytes:
        return (
            self.head
            + b'[],"usage":'
            + orjson.dumps(usage)
            + b',"system_fingerprint":"'
            + SYSTEM_FINGERPRINT.encode()
            + b'"}\n\n'
        )
