"""What a condition had on: declared, read from the server's /metrics, or unknown (
"the condition is declared, never guessed from a label")."""

from __future__ import annotations

import urllib.request
from pathlib import Path

from analysis.synth_rundir import Cond, write_run
from specload.analysis.compare import compare_runs
from specload.analysis.inputs.features import (
    OtherFeatures,
    ServerSaysOtherwise,
    features_of,
    role_of,
)
from specload.metrics.scrape import parse_metrics

SPEC = '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4}'
NGRAM = {"method": "ngram", "num_speculative_tokens": 4}


def _lines(url: str) -> list[dict[str, object]]:
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        return [{"t": 0.0, "step": 0, "phase": "start", "values": parse_metrics(r.read().decode())}]


def test_a_sweep_declaration_is_taken_as_is() -> None:
    cond = {
        "speculative": None,
        "prefix_caching": False,
        "source": {"speculative": "declared", "prefix_caching": "declared"},
    }
    f = features_of(cond, [])
    assert (f.speculative, f.prefix_caching) == (False, False) and role_of(f) == "baseline"
    assert f.source == {"speculative": "declared", "prefix_caching": "declared"}


def test_nothing_declared_and_no_server_metrics_is_unknown() -> None:
    f = features_of({"speculative": None}, [])
    assert f.speculative is None and f.prefix_caching is None and role_of(f) == "unknown"


def test_the_servers_own_metrics_fill_what_was_not_declared(sim_factory) -> None:
    both = sim_factory("--profile", "tiny", "--enable-prefix-caching", "--speculative-config", SPEC)
    plain = sim_factory("--profile", "tiny", "--no-enable-prefix-caching")
    undeclared = {"speculative": None, "prefix_caching": None}
    f = features_of(undeclared, _lines(both.url))
    assert (f.spec_on, f.prefix_caching) == (True, True) and role_of(f) == "both"
    assert f.source == {"speculative": "server", "prefix_caching": "server"}
    g = features_of(undeclared, _lines(plain.url))
    assert (g.spec_on, g.prefix_caching) == (False, False) and role_of(g) == "baseline"


def test_a_declaration_the_server_contradicts_is_kept_and_reported(sim_factory) -> None:
    plain = sim_factory("--profile", "tiny", "--no-enable-prefix-caching")
    declared = {
        "speculative": {"method": "ngram"},
        "prefix_caching": True,
        "source": {"speculative": "declared", "prefix_caching": "declared"},
    }
    f = features_of(declared, _lines(plain.url))
    assert f.spec_on is True and f.prefix_caching is True
    assert f.conflicts == [
        ServerSaysOtherwise("speculative", declared=True),
        ServerSaysOtherwise("prefix_caching", declared=True),
    ]


def test_a_run_of_a_condition_with_other_features_is_a_conflict(tmp_path: Path) -> None:
    """Runs pooled under one label that ran with different features: the condition takes the
    first run's, and keeps the other's as a conflict (by directory name)."""
    base = write_run(tmp_path / "b", Cond("baseline"), qps=(2,), n=20, warm=0)
    first = write_run(
        tmp_path / "s1",
        Cond("spec", speculative=NGRAM, acceptance_rate=0.6),
        qps=(2,),
        n=20,
        warm=0,
    )
    other = write_run(tmp_path / "s2", Cond("spec"), qps=(2,), n=20, warm=0)
    c = compare_runs([base, first, other], bootstrap=20, force=True)
    (spec,) = [i for i in c.conditions if i.label == "spec"]
    assert spec.features.spec_on is True
    assert spec.features.conflicts == [OtherFeatures("s2", "s1")]
