"""The master's side of specload in a Locust process: options checked, runs started.

One ``MasterSide`` per master (or local runner) environment; the web UI can start several
runs in a row, each a new ``RunSession``. Registered in ``locust/registry.py``, where the
shape and the web UI find it.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from specload.core.errors import SpecloadError
from specload.locust.session import RunSession
from specload.locust.web_paths import UiPaths
from specload.options.run import RunOptions, resolve_run_options

__all__ = ["MasterSide", "api_key"]

log = logging.getLogger("specload")


def api_key(environment: Any) -> str | None:
    """``--api-key``, else ``$OPENAI_API_KEY``; read when needed, never stored."""
    opts = environment.parsed_options
    return (
        (getattr(opts, "api_key", "") if opts else "") or os.environ.get("OPENAI_API_KEY") or None
    )


class MasterSide:
    """Validates options and starts one ``RunSession`` per run (the UI can run several).

    A run begins in two steps, both on the master: the shape's first ``tick()`` calls
    ``prepare()`` (options, scenario and, in the web UI, the pre-flight; the user pool comes
    from the scenario), and Locust's ``test_start`` event calls ``begin()``, which starts the
    ``RunSession`` from what was prepared. Bad input in either ends the run with one line.
    """

    def __init__(self, environment: Any) -> None:
        self.environment = environment
        self.session: RunSession | None = None
        #: options and scenario checked by ``prepare()``, waiting for ``test_start``
        self.pending: tuple[RunOptions, Any] | None = None
        #: ``begin()`` failed: the shape ends the run at its next tick
        self.failed = False
        #: why the last run could not start, shown as a banner in the web UI
        self.last_error: str | None = None
        #: what the web UI's pages may name, fixed from the command line before any form
        self.paths = UiPaths.from_options(environment.parsed_options)
        #: the web UI is reachable from the network without a login (a banner)
        self.exposed: str | None = None

    def resolve(self) -> tuple[RunOptions, Any]:
        """Options and scenario, validated; ``ConfigError`` names what is wrong. Started from
        the web UI, its paths must lie where the command line allows (``web_paths.py``)."""
        o = self.environment.parsed_options
        headless = bool(getattr(o, "headless", False))
        if not headless:
            self.paths.check(vars(o) if o is not None else {})
        label = getattr(o, "label", "") or "run"
        return resolve_run_options(
            o,
            host=self.environment.host,
            run_dir=getattr(o, "run_dir", "") or self.paths.default_run_dir(label),
            headless=headless,
        )

    def preflight(self, opts: RunOptions, scenario: Any) -> None:
        """Check the target before any load, unless ``--skip-preflight``; raises
        ``SpecloadError`` (exit 2) naming what is wrong."""
        if getattr(self.environment.parsed_options, "skip_preflight", False):
            return
        from specload.protocol.preflight import preflight

        preflight(opts.host, model=scenario.model, api_key=api_key(self.environment))

    def prepare(self) -> tuple[RunOptions, Any] | None:
        """Check options, scenario and (web UI) the target for the next run; None on bad input,
        reported as one line with exit code 2."""
        try:
            opts, scenario = self.resolve()
            if not opts.headless:  # headless: checked at start-up (_validate_early)
                self.preflight(opts, scenario)
        except SpecloadError as exc:
            self._report(exc)
            return None
        self.pending = (opts, scenario)
        return self.pending

    def begin(self) -> RunSession | None:
        """Start the prepared run (``test_start``); on failure report it and return None."""
        pending, self.pending = self.pending, None
        if pending is None:
            return None
        opts, scenario = pending
        if self.session is not None and self.session.compare is not None:
            self.session.compare.close()  # the previous run's scratch comparisons
        try:
            session = RunSession(self.environment.runner, scenario, opts, api_key(self.environment))
        except SpecloadError as exc:
            self._report(exc)
            self.failed = True
            return None
        self.session = session
        self.last_error = None
        session.start()
        return session

    def make_report(self) -> dict[str, Any]:
        """Start the full comparison of the finished run (the UI's Report button): against
        the baseline run when there is one (even when a live update failed: compare's own
        message then says why), else the run's own report. Written beside the run
        dir, in ``reports/<run>-vs-<baseline>`` (or ``reports/<run>``) under its parent."""
        s = self.session
        if s is None or not s.finished:
            return {"state": "none", "problem": "the report is made once the run has ended"}
        s.start_report()
        return s.report.view()

    def _report(self, exc: SpecloadError) -> None:
        log.error("%s", exc)
        self.last_error = str(exc)
        print(f"specload: error: {exc}", file=sys.stderr, flush=True)
        self.environment.process_exit_code = exc.exit_code

    def stop(self) -> None:
        if self.session is not None:
            self.session.stop()
