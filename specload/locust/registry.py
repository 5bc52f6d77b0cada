"""Which specload roles a Locust process holds, per ``Environment``.

``install()`` (``locust/plugin.py``) gives each process its roles on ``init``: a
``LoadProcess`` where users run (local runner, workers) and a ``MasterSide`` where the
schedule and the run directory live (local runner, master). The shape, the users and the web
UI look them up here, so none of them imports the plugin and the plugin imports none of them
back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specload.locust.load_process import LoadProcess
from specload.locust.master_side import MasterSide

__all__ = ["Roles", "load_process", "master_side", "roles"]


@dataclass
class Roles:
    load: LoadProcess | None = None
    master: MasterSide | None = None


_ROLES: dict[int, Roles] = {}


def roles(environment: Any) -> Roles:
    """This environment's roles (created empty on first use)."""
    return _ROLES.setdefault(id(environment), Roles())


def load_process(environment: Any) -> LoadProcess | None:
    """This process's load side (None on a master, which runs no users)."""
    r = _ROLES.get(id(environment))
    return r.load if r else None


def master_side(environment: Any) -> MasterSide | None:
    """This process's master side (None on a worker)."""
    r = _ROLES.get(id(environment))
    return r.master if r else None
