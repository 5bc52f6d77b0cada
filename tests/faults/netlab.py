"""A three-namespace network lab for one distributed run (run me inside ``unshare``).

``python tests/faults/netlab.py OUT SCENARIO`` must run in its own user, network and mount
namespaces (``unshare --user --map-root-user --net --mount --fork``: root inside, nothing
outside is touched, everything vanishes with the last process). It builds::

    hub (this namespace)  br0 10.77.0.1/24: the simulator :8000, the Locust master :5557
      ├─ veth vw1 ── netns w1: eth0 10.77.0.2/24, a Locust worker whose wall clock runs
      │                        SKEW_S ahead (``skew/sitecustomize.py``)
      └─ veth vw2 ── netns w2: eth0 10.77.0.3/24, a Locust worker

so the workers reach the master and the server only over their link, at real addresses
(``--master-bind-host 10.77.0.1``, ``--master-host 10.77.0.1``). Half a second into the
second step it takes w2's link down (``ip link set vw2 down``). It writes ``OUT/lab.json``
(what it checked and when it cut the link), ``OUT/truth.json`` (the simulator's requests)
and the run directory ``OUT/run``; the test reads those. Every process it starts, it stops.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LOCUSTFILE = REPO / "locustfiles" / "chat.py"
HUB, SIM_PORT, MASTER_PORT = "10.77.0.1", 8000, 5557
WORKERS = {"w1": "10.77.0.2", "w2": "10.77.0.3"}
SKEW_S = 0.3  # w1's wall clock runs this far ahead of the hub's


def sh(*cmd: str) -> None:
    subprocess.run(cmd, check=True, capture_output=True)


def build_network() -> None:
    # ip netns keeps its handles under /run/netns: a private tmpfs in this mount namespace
    sh("mount", "-t", "tmpfs", "tmpfs", "/run")
    os.makedirs("/run/netns", exist_ok=True)
    sh("ip", "link", "set", "lo", "up")
    sh("ip", "link", "add", "br0", "type", "bridge")
    sh("ip", "addr", "add", f"{HUB}/24", "dev", "br0")
    sh("ip", "link", "set", "br0", "up")
    for name, addr in WORKERS.items():
        sh("ip", "netns", "add", name)
        sh("ip", "link", "add", f"v{name}", "type", "veth", "peer", "name", "eth0", "netns", name)
        sh("ip", "link", "set", f"v{name}", "master", "br0", "up")
        sh("ip", "-n", name, "addr", "add", f"{addr}/24", "dev", "eth0")
        sh("ip", "-n", name, "link", "set", "eth0", "up")
        sh("ip", "-n", name, "link", "set", "lo", "up")


def reach(ns: str, url: str) -> str:
    """What a GET of ``url`` from namespace ``ns`` gives: ``ok`` or the error."""
    code = (
        "import urllib.request,sys\n"
        "try:\n"
        f"    urllib.request.urlopen({url!r}, timeout=3).close(); print('ok')\n"
        "except Exception as e:\n"
        "    print(type(e).__name__, e)\n"
    )
    out = subprocess.run(
        ["ip", "netns", "exec", ns, sys.executable, "-c", code], capture_output=True, text=True
    )
    return out.stdout.strip() or out.stderr.strip()


def spawn(
    cmd: list[str],
    log: Path,
    *,
    ns: str | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.Popen[bytes]:
    full = ["ip", "netns", "exec", ns, *cmd] if ns else cmd
    return subprocess.Popen(
        full,
        stdout=open(log, "wb"),
        stderr=subprocess.STDOUT,
        cwd=cwd,  # noqa: SIM115
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )


def wait_health(url: str, timeout_s: float = 30.0) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            urllib.request.urlopen(url + "/health", timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(f"{url} did not come up")


def wait_step(run_dir: Path, index: int, timeout_s: float = 60.0) -> dict:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            steps = json.loads((run_dir / "steps.json").read_text())
            if len(steps) > index:
                return dict(steps[index])
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    raise TimeoutError(f"step {index} did not start")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def main(out: Path, scenario: Path) -> int:
    build_network()
    lab: dict = {}
    sim_url = f"http://{HUB}:{SIM_PORT}"
    py = sys.executable
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(
            spawn(
                [
                    py,
                    "-m",
                    "specload",
                    "sim",
                    "--host",
                    HUB,
                    "--port",
                    str(SIM_PORT),
                    "--profile",
                    "tiny",
                    "--ground-truth",
                ],
                out / "sim.log",
                cwd=REPO,
            )
        )
        wait_health(sim_url)
        # the workers reach the hub over their link, and nothing at their own loopback
        lab["reach"] = {
            ns: {
                "hub": reach(ns, sim_url + "/health"),
                "loopback": reach(ns, f"http://127.0.0.1:{SIM_PORT}/health"),
            }
            for ns in WORKERS
        }
        master = spawn(
            [
                py,
                "-m",
                "locust",
                "-f",
                str(LOCUSTFILE),
                "--master",
                "--headless",
                "--expect-workers",
                "2",
                "--master-bind-host",
                HUB,
                "--master-bind-port",
                str(MASTER_PORT),
                "--host",
                sim_url,
                "--scenario",
                str(scenario),
                "--label",
                "netns",
                "--run-dir",
                str(out / "run"),
                "--exit-code-on-error",
                "0",
            ],
            out / "master.log",
            cwd=out,
        )
        procs.append(master)
        skew = {"PYTHONPATH": str(Path(__file__).parent / "skew"), "CLOCK_SKEW_S": str(SKEW_S)}
        for name in WORKERS:
            (out / name).mkdir()
            procs.append(
                spawn(
                    [
                        py,
                        "-m",
                        "locust",
                        "-f",
                        str(LOCUSTFILE),
                        "--worker",
                        "--master-host",
                        HUB,
                        "--master-port",
                        str(MASTER_PORT),
                    ],
                    out / f"{name}.log",
                    ns=name,
                    env=skew if name == "w1" else None,
                    cwd=out / name,
                )
            )
        step = wait_step(out / "run", 1)
        time.sleep(max(0.0, step["start"] + 0.5 - time.time()))
        sh("ip", "link", "set", "vw2", "down")
        lab["cut_at"] = time.time()
        lab["master_exit"] = master.wait(timeout=120)
        with urllib.request.urlopen(sim_url + "/debug/requests", timeout=10) as r:
            (out / "truth.json").write_text(r.read().decode())
        lab["skew_s"] = SKEW_S
    finally:
        for p in reversed(procs):
            stop(p)
        (out / "lab.json").write_text(json.dumps(lab, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2])))
