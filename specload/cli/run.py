"""``specload run``: one headless run (one server condition, one scenario) through real Locust.

Bad input fails here, in a second, before Locust starts: the scenario is validated, the host
must carry a scheme, the output directory must be writable and not hold a run already, and
the target must pass the pre-flight (``specload.protocol.preflight``: reachable, the scenario's model
served, one streamed completion with usage; ``--skip-preflight`` to go without). Each is one
line, exit 2, and leaves no run directory behind. The run itself is ``locust -f <packaged locustfile> --headless`` in a
child process: that keeps ``--processes N`` exactly Locust's own (it forks workers), and
it keeps Locust's gevent monkey-patching out of this process. The child gets its own process
group; a Ctrl-C here is forwarded once as SIGINT to the Locust master (which has its
workers cancel and report), so the run ends ``interrupted`` with its records on disk (a second
Ctrl-C escalates to SIGTERM, a third to SIGKILL, to the whole group).

Locust's own log goes to ``OUT/locust.log``; the terminal shows specload's progress line per
step. Exit code: 0 completed, 1 degraded (over ``--max-error-rate`` or a worker lost; the
reasons are the last line) or failed, 130 interrupted, 2 bad input. The API key reaches the
child through its environment, never its command line (visible in ``ps``), and is never
written.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from specload.core.ports import free_port
from specload.core.procgroup import INTERRUPT_LADDER
from specload.options.run import add_run_options, check_processes, resolve_run_options
from specload.recorder.run_json import peek_run_json

__all__ = ["add_parser", "locust_command", "run"]

PROGRESS_PREFIX = "[specload] "
ERROR_PREFIX = "specload: error: "


def add_parser(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "run",
        help="one headless run of a scenario against a server, through Locust",
        description="Run a scenario's open-loop QPS steps against one server condition "
        "and write a run directory (run.json, requests.jsonl, metrics.jsonl, "
        "steps.json).",
    )
    add_run_options(p, locust=False)
    p.set_defaults(func=run)


def _validate(args: argparse.Namespace) -> Path:
    """Everything checkable before traffic; raises ConfigError or PreflightError (exit 2).

    The pre-flight talks to the server, so it comes after the local checks; the output
    directory it needed to prove writable is removed again when the pre-flight fails.
    """
    from specload.recorder.rundir import check_out_dir, remove_new_dirs

    scenario = _validate_args(args)
    created = _first_missing(Path(args.out))
    out = check_out_dir(args.out)
    if not args.skip_preflight:
        from specload.protocol.preflight import preflight

        try:
            preflight(
                args.host,
                model=scenario.model,
                api_key=args.api_key or os.environ.get("OPENAI_API_KEY") or None,
            )
        except BaseException:
            remove_new_dirs(out, created)
            raise
    return out


def _first_missing(path: Path) -> Path | None:
    """The outermost directory of ``path`` that does not exist yet (what a mkdir creates)."""
    missing = None
    for p in (path, *path.parents):
        if p.exists():
            break
        missing = p
    return missing


def _validate_args(args: argparse.Namespace) -> Any:
    """The checks that need no server and no disk: arguments and the scenario."""

    check_processes(args.processes)
    _opts, scenario = resolve_run_options(args, host=args.host, run_dir=args.out, headless=True)
    return scenario


def locust_command(args: argparse.Namespace, out: Path) -> list[str]:
    """The Locust command line for this run (no secrets in it)."""
    from specload.locust import bundled

    locustfile = Path(bundled.__file__).with_name("chat.py")
    cmd = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        str(locustfile),
        "--headless",
        "--host",
        args.host.rstrip("/"),
        "--scenario",
        str(Path(args.scenario).resolve()),
        "--label",
        args.label,
        "--run-dir",
        str(out.resolve()),
        "--only-summary",
        "--exit-code-on-error",
        "0",
        "--loglevel",
        "INFO",
        "--max-error-rate",
        repr(float(args.max_error_rate)),
        "--skip-preflight",
    ]  # done here already, before the run directory was kept
    if args.processes:
        # A port of its own on loopback: Locust's fixed default (5557) made two runs with
        # --processes on one host collide (the second never started), and "*" listened on
        # every interface for workers that are only ever local.
        port = str(free_port())
        cmd += [
            "--processes",
            str(args.processes),
            "--master-bind-host",
            "127.0.0.1",
            "--master-bind-port",
            port,
            "--master-port",
            port,
        ]
    if args.store_text:
        cmd.append("--store-text")
    for flag, value in (
        ("--speculative-config", args.speculative_config),
        ("--prefix-caching", args.prefix_caching),
        ("--server-cmd", args.server_cmd),
        ("--gpu-metrics-url", args.gpu_metrics_url),
        ("--scenario-set", args.scenario_set),
        ("--interleave-targets", args.interleave_targets),
    ):
        if value:
            cmd += [flag, value]
    return cmd


class _Forwarder:
    """Signals here → the child: ``procgroup.INTERRUPT_LADDER`` (SIGINT, SIGTERM, SIGKILL),
    one rung per signal the user sends (a sweep climbs it on a timer, for children of ours
    that no user is watching).

    The first goes to the Locust master alone: it stops the run and asks its workers
    (``--processes``) to cancel what is in flight and report. Sent to the whole group, each
    worker would also quit on its own, and the records of its last requests were lost. The
    escalations go to the whole group.
    """

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.count = 0
        self.interrupted = False

    def __call__(self, signum: int, _frame: Any) -> None:
        self.interrupted = True
        sig = INTERRUPT_LADDER[min(self.count, len(INTERRUPT_LADDER) - 1)]
        self.count += 1
        try:
            if sig == signal.SIGINT:
                os.kill(self.proc.pid, sig)
            else:
                os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass


def _pump(proc: subprocess.Popen[bytes], log_path: Path) -> list[str]:
    """Copy the child's output to the log; show progress and error lines; keep error lines."""
    errors: list[str] = []
    assert proc.stdout is not None
    with open(log_path, "ab", buffering=0) as log:  # unbuffered: tail -f sees each line
        for raw in proc.stdout:
            log.write(raw)
            line = raw.decode("utf-8", errors="replace").rstrip("\n")
            if line.startswith(PROGRESS_PREFIX):
                print(line[len(PROGRESS_PREFIX) :], flush=True)
            elif line.startswith(ERROR_PREFIX):
                errors.append(line[len(ERROR_PREFIX) :])
    return errors


def run(args: argparse.Namespace) -> int:
    from specload.core.errors import ConfigError, SpecloadError
    from specload.core.procgroup import stop_group
    from specload.recorder.rundir import LOCK_FD_ENV, lock_run_dir

    out = _validate(args)
    # held until this command ends, shared with the Locust master (which writes the run):
    # a second run given the same --out fails here with one line (exit 2)
    lock = lock_run_dir(out)
    env = dict(os.environ)
    if args.api_key:
        env["OPENAI_API_KEY"] = args.api_key
    env.setdefault("PYTHONUNBUFFERED", "1")
    env[LOCK_FD_ENV] = str(lock.fileno())
    proc = subprocess.Popen(
        locust_command(args, out),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=env,
        pass_fds=(lock.fileno(),),
    )
    forward = _Forwarder(proc)
    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        errors = _pump(proc, out / "locust.log")
        code = proc.wait()
        stop_group(proc, ())  # a load process the master left behind holds the run's lock
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    status = _status(out)
    if errors and code == 2:  # bad input, never this run's status (it wrote none)
        raise ConfigError(errors[0])
    if status is None:
        if errors:
            raise SpecloadError(errors[0])
        raise SpecloadError(
            f"locust exited with {code} before writing a run; see {out / 'locust.log'}"
        )
    if status == "completed":
        return 0
    if status == "interrupted" or forward.interrupted:
        print(f"specload run: interrupted; partial run in {out}", file=sys.stderr)
        return 130
    if status == "degraded":
        reasons = "; ".join(_meta(out).get("degraded") or []) or "see run.json"
        print(
            f"specload run: run degraded (every record kept in {out}): {reasons}", file=sys.stderr
        )
        return 1
    notes = _meta(out).get("notes") or []
    why = f": {_reason(notes[-1])}" if notes else ""
    print(
        f"specload run: run {status}{why}; see {out / 'run.json'} and {out / 'locust.log'}",
        file=sys.stderr,
    )
    return 1


#: specload's own error classes: their message is the whole story, their name is not news
_OWN_ERRORS = ("ConfigError", "SpecloadError", "TargetError", "PreflightError", "PreparationFailed")


def _reason(note: str) -> str:
    """A failed run's last note without what this line already says (``run failed: ``) and
    without an exception's class name in front: the reason alone, once."""
    for prefix in ("run failed: ", *(f"{n}: " for n in _OWN_ERRORS)):
        note = note.removeprefix(prefix)
    return note


def _meta(out: Path) -> dict[str, Any]:
    return peek_run_json(out) or {}


def _status(out: Path) -> str | None:
    status = _meta(out).get("status")
    return None if status is None else str(status)
