"""Every bad request gets vLLM's error object and the right status."""

from __future__ import annotations

import json

import pytest

from tests.sim.helpers import MODEL, get_json, post

MSGS = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("body", "status"),
    [
        (b"{not json", 400),
        (b"[1, 2]", 400),
        ({"model": MODEL}, 400),  # no messages
        ({"model": MODEL, "messages": "hi"}, 400),
        ({"model": MODEL, "messages": MSGS, "max_tokens": 0}, 400),
        ({"model": MODEL, "messages": MSGS, "stop": 5}, 400),
        ({"model": "no-such-model", "messages": MSGS}, 404),
        ({"model": MODEL, "messages": [{"role": "user", "content": "word " * 5000}]}, 400),
        ({"model": MODEL, "messages": MSGS, "max_tokens": 5000}, 400),
    ],
)
def test_bad_chat_request_gets_error_status_and_object(shared_sim, body, status) -> None:
    got, raw = post(shared_sim.url + "/v1/chat/completions", body)
    assert got == status
    err = json.loads(raw)["error"]
    assert err["code"] == status and err["message"]
    assert err["type"] == {400: "BadRequestError", 404: "NotFoundError"}[status]


def test_too_long_prompt_message_names_the_context_length(shared_sim) -> None:
    _, raw = post(
        shared_sim.url + "/v1/chat/completions",
        {"model": MODEL, "messages": [{"role": "user", "content": "w " * 5000}]},
    )
    assert "maximum context length is 4096" in json.loads(raw)["error"]["message"]


def test_bad_completions_request_gets_error(shared_sim) -> None:
    assert post(shared_sim.url + "/v1/completions", {"model": MODEL})[0] == 400
    assert post(shared_sim.url + "/v1/completions", {"model": "x", "prompt": "hi"})[0] == 404


def test_injected_5xx_and_429_rates_answer_with_errors(sim) -> None:
    body = {"model": MODEL, "messages": MSGS, "max_tokens": 2}
    assert post(sim.url + "/debug/faults", {"error_rate": 1.0, "error_status": 503})[0] == 200
    status, raw = post(sim.url + "/v1/chat/completions", body)
    assert status == 503 and json.loads(raw)["error"]["code"] == 503
    post(sim.url + "/debug/faults", {"error_rate": 0.0, "rate_limit_rate": 1.0})
    assert post(sim.url + "/v1/chat/completions", body)[0] == 429
    post(sim.url + "/debug/faults", {"rate_limit_rate": 0.0})
    assert post(sim.url + "/v1/chat/completions", body)[0] == 200
    assert get_json(sim.url + "/debug/faults")["rate_limit_rate"] == 0.0


def test_bad_fault_update_is_rejected_and_changes_nothing(sim) -> None:
    status, raw = post(sim.url + "/debug/faults", {"error_rate": 2})
    assert status == 400 and "error_rate" in json.loads(raw)["error"]["message"]
    assert post(sim.url + "/debug/faults", {"nonsense": 1})[0] == 400
    assert get_json(sim.url + "/debug/faults")["error_rate"] == 0.0
