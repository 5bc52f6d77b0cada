"""``report.json`` read back as data: the one reader for the processes that take their answer
from a comparison another process wrote.

``report.json`` is written by ``report/jsonout.py`` (``report_dict``) and read by the live
comparison (the web UI's figures, ``locust/live_compare.summary``) and by a sweep's last
lines (its headline). Both read it here, typed, so they accept and refuse the same files:
the schema string must be this specload's (``JSON_SCHEMA``; an older report words its effects
otherwise), and every key read must be there with a value of its type. A file that breaks
that is bad input: one ``ConfigError`` line naming the file, the key path and what was
expected (``report.json: ratios.spec.tpot_p50.0.effect: missing (expected one of helps,
...)``), never a ``KeyError`` further down.

Only the parts the readers use are typed; the rest of the file is left to readers outside
specload (docs/report.md lists every key).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import orjson

from specload.analysis.statistics.effect import EFFECTS
from specload.core.errors import ConfigError

__all__ = [
    "JSON_SCHEMA",
    "REPORT_JSON",
    "Boundary",
    "Crossover",
    "Figure",
    "RatioCell",
    "ReportData",
    "StepRow",
    "parse_report",
    "read_report",
]

#: 2: four effects (``same`` and ``undecided`` replace ``no_change``), ``to_decide_s`` on
#: undecided ratio rows, crossover ``undecided_qps`` (steps) / ``unsure_qps``, ``settled``.
#: 3: two or more server starts decide over their pooled units (``ci_scope`` ``these_starts``),
#: the interval about this config beside it (ratio rows' ``config``, conditions' ``config_ci``);
#: ``too_few_starts`` is gone.
JSON_SCHEMA = "specload.report/3"
#: The file's name in a report folder.
REPORT_JSON = "report.json"


@dataclass(frozen=True, slots=True)
class Figure:
    """A point with its 95 % CI (``Estimate.to_dict``); None where there was no data."""

    value: float | None
    lo: float | None
    hi: float | None


@dataclass(frozen=True, slots=True)
class StepRow:
    """One step of a condition (``steps[label][i]``): its load and its latencies (seconds)."""

    target_qps: float
    latency: dict[str, Figure]


@dataclass(frozen=True, slots=True)
class RatioCell:
    """One step's condition/baseline ratio of a metric (``ratios[label][metric][i]``): its
    effect by the one rule, and for an undecided one the measured time that would likely
    decide it (``to_decide_s``; None when unknown or decided)."""

    target_qps: float
    ratio: Figure
    effect: str
    to_decide_s: float | None


@dataclass(frozen=True, slots=True)
class Boundary:
    """Where helping stops or starts (``stops_at``, ``starts_at``): ``qps`` is None when the
    boundary lies beyond the tested range, ``beyond`` then says the side."""

    qps: float | None
    beyond: str
    ci: tuple[float | None, float | None]
    ci_beyond: tuple[str, str]

    def to_dict(self) -> dict[str, Any]:
        """As report.json writes it (``analysis.decisions.crossover.Boundary.to_dict``)."""
        return {
            "qps": self.qps,
            "beyond": self.beyond,
            "ci": list(self.ci),
            "ci_beyond": list(self.ci_beyond),
        }


@dataclass(frozen=True, slots=True)
class Crossover:
    """How a condition compares with the baseline on one metric over the tested loads
    (``crossover[label][metric]``, the parts the readers use)."""

    status: str
    qps: float | None
    ci: tuple[float | None, float | None]
    ci_beyond: tuple[str, str]
    tested_range: tuple[float, float]
    last_helping_qps: float | None
    stops_at: Boundary | None
    starts_at: Boundary | None


@dataclass(frozen=True, slots=True)
class ReportData:
    """A ``report.json``, typed where specload reads it back."""

    file: Path
    schema: str
    #: the one-sentence verdict a sweep ends with
    headline: str
    baseline: str
    #: the verdict's metric (``tpot_p50``)
    metric: str
    #: the one rule, in words
    rule: str
    #: each compared condition's verdict sentence
    verdicts: dict[str, str]
    steps: dict[str, list[StepRow]]
    ratios: dict[str, dict[str, list[RatioCell]]]
    crossovers: dict[str, dict[str, Crossover]]


def read_report(path: str | Path) -> ReportData:
    """Read and check a ``report.json`` (the file, or the folder holding it); ConfigError (one
    line: the file, the key, what was expected) when it is missing or not this schema's."""
    p = Path(path)
    if p.is_dir():
        p = p / REPORT_JSON
    try:
        raw = orjson.loads(p.read_bytes())
    except FileNotFoundError:
        raise ConfigError(
            "no such file (expected specload compare's report.json)", file=str(p)
        ) from None
    except IsADirectoryError:
        raise ConfigError("is a directory (expected report.json)", file=str(p)) from None
    except OSError as exc:
        raise ConfigError(f"cannot be read ({exc.strerror or exc})", file=str(p)) from None
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"not valid JSON ({exc})", file=str(p)) from None
    return parse_report(raw, p)


def parse_report(raw: object, file: str | Path = REPORT_JSON) -> ReportData:
    """``raw`` (what ``report_dict`` returns, or a report.json as parsed) typed; ``file`` names
    it in the errors."""
    r = _Reader(Path(file))
    top = r.obj(raw, "", "an object (not a specload report.json?)")
    schema = r.text(top, "schema")
    if schema != JSON_SCHEMA:
        r.fail(
            "schema", f"{schema!r} is not this specload's report layout (expected {JSON_SCHEMA!r})"
        )
    steps = r.obj(r.key(top, "steps"), "steps")
    ratios = r.obj(r.key(top, "ratios"), "ratios")
    crossover = r.obj(r.key(top, "crossover"), "crossover")
    verdicts = r.obj(r.key(top, "verdict"), "verdict")
    return ReportData(
        file=r.file,
        schema=schema,
        headline=r.text(top, "headline"),
        baseline=r.text(top, "baseline"),
        metric=r.text(top, "metric"),
        rule=r.text(top, "rule"),
        verdicts={label: r.text(verdicts, label, "verdict") for label in verdicts},
        steps={
            label: [
                r.step(row, f"steps.{label}.{i}")
                for i, row in enumerate(r.seq(rows, f"steps.{label}"))
            ]
            for label, rows in steps.items()
        },
        ratios={
            label: {
                m: [
                    r.ratio(row, f"ratios.{label}.{m}.{i}")
                    for i, row in enumerate(r.seq(rows, f"ratios.{label}.{m}"))
                ]
                for m, rows in r.obj(ms, f"ratios.{label}").items()
            }
            for label, ms in ratios.items()
        },
        crossovers={
            label: {
                m: r.crossover(x, f"crossover.{label}.{m}")
                for m, x in r.obj(xs, f"crossover.{label}").items()
            }
            for label, xs in crossover.items()
        },
    )


class _Reader:
    """Typed access to one file's values; each failure names the file and the key path."""

    def __init__(self, file: Path) -> None:
        self.file = file

    def fail(self, where: str, problem: str) -> NoReturn:
        raise ConfigError(problem, file=str(self.file), path=where or None)

    def missing(self, where: str, expected: str) -> NoReturn:
        self.fail(where, f"missing (expected {expected})")

    def key(self, d: dict[str, Any], key: str, where: str = "") -> Any:
        if key not in d:
            self.missing(_join(where, key), "a value")
        return d[key]

    def obj(self, v: Any, where: str, expected: str = "an object") -> dict[str, Any]:
        if not isinstance(v, dict):
            self.fail(where, f"{_shown(v)} (expected {expected})")
        return v

    def seq(self, v: Any, where: str) -> list[Any]:
        if not isinstance(v, list):
            self.fail(where, f"{_shown(v)} (expected a list)")
        return v

    def text(self, d: dict[str, Any], key: str, where: str = "") -> str:
        path = _join(where, key)
        if key not in d:
            self.missing(path, "a string")
        v = d[key]
        if not isinstance(v, str):
            self.fail(path, f"{_shown(v)} (expected a string)")
        return v

    def num(self, d: dict[str, Any], key: str, where: str, *, null: bool = False) -> float | None:
        path = _join(where, key)
        expected = "a number or null" if null else "a number"
        if key not in d:
            self.missing(path, expected)
        v = d[key]
        if v is None and null:
            return None
        if not _is_number(v):
            self.fail(path, f"{_shown(v)} (expected {expected})")
        return float(v)

    def real(self, d: dict[str, Any], key: str, where: str) -> float:
        v = self.num(d, key, where)
        assert v is not None  # num without null returns a number or fails
        return v

    def bounds(self, d: dict[str, Any], key: str, where: str) -> tuple[float | None, float | None]:
        """``[lo, hi]``: two numbers, either null where the data gives no bound."""
        path = _join(where, key)
        v = self.seq(self.key(d, key, where), path)
        if len(v) != 2 or not all(x is None or _is_number(x) for x in v):
            self.fail(path, f"{_shown(v)} (expected [lo, hi]: two numbers or nulls)")
        return (None if v[0] is None else float(v[0]), None if v[1] is None else float(v[1]))

    def sides(self, d: dict[str, Any], key: str, where: str) -> tuple[str, str]:
        """``ci_beyond``: for each bound, the side of the tested range it lies beyond, or ""."""
        path = _join(where, key)
        v = self.seq(self.key(d, key, where), path)
        if len(v) != 2 or not all(isinstance(x, str) for x in v):
            self.fail(path, f"{_shown(v)} (expected two strings)")
        return (v[0], v[1])

    def figure(self, v: Any, where: str) -> Figure:
        d = self.obj(v, where, "an object {value, lo, hi}")
        return Figure(
            self.num(d, "value", where, null=True),
            self.num(d, "lo", where, null=True),
            self.num(d, "hi", where, null=True),
        )

    def step(self, v: Any, where: str) -> StepRow:
        d = self.obj(v, where)
        latency = self.obj(self.key(d, "latency_s", where), _join(where, "latency_s"))
        return StepRow(
            target_qps=self.real(d, "target_qps", where),
            latency={m: self.figure(e, f"{where}.latency_s.{m}") for m, e in latency.items()},
        )

    def ratio(self, v: Any, where: str) -> RatioCell:
        d = self.obj(v, where)
        effect = self.text(d, "effect", where)
        if effect not in EFFECTS:
            self.fail(_join(where, "effect"), f"{effect!r} (expected one of {', '.join(EFFECTS)})")
        return RatioCell(
            target_qps=self.real(d, "target_qps", where),
            ratio=self.figure(d, where),
            effect=effect,
            to_decide_s=self.num(d, "to_decide_s", where, null=True)
            if "to_decide_s" in d
            else None,
        )

    def boundary(self, d: dict[str, Any], key: str, where: str) -> Boundary | None:
        v = self.key(d, key, where)
        if v is None:
            return None
        path = _join(where, key)
        b = self.obj(v, path, "an object {qps, beyond, ci, ci_beyond} or null")
        return Boundary(
            qps=self.num(b, "qps", path, null=True),
            beyond=self.text(b, "beyond", path),
            ci=self.bounds(b, "ci", path),
            ci_beyond=self.sides(b, "ci_beyond", path),
        )

    def crossover(self, v: Any, where: str) -> Crossover:
        d = self.obj(v, where)
        lo, hi = self.bounds(d, "tested_range", where)
        if lo is None or hi is None:
            self.fail(_join(where, "tested_range"), "a bound is null (expected two numbers)")
        return Crossover(
            status=self.text(d, "status", where),
            qps=self.num(d, "qps", where, null=True),
            ci=self.bounds(d, "ci", where),
            ci_beyond=self.sides(d, "ci_beyond", where),
            tested_range=(lo, hi),
            last_helping_qps=self.num(d, "last_helping_qps", where, null=True),
            stops_at=self.boundary(d, "stops_at", where),
            starts_at=self.boundary(d, "starts_at", where),
        )


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _shown(v: Any) -> str:
    """A value as the error shows it: short, its JSON type named."""
    if v is None:
        return "null"
    kind = {dict: "an object", list: "a list", str: "a string", bool: "a boolean"}.get(
        type(v), "null" if v is None else "a number"
    )
    text = orjson.dumps(v).decode()
    return f"{kind} {text if len(text) <= 40 else text[:37] + '...'}"
