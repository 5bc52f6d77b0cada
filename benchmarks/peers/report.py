"""``benchmarks/results/peers.{md,json}``: the side-by-side table, capacity, goals, notes.

Everything here works on the rows ``truth.score`` made (plain dicts, also the JSON), so
``peers.py --render-only`` rewrites the Markdown from a saved JSON without measuring.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from peers.truth import sustained

__all__ = ["NOTES", "capacity", "goals", "write_results"]

SPECLOAD = "specload"

NOTES = (
    (
        "- **Like with like.** TTFT is first content token − send for all three (guidellm skips "
        "the role-only chunk; vLLM bench runs on `/v1/completions`, which has none — its chat "
        "backend counts the role-only chunk as the first token, which was wrong here while "
        "the simulator wrote it on arrival (since 10:00 UTC on 2026-11-29 it comes with the "
        "first token, as vLLM sends it). TPOT is (last − first token) / (output tokens − 1): specload's and "
        "vLLM's TPOT, guidellm's *ITL*. guidellm's own *TPOT* includes the first token (it "
        "divides the whole latency by the output tokens); it is in the JSON as "
        "`tpot_incl_first_p50/p95`, not in the table. vLLM's *ITL* is per chunk (in the JSON as "
        "`itl_p50/p95`); without speculative decoding a chunk is one token, so it equals TPOT "
        "on average but not in its tails."
    ),
    (
        "- **Errors** are per request, matched by id: specload and vLLM bench send "
        "`X-Request-Id`; guidellm keeps the response id `chatcmpl-<id>` the simulator answers "
        "with. |TTFT err| = |client TTFT − (first emission − arrival)|; it includes what every "
        "client shares (loopback, the simulator's event loop reaching the request) and what the "
        "client adds (sending after its clock started, reading the first chunk late). |TPOT err| "
        "is relative to the true TPOT of the same request."
    ),
    (
        "- **Achieved rate** = (arrivals − 1) / (last − first arrival) at the simulator, the "
        "same for every client; a client that bursts to catch up is as wrong as one that lags. "
        "*Within 10 %* allows Poisson noise: a Poisson count of n has a standard error of "
        "1/√n, so the bar is max(10 %, 2/√n) (±32 % at 40 arrivals, ±10 % from 400 on)."
    ),
    (
        "- **Client CPU** is user + system seconds of the client's whole process tree (Locust "
        "master and workers, guidellm's worker processes) over the arrival window ÷ its length; "
        "**req/s per core** = achieved ÷ client cores. **sim CPU** is the simulator's: near 1 "
        "core, the simulator (one Python process) set the pace, not the client."
    ),
    (
        "- Prompts are the same texts for every client (specload's synthetic set, sized with "
        "the simulator's `/tokenize` to the chat prompt length); on `/v1/completions` vLLM "
        "bench's prompts are 3 chat-template tokens shorter."
    ),
    (
        "- This is a 2-core machine shared with the simulator and with other work: a load "
        "average above 2 means processes waited for a CPU, and the TTFT tails then measure the "
        "scheduler as much as the client."
    ),
)


def _f(v: Any, p: int = 2) -> str:
    return "–" if v is None else f"{v:,.{p}f}"


def capacity(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per client: the highest rate it sustains and its rate per client core there."""
    out: dict[str, dict[str, Any]] = {}
    for client in dict.fromkeys(r["client"] for r in rows):
        ok = [r for r in rows if r["client"] == client and sustained(r)]
        best = max(ok, key=lambda r: r["target_rate"]) if ok else None
        out[client] = {
            "max_sustained_rate": best["target_rate"] if best else None,
            "achieved_rate": best["achieved_rate"] if best else None,
            "client_cores": best["client_cores"] if best else None,
            "rate_per_core": best["rate_per_core"] if best else None,
        }
    return out


def _best_peer(rows: list[dict[str, Any]], rate: float, key: str) -> dict[str, Any] | None:
    peers = [
        r
        for r in rows
        if r["target_rate"] == rate and not r["client"].startswith(SPECLOAD) and r[key] is not None
    ]
    return min(peers, key=lambda r: r[key]) if peers else None


def goals(rows: list[dict[str, Any]], cap: dict[str, dict[str, Any]]) -> list[str]:
    """The peers comparison's two goals, checked on the figures, in words."""
    lines = []
    for key, what in (
        ("ttft_err_ms_p99", "TTFT error p99 (ms)"),
        ("tpot_err_pct_p99", "TPOT error p99 (%)"),
    ):
        worse = []
        for r in (r for r in rows if r["client"] == SPECLOAD):
            peer = _best_peer(rows, r["target_rate"], key)
            if peer and r[key] is not None and r[key] > peer[key]:
                split = (
                    f"; specload's split: send→arrive p99 {_f(r['send_to_arrive_ms_p99'])}"
                    f", emit→read p99 {_f(r['emit_to_read_ms_p99'])} ms"
                    if key.startswith("ttft") and r.get("send_to_arrive_ms_p99") is not None
                    else ""
                )
                worse.append(
                    f"{r['target_rate']:g} req/s ({_f(r[key])} vs {peer['client']} "
                    f"{_f(peer[key])}{split})"
                )
        verdict = "MET" if not worse else "NOT MET at " + "; ".join(worse)
        lines.append(f"- specload's {what} no larger than the best peer's at every rate: {verdict}")
    own = (
        max((c["rate_per_core"] or 0) for n, c in cap.items() if n.startswith(SPECLOAD))
        if any(n.startswith(SPECLOAD) for n in cap)
        else 0
    )
    peer = max(
        ((c["rate_per_core"] or 0, n) for n, c in cap.items() if not n.startswith(SPECLOAD)),
        default=(0, None),
    )
    if peer[1] is None or not peer[0]:
        lines.append(
            "- sustained rate per core ≥ 1.5× the best peer's: no peer sustained any "
            f"rate within the bar (specload: {_f(own, 1)} req/s per core)"
        )
    else:
        ratio = own / peer[0]
        lines.append(
            f"- sustained rate per core ≥ 1.5× the best peer's: "
            f"{'MET' if ratio >= 1.5 else 'NOT MET'} — {ratio:.2f}× "
            f"({_f(own, 1)} vs {peer[1]} {_f(peer[0], 1)} req/s per core)"
        )
    by = {(r["client"], r["target_rate"]): r["rate_per_core"] for r in rows}
    ratios = []
    for rate in sorted({r["target_rate"] for r in rows}):
        own = by.get((SPECLOAD, rate))
        peer_v = max(
            (v for (c, q), v in by.items() if q == rate and v and not c.startswith(SPECLOAD)),
            default=None,
        )
        if own and peer_v:
            ratios.append(f"{own / peer_v:.2f}× at {rate:g}")
    if ratios:
        lines.append(
            "- CPU alone (req/s per client core at the same target rate, accuracy "
            "aside), specload ÷ the most frugal peer: " + ", ".join(ratios)
        )
    return lines


def _row(r: dict[str, Any]) -> str:
    rep = r["reported"]
    return (
        f"| {r['client']} | {r['target_rate']:g} | {_f(r['achieved_rate'])} | "
        f"{_f(r['client_cores'])} | {_f(r['rate_per_core'], 0)} | "
        f"{_f(rep.get('ttft_p50'))} / {_f(rep.get('ttft_p95'))} | "
        f"{_f(r['true_ttft_p50_ms'])} / {_f(r['true_ttft_p95_ms'])} | "
        f"{_f(r['ttft_err_ms_p50'])} / {_f(r['ttft_err_ms_p99'])} | "
        f"{_f(rep.get('tpot_p50'), 3)} / {_f(rep.get('tpot_p95'), 3)} | "
        f"{_f(r['true_tpot_p50_ms'], 3)} / {_f(r['true_tpot_p95_ms'], 3)} | "
        f"{_f(r['tpot_err_pct_p50'])} / {_f(r['tpot_err_pct_p99'])} | "
        f"{_f(r.get('sim_cores'))} | {r['ok']} / {r['errors']}"
        f"{f' (+{cut} cut)' if (cut := r.get('cancelled')) else ''} | "
        f"{'yes' if sustained(r) else 'no'} |"
    )


def _capacity_table(cap: dict[str, dict[str, Any]]) -> list[str]:
    base = cap.get(SPECLOAD, {}).get("rate_per_core")
    lines = [
        (
            "| client | highest sustained rate (req/s) | achieved | client cores there | "
            "req/s per core | specload ÷ client |"
        ),
        "|" + " --- |" * 6,
    ]
    for name, c in cap.items():
        ratio = (base / c["rate_per_core"]) if base and c["rate_per_core"] else None
        lines.append(
            f"| {name} | {_f(c['max_sustained_rate'], 0)} | {_f(c['achieved_rate'])} | "
            f"{_f(c['client_cores'])} | {_f(c['rate_per_core'], 0)} | "
            f"{_f(ratio, 2)}{'×' if ratio else ''} |"
        )
    return lines


def _efficiency_table(rows: list[dict[str, Any]]) -> list[str]:
    """req/s per client core at each rate, whatever the accuracy: the CPU cost alone."""
    clients = list(dict.fromkeys(r["client"] for r in rows))
    by = {(r["client"], r["target_rate"]): r["rate_per_core"] for r in rows}
    lines = [
        "| target req/s | " + " | ".join(clients) + " | specload ÷ best peer |",
        "|" + " --- |" * (len(clients) + 2),
    ]
    for rate in sorted({r["target_rate"] for r in rows}):
        own = by.get((SPECLOAD, rate))
        peers = [
            v for c in clients if not c.startswith(SPECLOAD) if (v := by.get((c, rate))) is not None
        ]
        ratio = own / max(peers) if own and peers else None
        lines.append(
            f"| {rate:g} | "
            + " | ".join(_f(by.get((c, rate)), 0) for c in clients)
            + f" | {_f(ratio, 2)}{'×' if ratio else ''} |"
        )
    return lines


def write_results(result: dict[str, Any], out: Path) -> str:
    """Write ``peers.json`` and ``peers.md`` under ``out``; return the Markdown."""
    out.mkdir(parents=True, exist_ok=True)
    rows, meta = result["rows"], result["meta"]
    cap = capacity(rows)
    result["capacity"] = cap
    (out / "peers.json").write_text(json.dumps(result, indent=1) + "\n")
    head = (
        "| client | target req/s | achieved req/s | client CPU (cores) | req/s per core | "
        "TTFT p50 / p95 reported (ms) | TTFT p50 / p95 true (ms) | |TTFT err| p50 / p99 "
        "(ms) | TPOT p50 / p95 reported (ms) | TPOT p50 / p95 true (ms) | |TPOT err| p50 / "
        "p99 (%) | sim CPU (cores) | ok / failed | sustained |"
    )
    load = meta["loadavg"]
    intro = (
        f"Measured {meta['date']} by `benchmarks/peers.py` on {meta['cpu_model']} "
        f"({meta['cpus']} cores, {meta['mem_gib']} GiB, Python {meta['python']}), shared "
        f"with other work: load average {load['before']} before the run, "
        f"{load['min']}–{load['max']} (1-min, sampled) during it, {load['after']} after. "
        f"Target: `specload sim --profile {meta['profile']} --ground-truth` on loopback; "
        f"{meta['input_tokens']} prompt tokens, {meta['output_tokens']} output tokens "
        f"(ignore_eos), Poisson arrivals, {meta['duration_s']:g} s per rate, no warm-up. "
        f"Clients: {', '.join(meta['versions'][k] for k in sorted(meta['versions']))}."
    )
    lines = [
        "# specload next to vLLM's `bench serve` and guidellm",
        "",
        intro,
        "",
        head,
        "|" + " --- |" * 14,
        *[_row(r) for r in rows],
        "",
        *[
            f"- {r['client']} @ {r['target_rate']:g} req/s: {n}"
            for r in rows
            for n in r.get("notes") or []
        ],
        "",
        ("## Capacity (highest rate within 10 % of target with TTFT error p99 ≤ 5 ms, no errors)"),
        "",
        *_capacity_table(cap),
        "",
        "## CPU alone: req/s per client core at each rate (accuracy aside)",
        "",
        *_efficiency_table(rows),
        "",
        "## Goals",
        "",
        *goals(rows, cap),
        "",
    ]
    if result.get("unavailable"):
        lines += [
            "## Clients that did not run",
            "",
            *[f"- {k}: {v}" for k, v in result["unavailable"].items()],
            "",
        ]
    if result.get("analysis"):
        lines += ["## The gap, measured", "", *result["analysis"], ""]
    if result.get("profile"):
        lines += [
            "## Profile of specload's client and what was removed",
            "",
            *result["profile"],
            "",
        ]
    lines += ["## How to read it", "", *result["notes"]]
    text = "\n".join(lines) + "\n"
    (out / "peers.md").write_text(text)
    return text
