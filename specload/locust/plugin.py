"""specload inside Locust: command-line options, per-process roles, message wiring.

``install()`` is called by the locustfile, so it runs in every Locust process (master, local,
each ``--processes`` child and each ``--worker``): it adds specload's options to Locust's
parser (so they show in ``--help`` and the web UI and travel to workers), puts the
sub-millisecond response-time buckets in place, and on ``init`` gives the process its roles:
a ``LoadProcess`` where users run (local runner, workers) and a ``MasterSide`` where the
schedule and the run directory live (local runner, master). Nothing happens at import time.

Before any load the master checks the target (``specload.protocol.preflight``: reachable, the model
served, one streamed completion with usage): headless at start-up, where a failure is one
line and exit code 2; in the web UI when Start is pressed, where a failure is logged and no
run starts. ``--skip-preflight`` turns the check off. Either way no run directory is made.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from typing import Any

from specload.core.errors import SpecloadError
from specload.locust.events import install_buckets
from specload.locust.load_process import LoadProcess
from specload.locust.master_side import MasterSide, api_key
from specload.locust.messages import (
    Drain,
    FinalCounts,
    RecordBatch,
    RunStart,
    StepChange,
    WorkerReady,
)
from specload.locust.registry import roles as roles_of
from specload.locust.workers import LOCAL_WORKER
from specload.options.gates import add_gate_options
from specload.options.run import add_run_options

__all__ = ["add_options", "install"]

log = logging.getLogger("specload")

_installed = False


def add_options(parser: Any) -> None:
    """specload's Locust options (``init_command_line_parser``): the run options table and
    the gate options ``specload compare`` has too (``options/gates.py``).

    Locust's own ``add_argument`` (an argument group would drop ``include_in_web_ui``)."""
    add_run_options(parser, locust=True)
    add_gate_options(parser, locust=True)


def _wire(runner: Any, cls: Any, handler: Any) -> None:
    runner.register_message(
        cls.TYPE, lambda environment, msg, **kw: handler(cls.from_wire(msg.data))
    )


def _to_session(master: MasterSide, method: str) -> Any:
    """A handler that forwards to the current run session's ``method`` (none: dropped)."""

    def handler(arg: Any) -> None:
        if master.session is not None:
            getattr(master.session, method)(arg)

    return handler


#: gevent signal watchers, kept alive for the life of the process.
_SIGNAL_WATCHERS: list[Any] = []


def _graceful_signals() -> None:
    """SIGINT and SIGTERM end the run ``interrupted`` with every record on disk.

    Python's own SIGINT handler raises ``KeyboardInterrupt`` in whatever greenlet runs when
    the signal lands: often a user turning a finished request into its record, which then
    vanished (sent, never recorded; seen under CPU load). Delivered by the gevent loop
    instead, the interrupt reaches only the main greenlet, at a switch point, where Locust
    expects it and then stops users cleanly (in-flight requests become ``cancelled``
    records). SIGTERM gets the same: headless Locust installs its own SIGTERM handler only
    after a shape run returns, so during the run the default action would kill the process
    without a word.
    """
    if threading.current_thread() is not threading.main_thread() or _SIGNAL_WATCHERS:
        return
    import gevent

    for sig in (signal.SIGINT, signal.SIGTERM):
        _SIGNAL_WATCHERS.append(gevent.signal_handler(sig, _interrupt_main))


def _interrupt_main() -> None:
    """Raise ``KeyboardInterrupt`` in the main greenlet (as gevent does for system errors)."""
    import gevent

    hub = gevent.get_hub()
    hub.loop.run_callback(hub.parent.throw, KeyboardInterrupt)


class _SpawnRateFilter(logging.Filter):
    """Drops Locust's "spawn rate is very high" warning, printed on every specload run.

    specload's users are concurrency slots that wait for the pacer's arrivals; the load is
    the step's QPS, not the spawn. The shape spawns the whole pool at once on purpose (the
    first step starts when it is up), so the warning is about something specload does not
    do, and it taught users to skim past warnings."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Your selected spawn rate is very high")


def _quiet_spawn_warning() -> None:
    runners_log = logging.getLogger("locust.runners")
    if not any(isinstance(f, _SpawnRateFilter) for f in runners_log.filters):
        runners_log.addFilter(_SpawnRateFilter())


def _default_rebalancing(environment: Any) -> None:
    """Turn Locust's ``--enable-rebalancing`` on: a scenario's ``max_concurrency`` is the
    user pool of the whole run, on however many workers are connected.

    Locust 2.47 re-dispatches users when a worker joins even without the flag; with it, it
    also re-dispatches at once when a worker goes missing (without it the survivors run with
    fewer users until Locust drops the dead worker, about 60 s later). Users removed by a
    re-dispatch finish the request they have in flight (``ChatUser.stop``), so it never
    turns a request into an error.
    """
    opts = environment.parsed_options
    if opts is not None and not getattr(opts, "enable_rebalancing", False):
        opts.enable_rebalancing = True


def _on_init(environment: Any, runner: Any = None, web_ui: Any = None, **_kw: Any) -> None:
    from locust.runners import LocalRunner, MasterRunner, WorkerRunner

    runner = runner or environment.runner
    _graceful_signals()
    _quiet_spawn_warning()
    roles = roles_of(environment)
    if isinstance(runner, (LocalRunner, WorkerRunner)):
        worker = LOCAL_WORKER if isinstance(runner, LocalRunner) else runner.client_id
        load = LoadProcess(
            worker,
            lambda t, d: runner.send_message(t, d),
            api_key=lambda: api_key(environment),
            stop_users=runner.stop,
            report_stats=_stats_reporter(runner),
        )
        roles.load = load
        _wire(runner, RunStart, load.on_run_start)
        _wire(runner, StepChange, load.on_step)
        _wire(runner, Drain, load.on_drain)
    if isinstance(runner, MasterRunner):
        _default_rebalancing(environment)
    if isinstance(runner, (LocalRunner, MasterRunner)):
        master = MasterSide(environment)
        roles.master = master
        _wire(runner, WorkerReady, _to_session(master, "on_ready"))
        _wire(runner, RecordBatch, _to_session(master, "on_records"))
        _wire(runner, FinalCounts, _to_session(master, "on_final"))
        on_connect = _to_session(master, "on_worker_connect")
        environment.events.worker_connect.add_listener(
            lambda client_id, **kw: on_connect(client_id)
        )
        _validate_early(environment, master)
        # the run starts with Locust's test start; the shape prepared it at its first tick
        environment.events.test_start.add_listener(lambda **_kw: master.begin())
        if web_ui is not None:
            from specload.locust.webui import install_web_ui

            install_web_ui(environment, web_ui)

    def on_stop(**_kw: Any) -> None:
        if roles.load is not None:
            roles.load.stop()  # first: its last records must reach the session
        if roles.master is not None:
            roles.master.stop()

    environment.events.test_stop.add_listener(on_stop)
    environment.events.quitting.add_listener(on_stop)

    def on_quit(**_kw: Any) -> None:
        """Locust printed its tables: the gates' outcome comes last in the log."""
        session = roles.master.session if roles.master is not None else None
        if session is not None:
            session.say_closing()

    environment.events.quit.add_listener(on_quit)


def _stats_reporter(runner: Any) -> Any:
    """A worker's Locust statistics sent to the master now (what Locust's own periodic
    report sends; the local runner's statistics are already in place)."""
    from locust.rpc import Message
    from locust.runners import WorkerRunner

    if not isinstance(runner, WorkerRunner):
        return lambda: None

    def report() -> None:
        data: dict[str, Any] = {}
        events = runner.environment.events
        events.report_to_master.fire(client_id=runner.client_id, data=data)  # type: ignore[no-untyped-call]
        runner.client.send(Message("stats", data, runner.client_id))  # type: ignore[no-untyped-call]

    return report


def _validate_early(environment: Any, master: MasterSide) -> None:
    """Headless, or a scenario given: fail before any traffic with one line and exit 2.
    Headless, the target is checked here too (the web UI checks it when Start is pressed)."""
    o = environment.parsed_options
    if o is None or not (o.headless or getattr(o, "scenario", "")):
        return
    try:
        opts, scenario = master.resolve()
        if o.headless:
            master.preflight(opts, scenario)
    except SpecloadError as exc:
        print(f"specload: error: {exc}", file=sys.stderr, flush=True)
        if getattr(o, "junit", ""):  # a JUnit file whatever the exit, naming the cause
            from specload.report.junit import write_error_junit

            write_error_junit(o.junit, str(exc))
        raise SystemExit(exc.exit_code) from None
    if o.headless:  # checked in full: the run it starts needs no second look
        master.pending = (opts, scenario)


def install() -> None:
    """Hook specload into Locust in this process; the locustfile calls it once."""
    global _installed
    install_buckets()
    if _installed:
        return
    from locust import events

    events.init_command_line_parser.add_listener(add_options)  # type: ignore[no-untyped-call]
    events.init.add_listener(_on_init)  # type: ignore[no-untyped-call]
    _installed = True
