"""Master and workers across real network stacks: Linux network namespaces and veth links.

``tests/faults/netlab.py`` runs in its own user, network and mount namespaces (root inside,
nothing outside touched): the simulator and the Locust master in the hub namespace at
10.77.0.1, two workers in namespaces of their own that reach it only over a veth link, one
of them with a wall clock 0.3 s ahead; half a second into the second step the other's link
is taken down. Skipped, with the reason, where namespaces cannot be made (no ``ip``, or neither
root nor unprivileged user namespaces).
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from specload.locust.load_process import worker_tag
from specload.protocol.preflight import PREFLIGHT_ID_PREFIX
from specload.recorder import read_run
from tests.faults.matrix import Row, check_report, kind_of
from tests.locust.runcheck import BUSY_S, check_timing

LAB = Path(__file__).with_name("netlab.py")
UNSHARE = ["unshare", "--user", "--map-root-user", "--net", "--mount", "--fork"]

SCENARIO = """\
name: netns
max_tokens: 64
steps: [4, 6, 8, 8]
step_duration_s: 3
warmup_s: 0
arrival: constant
max_concurrency: 16
metrics_interval_s: 1
request_timeout_s: 3
prompts:
  synthetic: {input_tokens: 32, count: 8}
"""


def _why_not() -> str | None:
    """None when this machine can build the lab, else why not."""
    if shutil.which("ip") is None or shutil.which("unshare") is None:
        return "needs iproute2's ip and util-linux's unshare"
    probe = subprocess.run(
        [*UNSHARE, "ip", "link", "add", "b0", "type", "bridge"], capture_output=True, text=True
    )
    if probe.returncode != 0:
        return f"cannot make network namespaces here: {probe.stderr.strip()[:200]}"
    return None


@pytest.mark.slow
def test_master_and_workers_in_separate_network_namespaces(tmp_path: Path, matrix_row: Row) -> None:
    why = _why_not()
    if why:
        pytest.skip(why)
    row = matrix_row
    row.fault = "link to one worker cut (network namespaces)"
    row.injected = (
        "master and simulator at 10.77.0.1, workers in their own netns over veth (one with "
        "its clock 0.3 s ahead); `ip link set vw2 down` 0.5 s into step 2"
    )
    scenario = tmp_path / "netns.yaml"
    scenario.write_text(SCENARIO)
    lab = subprocess.run(
        [*UNSHARE, sys.executable, str(LAB), str(tmp_path), str(scenario)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    facts = json.loads((tmp_path / "lab.json").read_text())
    assert lab.returncode == 0, lab.stderr[-3000:] + (tmp_path / "master.log").read_text()[-3000:]
    # each worker reaches the hub over its link, and the hub is not on its loopback
    for ns, seen in facts["reach"].items():
        assert seen["hub"] == "ok" and "Connection refused" in seen["loopback"], (ns, seen)
    row.exit_code = facts["master_exit"]
    assert facts["master_exit"] == 1  # a lost worker: degraded

    run_dir = tmp_path / "run"
    run = read_run(run_dir)
    meta = run.meta
    assert meta.status == "degraded" and len(meta.lost_workers) == 1, meta.notes
    lost = meta.lost_workers[0]
    assert lost["at"] > facts["cut_at"] and any("lost" in why for why in meta.degraded)
    (survivor,) = set(meta.workers) - {lost["worker"]}
    records = list(run.record_dicts())
    ids = [r["request_id"] for r in records]
    assert len(ids) == len(set(ids)), "a request has two records"
    truth = {
        g["request_id"]: g
        for g in json.loads((tmp_path / "truth.json").read_text())
        if not g["request_id"].startswith(PREFLIGHT_ID_PREFIX)
    }
    # the survivor: every request it sent has its record, all ok, and it took over the share
    mine = [r for r in records if r["worker"] == survivor]
    c = meta.counts["by_worker"][survivor]
    assert c["sent"] == c["recorded"] == len(mine) and {kind_of(r) for r in mine} == {"ok"}
    # the last step starts after the loss was noticed: the survivor alone carries the target
    last = run.steps[-1]
    assert last["start"] > lost["at"], (last, lost)
    # (the whole schedule, target x window to one at the edge, sent on time but for a busy
    # box's delays; its clock's offset cancels: both times are its own)
    ours = [r for r in mine if r["step"] == last["index"] and not r["warmup"]]
    assert abs(len(ours) - 8.0 * (last["end"] - last["warmup_end"])) <= 1, len(ours)
    assert statistics.median(r["sent_at"] - r["scheduled_at"] for r in ours) <= BUSY_S
    # the lost worker's gap: what it sent beyond what reached the master, counted
    assert (
        lost["sent"] >= lost["recorded"] == sum(1 for r in records if r["worker"] == lost["worker"])
    )
    missing = set(truth) - set(ids)
    assert all(f"-{worker_tag(lost['worker'])}-" in rid for rid in missing)
    # the survivor's clock runs 0.3 s ahead: its timestamps show it, its latencies do not
    offsets = [r["sent_at"] - truth[r["request_id"]]["arrived_at"] for r in mine]
    assert abs(statistics.median(offsets) - facts["skew_s"]) < 0.1, statistics.median(offsets)
    ttft_err, tpot_err = check_timing(mine, truth)  # causal, and late by a busy box's delays
    kinds: dict[str, int] = {}
    for r in records:
        kinds[kind_of(r)] = kinds.get(kind_of(r), 0) + 1
    row.status, row.sent, row.recorded = meta.status, meta.counts["sent"], len(records)
    row.server_saw, row.lost, row.kinds = len(truth), len(missing), dict(sorted(kinds.items()))
    row.note = (
        f"the cut worker was marked lost {lost['at'] - facts['cut_at']:.1f} s after the cut, its "
        f"gap counted ({lost['sent']} sent, {lost['recorded']} recorded); the other took its "
        f"share; its 0.3 s clock offset shows in its timestamps, not in TTFT "
        f"(median error {ttft_err * 1e3:.2f} ms) or TPOT ({tpot_err:.2%})"
    )
    check_report(row, run_dir, tmp_path / "report")
