"""Where specload's load process spends its CPU at a high rate: py-spy on the Locust child.

``specload run`` (local runner) drives ``specload sim`` at one rate; ``py-spy record
--nonblocking`` samples the Locust process (the one with the users, the pacer and the
client) for the step, and the collapsed stacks are summed into self and inclusive time per
function. Also prints the client's CPU per request and per received chunk, the figures the
before/after comparison in ``benchmarks/results/peers.md`` uses.

Run: ``.venv/bin/python benchmarks/peers/pyspy.py [--rate 128] [--duration-s 12]`` (needs
``py-spy`` in the venv: ``.venv/bin/pip install py-spy``; root or ptrace permission).
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent.parent)]

import psutil
from client_fidelity import start_sim, stop_sim

from peers.cpu import TreeCPU
from peers.specload_runner import scenario_dict


def _locust_child(pid: int, timeout_s: float = 30) -> int:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        for c in psutil.Process(pid).children(recursive=True):
            if "locust" in " ".join(c.cmdline()):
                return c.pid
        time.sleep(0.1)
    raise SystemExit("no Locust child appeared")


def summarize(raw: Path, top: int) -> list[str]:
    """Self and inclusive sample shares per function from py-spy's collapsed stacks."""
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = [
            f.split(" (")[0] + " (" + f.split(" (")[-1].split(":")[0].rsplit("/", 1)[-1] + ")"
            for f in stack.split(";")
            if f
        ]
        if not frames:
            continue
        k = int(n)
        total += k
        own[frames[-1]] += k
        for f in set(frames):
            incl[f] += k
    out = [f"{total} samples", "self:"]
    out += [f"  {v / total:6.1%}  {k}" for k, v in own.most_common(top)]
    out += ["inclusive:"] + [f"  {v / total:6.1%}  {k}" for k, v in incl.most_common(top)]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=float, default=128)
    ap.add_argument("--duration-s", type=float, default=12)
    ap.add_argument("--profile", default="h200-llama8b")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--no-spy", action="store_true", help="only measure the CPU figures")
    a = ap.parse_args()
    pyspy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or "py-spy"
    work = Path(tempfile.mkdtemp(prefix="specload-pyspy-"))
    sim, url = start_sim(a.profile)
    try:
        sc = scenario_dict([a.rate], a.duration_s, 128, 64, 200, "specload-sim")
        (work / "sc.yaml").write_text(json.dumps(sc))
        run = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "specload",
                "run",
                "--host",
                url,
                "--scenario",
                str(work / "sc.yaml"),
                "--label",
                "pyspy",
                "--out",
                str(work / "run"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        child = _locust_child(run.pid)
        cpu = TreeCPU(child)
        spy = (
            None
            if a.no_spy
            else subprocess.Popen(
                [
                    pyspy,
                    "record",
                    "--pid",
                    str(child),
                    "--nonblocking",
                    "--rate",
                    "250",
                    "--format",
                    "raw",
                    "-o",
                    str(work / "raw.txt"),
                    "--duration",
                    str(int(a.duration_s + 6)),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
            )
        )
        run.wait(timeout=a.duration_s * 4 + 60)
        if spy is not None:
            spy.wait(timeout=30)
        cpu.stop()
    finally:
        stop_sim(sim)
    recs = [json.loads(ln) for ln in (work / "run" / "requests.jsonl").read_text().splitlines()]
    sent = [r["sent_at"] for r in recs]
    cpu_s = cpu.cpu_between(min(sent), max(sent))
    chunks = sum(r["content_chunks"] or 0 for r in recs)
    span = max(sent) - min(sent)
    print(
        f"{len(recs)} requests in {span:.1f} s ({(len(recs) - 1) / span:.1f} req/s), "
        f"Locust process {cpu_s / span:.2f} cores, {cpu_s / len(recs) * 1e6:.0f} µs/request, "
        f"{cpu_s / chunks * 1e6:.1f} µs/chunk (chunks over the whole run)"
    )
    shutil.rmtree(work / "run", ignore_errors=True)
    if a.no_spy:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print("\n".join(summarize(work / "raw.txt", a.top)))
        print(f"(raw stacks, kept for a closer look: {work / 'raw.txt'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
