"""Which files the web UI may read and where it may write: fixed when the master starts.

Locust's web UI listens on every interface by default and its login is optional, so whoever
reaches the page can fill in the start form and call ``/specload/plan.json``. Those take
paths (a scenario, a run directory, a baseline run). Taken as given, they let anyone read
any file the master can (whether it exists, whether it parses, parts of it in the error) and
write a run directory anywhere. So the paths a page may name are confined to what the person
who started the master chose on its command line:

- scenarios: files under the folder of ``--scenario`` (without one, ``./scenarios``);
- run directories and baseline runs: under ``--runs-root`` (default ``runs``);
- plus the exact ``--scenario``, ``--run-dir`` and ``--baseline-run`` the master was started
  with, wherever they are.

Anything else is refused with one line that is the same whether the path exists or not.
Paths are compared after ``realpath`` (``..`` and symlinks resolved), from the master's
working directory, as the run itself would open them. Start-form fields that the form does
not show (``--runs-root``, ``--api-key``, ``--scenario-set``) are refused too: Locust would
otherwise copy any posted option into the run's options.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from specload.core.errors import ConfigError
from specload.options.run import RUN_OPTIONS

__all__ = ["PathRefused", "UiPaths", "exposure_warning", "hidden_fields"]

#: Hidden options a page must not change (``hidden_fields`` refuses them in a form too).
FIXED = ("scenario_set", "interleave_targets", "runs_root")
#: Without ``--scenario``: the folder of scenarios in the master's working directory.
DEFAULT_SCENARIO_DIR = "scenarios"


class PathRefused(ConfigError):
    """A path outside the folders the master was started with (exit 2, HTTP 400)."""

    def __init__(self, field: str, problem: str) -> None:
        self.problem = problem
        super().__init__(problem, path=field)


def _real(path: str) -> str:
    """``path`` as the OS would open it from here: absolute, ``..`` and symlinks resolved.
    Never touches the file itself, so a refusal says nothing about whether it exists."""
    return os.path.realpath(os.path.abspath(os.path.expanduser(path)))


def _under(path: str, roots: Iterable[str]) -> bool:
    real = _real(path)
    return any(real == r or real.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


@dataclass(frozen=True, slots=True)
class UiPaths:
    """The folders a web UI page may name, from the master's command line (see module doc)."""

    scenario_dirs: tuple[str, ...]  # as given: shown in refusals
    runs_root: str
    given: frozenset[str]  # realpaths of the exact start-up paths
    #: the start-up values of hidden options that name files (``--scenario-set`` can point
    #: ``prompts.file`` anywhere): a run from the page must keep them
    fixed: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_options(cls, opts: Any) -> UiPaths:
        """From Locust's parsed options at start-up (before any form has changed them)."""
        scenario = str(getattr(opts, "scenario", "") or "")
        folder = (os.path.dirname(scenario) or ".") if scenario else DEFAULT_SCENARIO_DIR
        given = (
            scenario,
            str(getattr(opts, "run_dir", "") or ""),
            str(getattr(opts, "baseline_run", "") or ""),
        )
        return cls(
            scenario_dirs=(folder,),
            runs_root=str(getattr(opts, "runs_root", "") or "runs"),
            given=frozenset(_real(p) for p in given if p),
            fixed=tuple((k, str(getattr(opts, k, "") or "")) for k in FIXED),
        )

    def _allowed(self, path: str, roots: Iterable[str]) -> bool:
        return _real(path) in self.given or _under(path, [_real(r) for r in roots])

    def scenario(self, path: str) -> None:
        """Refuse a scenario file outside the scenario folder."""
        if path and not self._allowed(path, self.scenario_dirs):
            folders = ", ".join(self.scenario_dirs)
            raise PathRefused(
                "scenario",
                f"refused (the web UI reads scenario files only under {folders}: the folder "
                f"of the master's --scenario, else ./{DEFAULT_SCENARIO_DIR})",
            )

    def run_dir(self, path: str) -> None:
        """Refuse a run directory to write outside ``--runs-root``."""
        if not self._allowed(path, [self.runs_root]):
            raise PathRefused(
                "run_dir",
                f"refused (the web UI writes run directories only under --runs-root "
                f"{self.runs_root})",
            )

    def baseline(self, path: str) -> None:
        """Refuse a baseline run to read outside ``--runs-root``."""
        if path and not self._allowed(path, [self.runs_root]):
            raise PathRefused(
                "baseline_run",
                f"refused (the web UI reads baseline runs only under --runs-root {self.runs_root})",
            )

    def default_run_dir(self, label: str) -> str:
        """Where a run without ``run_dir`` goes: ``<runs-root>/<label>``."""
        return os.path.join(self.runs_root, label or "run")

    def check(self, values: Mapping[str, Any]) -> None:
        """The paths a run started from the page would use (``values``: the run options by
        ``dest``, as Locust's form posts them); ``PathRefused`` for the first outside."""
        for key, value in self.fixed:
            if str(values.get(key) or "") != value:
                raise PathRefused(key, "refused (set on the master's command line only)")
        self.scenario(str(values.get("scenario") or ""))
        label = str(values.get("label") or "run")
        self.run_dir(str(values.get("run_dir") or "") or self.default_run_dir(label))
        self.baseline(str(values.get("baseline_run") or ""))


def hidden_fields(form: Iterable[str]) -> None:
    """Refuse run options the start form does not show (``--runs-root``, ``--api-key``,
    ``--scenario-set``): Locust copies every posted field into the options."""
    hidden = {o.dest for o in RUN_OPTIONS if not o.in_web_ui}
    for key in form:
        if key in hidden:
            raise PathRefused(
                key, "refused (not a field of the start form; set it on the master's command line)"
            )


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        addr = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False  # a name other than localhost: may resolve to anything
    mapped = getattr(addr, "ipv4_mapped", None)  # ::ffff:127.0.0.1
    return addr.is_loopback or (mapped is not None and mapped.is_loopback)


def exposure_warning(host: str, port: int, web_login: bool) -> str | None:
    """One line when the UI is reachable from the network without a login: it starts runs
    against the target and writes run directories for anyone who can reach the port."""
    if web_login or _loopback(host):
        return None
    where = host or "every interface"
    return (
        f"the web UI on {where}:{port} is open to the network without a login: anyone who "
        "can reach it can start runs (use --web-host 127.0.0.1, or --web-login)"
    )
