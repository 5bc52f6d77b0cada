"""The CI gate options, defined once: ``specload compare`` and Locust's command line.

A CI job wants one command: run the load, compare it with a stored baseline run, fail the
pipeline on a regression, and leave a JUnit file for the CI's test view. So the gate options
(``--max-regression``, ``--operating-qps``, ``--gate-on``, ``--slo``, ``--junit``) exist on
``specload compare`` and, with ``--baseline-run``, on headless Locust, which at the end runs
``specload compare`` with them (``GateOptions.argv()``). Both parsers are fed from
``add_gate_options`` and both check what was given with ``resolve_gate_options``, so an
option has one name, one default, one help text and one error for bad input (exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from specload.core.errors import ConfigError

__all__ = [
    "GateOptions",
    "add_baseline_option",
    "add_gate_options",
    "add_slo_option",
    "resolve_gate_options",
]


def add_baseline_option(parser: Any) -> None:
    """``--baseline``, on compare's and sweep's parsers: one rule (``core.condition.
    choose_baseline``) and one help text for which condition every change is read against."""
    parser.add_argument(
        "--baseline",
        metavar="LABEL",
        help="the condition every change is measured against (default: the one labelled "
        "'baseline', else the first given; exit 2 when the first given runs speculation and "
        "another does not)",
    )


def add_slo_option(parser: Any, *, help_suffix: str = "", **extra: Any) -> None:
    """``--slo``, on compare's, run's and Locust's parsers (with the gates) and on sweep's
    (``help_suffix``: what else it steers there)."""
    parser.add_argument(
        "--slo",
        action="append",
        default=[],
        metavar="METRIC=DURATION",
        help="a latency SLO, e.g. ttft_p95=500ms, tpot_p95=25ms, e2e_p99=8s (repeatable; "
        "default: the scenario's slo:): per condition the highest load at which every SLO "
        "holds (its capacity, with a CI) and goodput per step (req/s meeting every SLO)"
        + help_suffix,
        **extra,
    )


def add_gate_options(parser: Any, *, locust: bool = False) -> None:
    """Add the gate options to ``parser`` (argparse, or Locust's parser with ``locust``: then
    kept out of the web UI's form, where nothing reads them)."""
    from specload.analysis.decisions.gates import GATE_ON

    extra: dict[str, Any] = {"include_in_web_ui": False} if locust else {}
    with_baseline = " (with --baseline-run: checked when the run ends)" if locust else ""
    parser.add_argument(
        "--operating-qps",
        type=float,
        metavar="Q",
        help="gates apply to steps up to this load (default: every step)",
        **extra,
    )
    parser.add_argument(
        "--max-regression",
        action="append",
        default=[],
        metavar="METRIC=PCT",
        help="fail (exit 1) when a condition hurts METRIC (the report's rule: significantly "
        "worse) by more than PCT percent at a step up to --operating-qps, judged by --gate-on "
        "(percentage points for error_rate, judged on its value; capacity=PCT: its capacity "
        "within the --slo is significantly lower than the baseline's by more than PCT "
        "percent); a gate that would check no step is an error (exit 2); repeatable"
        + with_baseline,
        **extra,
    )
    parser.add_argument(
        "--gate-on",
        choices=list(GATE_ON),
        default="ci",
        help="ci: a gate fails only when the whole 95%% CI of the change lies beyond its limit; "
        "a point estimate beyond it with the CI reaching back passes with a 'possible "
        "regression' line (exit 0); point: fails on the point estimate, the stricter rule "
        "(default: ci)",
        **extra,
    )
    add_slo_option(parser, **extra)
    parser.add_argument(
        "--junit",
        default="",
        metavar="PATH",
        help="also write the gates and each condition's verdict as JUnit XML to PATH (one "
        "testcase per gate and condition, failed gates as failure elements)" + with_baseline,
        **extra,
    )


@dataclass(frozen=True, slots=True)
class GateOptions:
    """The gate options as given, checked (``resolve_gate_options``)."""

    max_regression: tuple[str, ...] = ()
    operating_qps: float | None = None
    gate_on: str = "ci"
    slo: tuple[str, ...] = ()
    junit: str | None = None

    @property
    def asked(self) -> bool:
        """Whether any gate, SLO or JUnit file was asked for."""
        return bool(self.max_regression or self.slo or self.junit)

    def gates(self) -> list[Any]:
        """The ``analysis.decisions.gates.Gate`` of each ``--max-regression``."""
        from specload.analysis.decisions.gates import parse_gate

        return [parse_gate(spec, self.gate_on) for spec in self.max_regression]

    def slos(self) -> list[Any] | None:
        """The ``--slo`` objectives, or None (the scenario's ``slo:``)."""
        from specload.core.slo import parse_slo

        return [parse_slo(spec) for spec in self.slo] or None

    def argv(self) -> list[str]:
        """The same options for a ``specload compare`` command line."""
        out = [f"--max-regression={x}" for x in self.max_regression]
        out += [f"--slo={x}" for x in self.slo]
        if self.operating_qps is not None:
            out += ["--operating-qps", repr(self.operating_qps)]
        out += ["--gate-on", self.gate_on]
        return out + (["--junit", self.junit] if self.junit else [])


def resolve_gate_options(values: Any) -> GateOptions:
    """Check the gate options in an argparse namespace; ConfigError (exit 2) names the first
    thing wrong (a gate, an SLO, the operating point)."""
    opts = GateOptions(
        max_regression=tuple(getattr(values, "max_regression", None) or ()),
        operating_qps=getattr(values, "operating_qps", None),
        gate_on=getattr(values, "gate_on", None) or "ci",
        slo=tuple(getattr(values, "slo", None) or ()),
        junit=getattr(values, "junit", "") or None,
    )
    if opts.operating_qps is not None and opts.operating_qps <= 0:
        raise ConfigError(f"--operating-qps {opts.operating_qps:g}: expected a load > 0 (req/s)")
    opts.gates()
    opts.slos()
    return opts
