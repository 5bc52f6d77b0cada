"""Master/worker messages survive the wire (msgpack, as Locust sends them) unchanged."""

from __future__ import annotations

import msgpack

from specload.locust.messages import (
    Drain,
    FinalCounts,
    RecordBatch,
    RunStart,
    StepChange,
    WorkerReady,
    split_slots,
)


def _over_the_wire(data: dict) -> dict:
    # exactly what locust.rpc.protocol.Message does
    return msgpack.loads(msgpack.dumps(data), raw=False, strict_map_key=False)


def test_every_message_round_trips_through_msgpack() -> None:
    msgs = [
        RunStart(
            "r1", {"name": "s", "steps": [1.0, 2.0]}, "/x.yaml", "m", "http://h:1", store_text=True
        ),
        StepChange(
            "r1", 3, 1, 4.0, 10.0, 12.0, 20.0, 15.5, epoch=2, slot=1, slots=3, prompt_offset=40
        ),
        Drain("r1"),
        Drain("r1", abort=True),
        WorkerReady("r1", "w1", "words"),
        RecordBatch(
            "r1", "w1", [{"request_id": "a", "itl_s": [0.1], "error": {"kind": "http"}}], 7, {3: 5}
        ),
        FinalCounts("r1", "w1", 7, 7),
    ]
    for m in msgs:
        assert type(m).from_wire(_over_the_wire(m.to_wire())) == m
    assert len({type(m).TYPE for m in msgs}) == len(msgs) - 1  # two Drains


def test_batch_window_counts_accept_string_keys() -> None:
    b = RecordBatch.from_wire({"run_id": "r", "worker": "w", "sent_in_window": {"2": 4}})
    assert b.sent_in_window == {2: 4} and b.records == [] and b.sent == 0


def test_unknown_keys_from_newer_senders_are_ignored() -> None:
    assert Drain.from_wire({"run_id": "r", "new_field": 1}) == Drain("r")


def test_step_name_is_the_locust_row_name() -> None:
    assert StepChange("r", 0, 0, 4.0, 0, 0, 1, 0).name == "chat @ 4 qps"
    assert StepChange("r", 0, 0, 0.5, 0, 0, 1, 0).name == "chat @ 0.5 qps"


def test_split_gives_each_worker_one_slot_stably() -> None:
    assert split_slots(["b", "a", "c"]) == {"a": (0, 3), "b": (1, 3), "c": (2, 3)}
    assert split_slots(["c", "a"]) == {"a": (0, 2), "c": (1, 2)}
    assert split_slots([]) == {}
