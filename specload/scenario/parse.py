"""YAML (or dict) → validated ``Scenario``; every problem is one ``ConfigError`` line.

Public entry points:

- ``load_scenario(path, overrides=None) -> Scenario``: read a YAML file with ``safe_load``,
  apply ``overrides`` (a dict whose keys may be dotted paths, e.g.
  ``{"steps": [1, 2], "prompts.synthetic.count": 10}``), validate, fill defaults.
- ``parse_scenario(raw, file=..., base_dir=...) -> Scenario``: the same from an already
  parsed dict (e.g. ``Scenario.to_dict()`` shipped to a Locust worker).

Errors read ``FILE: key.path: problem (expected ...)`` and carry ``file`` and ``path``
attributes. Unknown keys are errors (a typo must not silently fall back to a default).
YAML syntax errors name line and column. Relative prompt files resolve against the
scenario file's directory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from specload.core.errors import ConfigError
from specload.core.slo import EXPECTED_DURATION, duration_s, slo_metrics
from specload.scenario.conversation import parse_conversation
from specload.scenario.keys import unknown_key
from specload.scenario.lengths import parse_length
from specload.scenario.schema import (
    ARRIVALS,
    CLIENTS,
    INTERLEAVE_ORDERS,
    ContractSpec,
    InterleaveSpec,
    PromptSpec,
    Scenario,
)

__all__ = ["apply_overrides", "load_scenario", "parse_scenario"]

_TOP_KEYS = {
    "name",
    "description",
    "model",
    "temperature",
    "max_tokens",
    "min_tokens",
    "ignore_eos",
    "stop",
    "extra_body",
    "arrival",
    "burstiness",
    "steps",
    "step_duration_s",
    "warmup_s",
    "repeats",
    "replicates",
    "max_concurrency",
    "metrics_interval_s",
    "request_timeout_s",
    "seed",
    "client",
    "record_itl",
    "stream",
    "prompts",
    "contract",
    "slo",
    "class_bounds",
    "conversation",
    "trace",
    "trace_speedup",
    "trace_info",
    "source",
    "interleave",
}
#: Keys a scenario read back from ``to_dict`` carries (a worker's copy, run.json): accepted,
#: never offered to a person as an expected key.
_INTERNAL_KEYS = frozenset({"trace_info", "source"})
_INTERLEAVE_KEYS = {"blocks", "block_warmup_s", "seed", "order"}
_SYNTH_KEYS = {"input_tokens", "shared_prefix_tokens", "repetition", "count", "exact_tokens"}
_CONTRACT_KEYS = {"json", "required_fields", "tools"}
_MAX_STEPS = 1000


class _Reader:
    """Typed access to a raw mapping that raises ``ConfigError`` with the key path."""

    def __init__(self, file: str) -> None:
        self.file = file

    def fail(self, path: str, problem: str) -> ConfigError:
        return ConfigError(problem, file=self.file, path=path or None)

    def mapping(self, value: Any, path: str, allowed: set[str]) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(path, f"got {_kind(value)} (expected a mapping)")
        for key in value:
            if key not in allowed:
                where = f"{path}.{key}" if path else str(key)
                raise self.fail(where, unknown_key(str(key), allowed - _INTERNAL_KEYS))
        return dict(value)

    def number(
        self,
        value: Any,
        path: str,
        *,
        lo: float | None = None,
        lo_open: bool = False,
        hi: float | None = None,
    ) -> float:
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        if numeric and isinstance(value, int) and abs(value) > 2**53:
            numeric = False  # a 400-digit integer overflows math.isfinite (OverflowError)
        if not numeric or not math.isfinite(value):
            raise self.fail(path, f"got {_kind(value)} (expected a number)")
        if lo is not None and (value < lo or (lo_open and value == lo)):
            rel = ">" if lo_open else ">="
            raise self.fail(path, f"got {value} (expected a number {rel} {lo:g})")
        if hi is not None and value > hi:
            raise self.fail(path, f"got {value} (expected a number <= {hi:g})")
        return float(value)

    def integer(self, value: Any, path: str, *, lo: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"got {_kind(value)} (expected an integer)")
        if lo is not None and value < lo:
            raise self.fail(path, f"got {value} (expected an integer >= {lo})")
        return value

    def boolean(self, value: Any, path: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(path, f"got {_kind(value)} (expected true or false)")
        return value

    def string(self, value: Any, path: str, *, choices: tuple[str, ...] | None = None) -> str:
        if not isinstance(value, str):
            raise self.fail(path, f"got {_kind(value)} (expected a string)")
        if choices is not None and value not in choices:
            raise self.fail(path, f"got {value!r} (expected one of: {', '.join(choices)})")
        return value

    def strings(self, value: Any, path: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.fail(path, f"got {_kind(value)} (expected a list of strings)")
        return tuple(self.string(v, f"{path}[{i}]") for i, v in enumerate(value))


def _kind(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return f"boolean {value}"
    if isinstance(value, (int, float)):
        return f"number {value}" if abs(value) < 1e30 else "a very large number"
    if isinstance(value, str):
        return f"string {value!r}" if len(value) < 40 else "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a mapping"
    return type(value).__name__


def load_scenario(path: str | Path, overrides: dict[str, Any] | None = None) -> Scenario:
    """Read, override, validate and default a scenario YAML file."""
    p = Path(path)
    file = str(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("file not found (expected a scenario YAML file)", file=file) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"cannot read ({exc.__class__.__name__}; expected a UTF-8 text file)", file=file
        ) from None
    try:
        raw = yaml.safe_load(text)
    except ValueError as exc:  # e.g. an integer of more than 4300 digits (int() refuses it)
        raise ConfigError(
            f"unreadable value ({str(exc)[:80]}; expected valid YAML)", file=file
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"{where}{problem} (expected valid YAML)", file=file) from None
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"top level is {_kind(raw)} (expected a mapping)", file=file)
    raw.setdefault("name", p.stem)
    if overrides:
        raw = apply_overrides(raw, overrides, file)
    return parse_scenario(raw, file=file, base_dir=p.resolve().parent)


def apply_overrides(raw: dict[str, Any], overrides: dict[str, Any], file: str) -> dict[str, Any]:
    """Set dotted-path keys (``prompts.synthetic.count``) in a copy of ``raw``."""
    import copy

    out = copy.deepcopy(raw)
    for dotted, value in overrides.items():
        node = out
        parts = str(dotted).split(".")
        for i, part in enumerate(parts[:-1]):
            nxt = node.get(part)
            if nxt is None:
                nxt = node[part] = {}
            if not isinstance(nxt, dict):
                where = ".".join(parts[: i + 1])
                raise ConfigError(
                    f"override {dotted!r} goes through {_kind(nxt)} (expected a mapping)",
                    file=file,
                    path=where,
                )
            node = nxt
        node[parts[-1]] = value
    return out


def parse_scenario(
    raw: Mapping[str, Any], *, file: str = "<scenario>", base_dir: Path | None = None
) -> Scenario:
    """Validate a raw scenario mapping and build the ``Scenario`` (defaults filled)."""
    r = _Reader(file)
    d = r.mapping(raw, "", _TOP_KEYS)
    if "steps" not in d:
        raise r.fail("steps", "missing (expected a list of QPS values or {from, to, factor})")
    kw: dict[str, Any] = {"name": r.string(d.get("name", "scenario"), "name")}
    kw["concurrency_steps"] = _concurrency_steps(r, d["steps"])
    qps = _qps_entries(d["steps"])
    if qps == [] and kw["concurrency_steps"]:
        # alone only in an interleaved sweep's block of {concurrency: N} (it carries
        # ``interleave``): compare's ladder, crossover and verdict need a QPS step
        if "interleave" not in d:
            raise r.fail("steps", "only closed-loop steps (expected at least one QPS value too)")
        kw["steps"] = ()
    else:
        kw["steps"] = _steps(r, qps)
    _sampling(r, d, kw)
    _load_shape(r, d, kw)
    if kw["arrival"] == "trace":
        _trace(r, d, kw, base_dir)
    else:
        for key in ("trace", "trace_speedup"):
            if key in d:
                raise r.fail(key, "applies to arrival: trace only (expected arrival: trace)")
        kw["prompts"] = _prompts(r, d.get("prompts"), base_dir)
    kw["contract"] = _contract(r, d.get("contract"))
    kw["slo"] = _slo(r, d.get("slo"))
    kw["class_bounds"] = _class_bounds(r, d.get("class_bounds"))
    if d.get("conversation") is not None:
        if kw["arrival"] == "trace":
            raise r.fail("conversation", "not with arrival: trace (a trace lists single requests)")
        kw["conversation"] = parse_conversation(d["conversation"], r.fail)
    if d.get("interleave") is not None:
        kw["interleave"] = _interleave(r, d["interleave"])
    if d.get("source") is not None:
        kw["source"] = r.string(d["source"], "source")
    elif file and not file.startswith("<"):
        kw["source"] = file
    return Scenario(**kw)


def _interleave(r: _Reader, value: Any) -> InterleaveSpec:
    """``interleave: {blocks, block_warmup_s, seed, order}`` (``specload sweep --interleave``)."""
    d = r.mapping(value, "interleave", _INTERLEAVE_KEYS)
    base = InterleaveSpec()
    seed = d.get("seed")  # block_warmup_s: None (absent or null) is derived per block
    return InterleaveSpec(
        blocks=r.integer(d.get("blocks", base.blocks), "interleave.blocks", lo=2),
        block_warmup_s=None
        if d.get("block_warmup_s") is None
        else r.number(d["block_warmup_s"], "interleave.block_warmup_s", lo=0.0),
        seed=None if seed is None else r.integer(seed, "interleave.seed", lo=0),
        order=r.string(d.get("order", base.order), "interleave.order", choices=INTERLEAVE_ORDERS),
    )


def _sampling(r: _Reader, d: dict[str, Any], kw: dict[str, Any]) -> None:
    """What the server is asked: model, sampling, output length, stop, extra body."""
    if d.get("model") is not None:
        kw["model"] = r.string(d["model"], "model")
    if "description" in d:
        kw["description"] = r.string(d["description"] or "", "description")
    kw["temperature"] = r.number(d.get("temperature", 0.0), "temperature", lo=0.0, hi=2.0)
    kw["max_tokens"], dist = parse_length(d.get("max_tokens", 256), "max_tokens", r.fail)
    kw["max_tokens_dist"] = dist
    top = dist.max if dist is not None else kw["max_tokens"]  # min_tokens follows each draw
    kw["ignore_eos"] = r.boolean(d.get("ignore_eos", True), "ignore_eos")
    default_min = top if kw["ignore_eos"] else None
    min_tokens = d.get("min_tokens", default_min)
    if min_tokens is not None:
        min_tokens = r.integer(min_tokens, "min_tokens", lo=0)
        if min_tokens > top:
            raise r.fail("min_tokens", f"got {min_tokens} (expected <= max_tokens {top})")
    kw["min_tokens"] = min_tokens
    if d.get("stop") is not None:
        stop = d["stop"]
        kw["stop"] = (r.string(stop, "stop"),) if isinstance(stop, str) else r.strings(stop, "stop")
    if d.get("extra_body") is not None:
        if not isinstance(d["extra_body"], Mapping):
            raise r.fail(
                "extra_body",
                f"got {_kind(d['extra_body'])} (expected a mapping of extra request body fields)",
            )
        kw["extra_body"] = dict(_json_value(r, d["extra_body"], "extra_body"))
    kw["stream"] = r.boolean(d.get("stream", True), "stream")
    kw["record_itl"] = r.boolean(d.get("record_itl", True), "record_itl")
    kw["client"] = r.string(d.get("client", "fast"), "client", choices=CLIENTS)


def _load_shape(r: _Reader, d: dict[str, Any], kw: dict[str, Any]) -> None:
    """How load is offered: arrivals, step timing, repeats, concurrency cap, seed."""
    kw["arrival"] = r.string(d.get("arrival", "poisson"), "arrival", choices=ARRIVALS)
    if "burstiness" in d:
        b = r.number(d["burstiness"], "burstiness", lo=0.0, lo_open=True)
        if kw["arrival"] != "gamma" and b != 1.0:  # 1 is every process's own shape: harmless
            raise r.fail(
                "burstiness",
                f"applies to arrival: gamma only (arrival is {kw['arrival']!r}; expected "
                "arrival: gamma with burstiness: a number > 0)",
            )
        kw["burstiness"] = b
    kw["step_duration_s"] = r.number(
        d.get("step_duration_s", 60.0), "step_duration_s", lo=0.0, lo_open=True
    )
    kw["warmup_s"] = r.number(d.get("warmup_s", 10.0), "warmup_s", lo=0.0)
    kw["repeats"] = r.integer(d.get("repeats", 1), "repeats", lo=1)
    kw["replicates"] = r.integer(d.get("replicates", 1), "replicates", lo=1)
    kw["max_concurrency"] = r.integer(d.get("max_concurrency", 256), "max_concurrency", lo=1)
    kw["metrics_interval_s"] = r.number(
        d.get("metrics_interval_s", 5.0), "metrics_interval_s", lo=0.0, lo_open=True
    )
    kw["request_timeout_s"] = r.number(
        d.get("request_timeout_s", 120.0), "request_timeout_s", lo=0.0, lo_open=True
    )
    kw["seed"] = r.integer(d.get("seed", 0), "seed", lo=0)


def _is_closed(v: Any) -> bool:
    return isinstance(v, Mapping) and "concurrency" in v


def _qps_entries(value: Any) -> Any:
    """The steps list without its ``{concurrency: N}`` entries (those are closed-loop)."""
    if isinstance(value, list):
        return [v for v in value if not _is_closed(v)]
    return value


def _concurrency_steps(r: _Reader, value: Any) -> tuple[int, ...]:
    """``{concurrency: N}`` entries of the steps list: closed-loop steps, N in flight."""
    if not isinstance(value, list):
        return ()
    out = []
    for i, v in enumerate(value):
        if _is_closed(v):
            m = r.mapping(v, f"steps[{i}]", {"concurrency"})
            out.append(r.integer(m["concurrency"], f"steps[{i}].concurrency", lo=1))
    return tuple(out)


def _steps(r: _Reader, value: Any) -> tuple[float, ...]:
    """An explicit QPS list, or ``{from, to, factor}`` (geometric) / ``{from, to, by}``."""
    if isinstance(value, list):
        if not value:
            raise r.fail("steps", "empty list (expected at least one QPS value)")
        return tuple(r.number(v, f"steps[{i}]", lo=0.0, lo_open=True) for i, v in enumerate(value))
    if not isinstance(value, Mapping):
        raise r.fail(
            "steps", f"got {_kind(value)} (expected a list of QPS values or {{from, to, factor}})"
        )
    m = r.mapping(value, "steps", {"from", "to", "factor", "by"})
    for key in ("from", "to"):
        if key not in m:
            raise r.fail(f"steps.{key}", "missing (expected a number > 0)")
    lo = r.number(m["from"], "steps.from", lo=0.0, lo_open=True)
    hi = r.number(m["to"], "steps.to", lo=lo)
    if ("factor" in m) == ("by" in m):
        raise r.fail("steps", "needs exactly one of factor (geometric) or by (linear)")
    if "factor" in m:
        factor = r.number(m["factor"], "steps.factor", lo=1.0, lo_open=True)
        out = _series(lo, hi, lambda q: q * factor)
    else:
        by = r.number(m["by"], "steps.by", lo=0.0, lo_open=True)
        out = _series(lo, hi, lambda q: q + by)
    if len(out) > _MAX_STEPS:
        raise r.fail("steps", f"expands to more than {_MAX_STEPS} steps (expected fewer)")
    if out[-1] < hi * (1 - 1e-9):
        out.append(hi)
    return tuple(out)


def _series(lo: float, hi: float, nxt: Callable[[float], float]) -> list[float]:
    """``lo, nxt(lo), ...`` while within ``hi`` (stops past ``_MAX_STEPS``)."""
    out = [lo]
    while nxt(out[-1]) <= hi * (1 + 1e-9) and len(out) <= _MAX_STEPS:
        out.append(round(nxt(out[-1]), 9))
    return out


def _prompts(r: _Reader, value: Any, base_dir: Path | None) -> PromptSpec:
    if value is None:
        return PromptSpec()
    m = r.mapping(value, "prompts", {"synthetic", "file", "count"})
    if ("synthetic" in m) == ("file" in m):
        raise r.fail("prompts", "needs exactly one of synthetic or file")
    if "file" in m:
        name = r.string(m["file"], "prompts.file")
        path = Path(name)
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        if not path.is_file():
            raise r.fail(
                "prompts.file",
                f"{name!r} not found (expected a JSONL file of "
                '{"messages": [...]} relative to the scenario)',
            )
        count = r.integer(m.get("count", 0), "prompts.count", lo=0)
        if base_dir is not None:  # read from a file here; a worker's copy reads no file
            _check_prompt_file(str(path.resolve()), count)
        return PromptSpec(kind="file", file=str(path.resolve()), count=count, input_tokens=0)
    if "count" in m:
        raise r.fail(
            "prompts.count", "belongs inside prompts.synthetic (expected prompts.synthetic.count)"
        )
    s = r.mapping(m["synthetic"] or {}, "prompts.synthetic", _SYNTH_KEYS)
    base = "prompts.synthetic"
    inp, inp_dist = parse_length(s.get("input_tokens", 512), f"{base}.input_tokens", r.fail)
    shortest = inp_dist.min if inp_dist is not None and inp_dist.dist != "fixed" else inp
    prefix = r.integer(s.get("shared_prefix_tokens", 0), f"{base}.shared_prefix_tokens", lo=0)
    if prefix >= shortest:
        raise r.fail(
            f"{base}.shared_prefix_tokens",
            f"got {prefix} (expected fewer than input_tokens {shortest}"
            + (", the distribution's min)" if shortest != inp else ")"),
        )
    rep = r.number(s.get("repetition", 0.0), f"{base}.repetition", lo=0.0, hi=1.0)
    count = r.integer(s.get("count", 200), f"{base}.count", lo=1)
    exact = r.boolean(s.get("exact_tokens", False), f"{base}.exact_tokens")
    return PromptSpec(
        kind="synthetic",
        input_tokens=inp,
        shared_prefix_tokens=prefix,
        repetition=rep,
        count=count,
        exact_tokens=exact,
        input_dist=inp_dist,
    )


def _check_prompt_file(file: str, count: int) -> None:
    """Read the prompt file as the run will, so a broken line is one ``ConfigError`` (file,
    line, what was expected) before any traffic, not a failed run after it started."""
    from specload.scenario.prompt_files import read_prompt_file

    try:
        read_prompt_file(file, count)
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise ConfigError(f"cannot read ({why}; expected a UTF-8 prompt file)", file=file) from None


def _trace(r: _Reader, d: dict[str, Any], kw: dict[str, Any], base_dir: Path | None) -> None:
    """``arrival: trace``: the trace file, its speedup, and the prompts it implies; a scenario
    read back from ``to_dict`` (a worker's copy) carries ``trace_info`` and reads no file."""
    from specload.scenario.trace import read_trace

    if "trace" not in d:
        raise r.fail("trace", "missing (arrival: trace needs trace: PATH, a JSONL trace file)")
    if d.get("prompts") is not None:
        raise r.fail("prompts", "not with arrival: trace (the prompts come from the trace)")
    name = r.string(d["trace"], "trace")
    path = Path(name)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    kw["trace"] = str(path.resolve()) if base_dir is not None else name
    kw["trace_speedup"] = r.number(
        d.get("trace_speedup", 1.0), "trace_speedup", lo=0.0, lo_open=True
    )
    info = d.get("trace_info")
    if isinstance(info, Mapping):
        count, span, fmt = int(info["count"]), float(info["span_s"]), str(info["format"])
    else:
        if not path.is_file():
            raise r.fail("trace", f"{name!r} not found (expected a JSONL trace file)")
        trace = read_trace(str(path))
        count, span, fmt = len(trace.entries), trace.span_s, trace.format
    kw["trace_info"] = {"format": fmt, "count": count, "span_s": span}
    shortest = span / (max(kw["steps"]) * kw["trace_speedup"])
    if kw["warmup_s"] >= shortest:
        raise r.fail(
            "warmup_s",
            f"got {kw['warmup_s']:g} (expected less than the fastest replay, {shortest:.3g} s)",
        )
    kw["prompts"] = PromptSpec(kind="trace", count=count, input_tokens=0)  # Scenario.trace


def _class_bounds(r: _Reader, value: Any) -> tuple[int, ...]:
    """``class_bounds: [512, 2048]``: prompt-length bounds of compare's per-class answer."""
    if value is None or value == []:  # [] is to_dict's "none"
        return ()
    if not isinstance(value, list):
        raise r.fail(
            "class_bounds", f"got {value!r} (expected a list of prompt lengths, e.g. [512, 2048])"
        )
    out = tuple(r.integer(v, f"class_bounds[{i}]", lo=1) for i, v in enumerate(value))
    if list(out) != sorted(set(out)):
        raise r.fail("class_bounds", f"got {list(out)} (expected increasing prompt lengths)")
    return out


def _slo(r: _Reader, value: Any) -> dict[str, str]:
    """``slo: {tpot_p95: 25ms, ...}``: each key a latency percentile, each value a duration."""
    if value is None:
        return {}
    m = r.mapping(value, "slo", set(slo_metrics()))
    for key, limit in m.items():
        if duration_s(limit) is None:
            raise r.fail(f"slo.{key}", f"got {limit!r} (expected {EXPECTED_DURATION})")
    return {str(k): str(v) for k, v in m.items()}


def _contract(r: _Reader, value: Any) -> ContractSpec | None:
    if value is None:
        return None
    m = r.mapping(value, "contract", _CONTRACT_KEYS)
    want_json = r.boolean(m.get("json", False), "contract.json")
    fields = r.strings(m.get("required_fields") or [], "contract.required_fields")
    if fields and not want_json:
        raise r.fail(
            "contract.required_fields",
            "needs contract.json: true (fields are checked in the parsed JSON output)",
        )
    tools = m.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not all(isinstance(t, Mapping) for t in tools):
            raise r.fail(
                "contract.tools", f"got {_kind(tools)} (expected a list of OpenAI tool definitions)"
            )
        _json_value(r, tools, "contract.tools")
        tools = tuple(dict(t) for t in tools)
    return ContractSpec(json=want_json, required_fields=fields, tools=tools)


def _json_value(r: _Reader, value: Any, path: str, parents: tuple[int, ...] = ()) -> Any:
    """``value`` if it is plain JSON (it goes into every request body and run.json): string
    keys, finite numbers, no YAML dates or bytes, no self-referencing anchors."""
    if isinstance(value, (Mapping, list)):
        if id(value) in parents or len(parents) > 50:
            raise r.fail(path, "refers to itself or nests too deep (expected plain JSON)")
        inner = (*parents, id(value))
        items = value.items() if isinstance(value, Mapping) else enumerate(value)
        for key, item in items:
            if isinstance(value, Mapping) and not isinstance(key, str):
                raise r.fail(f"{path}.{key}", f"key is {_kind(key)} (expected a string key)")
            _json_value(
                r, item, f"{path}.{key}" if isinstance(value, Mapping) else f"{path}[{key}]", inner
            )
    elif isinstance(value, float) and not math.isfinite(value):
        raise r.fail(path, f"got {value} (expected a finite number: JSON has no NaN or inf)")
    elif isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**63:
        raise r.fail(path, "got a very large integer (expected one that fits in 64 bits)")
    elif value is not None and not isinstance(value, (str, int, float, bool)):
        raise r.fail(path, f"got {_kind(value)} (expected a JSON value)")
    return value
