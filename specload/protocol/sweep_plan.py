"""What a sweep is asked to do (``SweepPlan``) and how each of its runs ended
(``ConditionResult``): the data the sweep, its child runs and its comparison share.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from specload.core.condition import Condition, choose_baseline
from specload.core.errors import ConfigError
from specload.protocol.until_decided import UntilDecided

__all__ = ["ConditionResult", "SweepPlan"]


@dataclass
class SweepPlan:
    """Everything a sweep needs. Exactly one of ``server_cmd`` and ``url`` is set."""

    scenario: Path
    out: Path
    conditions: Sequence[Condition]
    server_cmd: str | None = None
    url: str | None = None
    port: int | None = None
    health_timeout_s: float = 600.0
    store_text: bool = False
    processes: int | None = None
    run_args: Sequence[str] = ()
    skip_preflight: bool = (
        False  # else each server is checked (specload.protocol.preflight) once healthy
    )
    #: fresh server starts per condition, interleaved across conditions (``sweep_order``)
    replicates: int = 1
    #: appended to each run dir's name (``-p2`` for the refine search's second pass)
    dir_tag: str = ""
    #: ``--interleave``: every condition's server up at once, blocks interleaved
    #: (``protocol/interleaved_sweep.py``); with ``urls`` (LABEL -> URL) instead of ``url``
    interleave: bool = False
    urls: dict[str, str] = field(default_factory=dict)
    #: the condition every change is read against (``core.condition.choose_baseline``;
    #: empty: chosen here among ``conditions``)
    baseline: str = ""
    #: ``--until-decided`` (with ``interleave``): more blocks where steps are undecided
    #: (``protocol/until_decided.py``); None: the scenario's blocks only
    until_decided: UntilDecided | None = None

    def __post_init__(self) -> None:
        if self.replicates < 1:
            raise ConfigError(f"{self.replicates} (expected 1 or more)", path="--replicates")
        if not self.baseline and self.conditions:
            managed = self.server_cmd is not None
            self.baseline = choose_baseline(
                {c.name: c.runs_speculation(managed) for c in self.conditions}
            )


@dataclass
class ConditionResult:
    """How one condition's run ended: ``status`` is run.json's (or ``failed`` if it has none)."""

    condition: Condition
    run_dir: Path
    status: str
    returncode: int | None = None
    server_cmd: str | None = None
    interrupted: bool = False
    server_exit: int | None = None  # the server's exit code when it died during the run
    replicate: int = 1
    #: seconds from the server's start to its stop (what a sweep spends of a GPU)
    server_s: float = 0.0
