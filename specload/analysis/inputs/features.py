"""Which features a run's server had on: declared, read from the server, or unknown.

Advice that says "turn prefix caching off" must know the condition had prefix caching on;
guessing from a label is wrong: a label is a name the user chose (``candidate-build``), not
a list of features. In order of trust:

1. **Declared**: ``run.json`` ``condition`` as written by ``specload sweep`` (which knows the
   whole server command: without ``--speculative-config`` there is no speculation) or by
   ``specload run`` / the Locust plugin with ``--speculative-config JSON|off`` and
   ``--prefix-caching on|off``. ``condition.source`` says which fields were declared.
2. **Read from the server**: vLLM's ``/metrics`` (in ``metrics.jsonl``) exposes
   ``vllm:cache_config_info{enable_prefix_caching="True"|"False",...}``, and registers the
   ``vllm:spec_decode_*`` counters only when speculation is on.
3. **Unknown** otherwise; the advice then says nothing that depends on it.

A declaration that the server contradicts is kept, and the contradiction with it
(``Features.conflicts``: ``ServerSaysOtherwise``; the declaration may be a typo, the
server's view is a fact).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "DECLARED",
    "SERVER",
    "UNKNOWN",
    "FeatureConflict",
    "Features",
    "OtherFeatures",
    "ServerSaysOtherwise",
    "features_of",
    "role_of",
]

DECLARED, SERVER, UNKNOWN = "declared", "server", "unknown"
_SPEC_PREFIX = "vllm:spec_decode_num_drafts"
_CACHE_INFO = "vllm:cache_config_info"


@dataclass(frozen=True, slots=True)
class ServerSaysOtherwise:
    """A feature declared on (or off) that the server's /metrics show the other way: the
    spec_decode counters present or absent, ``enable_prefix_caching`` reported."""

    feature: Literal["speculative", "prefix_caching"]
    #: what run.json declared; the server's view is the opposite
    declared: bool


@dataclass(frozen=True, slots=True)
class OtherFeatures:
    """A run of a condition that ran with other features (speculation, prefix caching) than
    the condition's first run, whose features the condition takes."""

    #: the run directories' names
    run: str
    first: str


#: What contradicts a condition's features.
FeatureConflict = ServerSaysOtherwise | OtherFeatures


@dataclass(slots=True)
class Features:
    """``speculative``: the config (dict), True (on, config unknown), False (off) or None
    (unknown); ``prefix_caching``: True / False / None; ``source`` per field."""

    speculative: dict[str, Any] | bool | None
    prefix_caching: bool | None
    source: dict[str, str] = field(default_factory=dict)
    #: a declaration the server contradicts, a run of the condition that ran otherwise
    conflicts: list[FeatureConflict] = field(default_factory=list)

    @property
    def spec_on(self) -> bool | None:
        return None if self.speculative is None else bool(self.speculative)

    @property
    def known(self) -> bool:
        return self.speculative is not None and self.prefix_caching is not None

    def spec_config(self) -> dict[str, Any]:
        return self.speculative if isinstance(self.speculative, dict) else {}


def _declared(
    cond: dict[str, Any],
) -> tuple[dict[str, Any] | bool | None, bool | None, dict[str, str]]:
    """What run.json declares, and which fields were declared (older files have no source)."""
    spec, prefix = cond.get("speculative"), cond.get("prefix_caching")
    source = cond.get("source") if isinstance(cond.get("source"), dict) else None
    if source is not None:
        s_spec = DECLARED if source.get("speculative") == DECLARED else UNKNOWN
        s_pre = DECLARED if source.get("prefix_caching") == DECLARED else UNKNOWN
        spec_v: dict[str, Any] | bool | None = (spec or False) if s_spec == DECLARED else None
        return spec_v, (bool(prefix) if s_pre == DECLARED else None), {
            "speculative": s_spec, "prefix_caching": s_pre}  # fmt: skip
    # Before ``source`` existed: a config object was a declaration; null was ambiguous.
    spec_v = spec if isinstance(spec, dict) and spec else None
    pre_v = prefix if isinstance(prefix, bool) else None
    return (
        spec_v,
        pre_v,
        {
            "speculative": DECLARED if spec_v is not None else UNKNOWN,
            "prefix_caching": DECLARED if pre_v is not None else UNKNOWN,
        },
    )


def _server_view(metrics: list[dict[str, Any]]) -> tuple[bool | None, bool | None]:
    """(speculation on?, prefix caching on?) from the scrapes; None where it cannot tell."""
    keys: set[str] = set()
    for line in metrics:
        values = line.get("values")
        if isinstance(values, dict):
            keys.update(values)
    vllm = any(k.startswith("vllm:") for k in keys)
    spec = any(k.startswith(_SPEC_PREFIX) for k in keys) if vllm else None
    prefix = None
    for k in keys:
        if k.startswith(_CACHE_INFO + "{") and "enable_prefix_caching=" in k:
            value = k.split('enable_prefix_caching="', 1)[1].split('"', 1)[0]
            prefix = value.strip().lower() == "true"
            break
    return spec, prefix


def features_of(condition: dict[str, Any] | None, metrics: list[dict[str, Any]]) -> Features:
    """The run's features: its declaration (run.json's ``condition``), completed from the
    server's own metrics."""
    spec, prefix, source = _declared(condition or {})
    server_spec, server_prefix = _server_view(metrics)
    out = Features(spec, prefix, dict(source))
    if spec is None and server_spec is not None:
        out.speculative, out.source["speculative"] = server_spec, SERVER
    elif spec is not None and server_spec is not None and bool(spec) != server_spec:
        out.conflicts.append(ServerSaysOtherwise("speculative", bool(spec)))
    if prefix is None and server_prefix is not None:
        out.prefix_caching, out.source["prefix_caching"] = server_prefix, SERVER
    elif prefix is not None and server_prefix is not None and prefix != server_prefix:
        out.conflicts.append(ServerSaysOtherwise("prefix_caching", prefix))
    return out


def role_of(f: Features) -> str:
    """``baseline`` / ``prefix`` / ``spec`` / ``both``, or ``unknown`` when either feature is."""
    if not f.known:
        return UNKNOWN
    return {
        (False, False): "baseline",
        (False, True): "prefix",
        (True, False): "spec",
        (True, True): "both",
    }[(bool(f.speculative), bool(f.prefix_caching))]
