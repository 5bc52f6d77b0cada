"""``specload sim`` flags: bad input is one line and exit 2; completions stream shape."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.sim.helpers import MODEL, stream_raw


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--speculative-config", "{bad"], "--speculative-config"),
        (["--speculative-config", '{"method":"ngram"}'], "num_speculative_tokens"),
        (["--profile", "nope"], "--profile"),
        (["--fault-error-rate", "3"], "error_rate"),
        (["--max-num-seqs", "0"], "--max-num-seqs"),
        (["--profile-set", "nope=1"], "--profile-set"),
        (
            [
                "--speculative-config",
                (
                    '{"method":"ngram","num_speculative_tokens":2,'
                    '"num_speculative_tokens_per_batch_size":[[2,4,1]]}'
                ),
            ],
            "must start at 1",
        ),
        (["--spec-overhead-scale", "0"], "--spec-overhead-scale"),
        (["--start-jitter", "abc"], "--start-jitter"),
        (["--start-jitter", "--profile-set", "slow_window_prob=2"], "slow_window_prob"),
    ],
)
def test_bad_flag_exits_2_with_one_line(args, needle) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "specload", "sim", "--port", "1", *args],
        check=False,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in proc.stderr


def test_served_model_name_flag_sets_the_model(sim_factory) -> None:
    s = sim_factory("--profile", "tiny", "--served-model-name", "my-model")
    body = {
        "model": "my-model",
        "messages": [{"role": "user", "content": "x"}],
        "max_tokens": 2,
        "stream": True,
    }
    raw, err = stream_raw(s.url, body)
    assert err is None and b'"model":"my-model"' in raw


def test_completions_stream_has_text_chunks_and_usage(sim) -> None:
    import urllib.request

    req = urllib.request.Request(
        sim.url + "/v1/completions",
        data=json.dumps(
            {
                "model": MODEL,
                "prompt": "Once upon",
                "max_tokens": 4,
                "stream": True,
                "ignore_eos": True,
                "stream_options": {"include_usage": True},
            }
        ).encode(),
        headers={"Content-Type": "application/json"},
    )
    events = [
        e[6:]
        for e in urllib.request.urlopen(req).read().decode().split("\n\n")
        if e.startswith("data: ")
    ]
    assert events[-1] == "[DONE]"
    objs = [json.loads(e) for e in events[:-1]]
    assert all(o["object"] == "text_completion" for o in objs)
    assert objs[-2]["choices"][0]["finish_reason"] == "length"
    assert objs[-1]["usage"]["completion_tokens"] == 4
    assert "".join(o["choices"][0]["text"] for o in objs[:-1])


def test_completions_non_stream_matches_stream_text(shared_sim) -> None:
    from tests.sim.helpers import post

    body = {"model": MODEL, "prompt": "Once upon a time", "max_tokens": 12, "ignore_eos": True}
    status, raw = post(shared_sim.url + "/v1/completions", body)
    full = json.loads(raw)
    assert status == 200 and full["object"] == "text_completion"
    assert full["usage"] == {"prompt_tokens": 4, "total_tokens": 16, "completion_tokens": 12}
    _, raw = post(shared_sim.url + "/v1/completions", {**body, "stream": True})
    events = [e[6:] for e in raw.decode().split("\n\n") if e.startswith("data: ")]
    text = "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1])
    assert text == full["choices"][0]["text"]
