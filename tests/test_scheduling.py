"""``make test``'s units of work over xdist workers (``tests/scheduling.py``): a shared
expensive fixture is set up once, not once per worker."""

from __future__ import annotations

from tests.scheduling import SharedFixtureScheduling, unit_of_module


def test_the_real_vllm_modules_are_one_unit() -> None:
    # the session's vLLM servers (tests/vllm/conftest.py) start once for all of them
    for name in ("test_vllm_run", "test_vllm_shape", "test_vllm_sweep"):
        assert unit_of_module(f"tests/vllm/{name}.py") == "tests/vllm", name
    # the GPU kit's dry run shares only the cached env (a file lock guards its one build)
    assert unit_of_module("tests/vllm/test_gpu_kit_dry_run.py") is None


def test_a_module_with_its_own_module_fixture_is_one_unit_and_a_plain_one_is_not() -> None:
    assert unit_of_module("tests/test_dynamic_sweep.py") == "tests/test_dynamic_sweep.py"
    assert unit_of_module("tests/test_pacer.py") is None
    assert unit_of_module("tests/no_such_module.py") is None


def test_the_scheduler_splits_node_ids_into_those_units() -> None:
    split = SharedFixtureScheduling._split_scope
    assert split(None, "tests/vllm/test_vllm_run.py::test_one") == "tests/vllm"  # type: ignore[arg-type]
    assert split(None, "tests/test_pacer.py::test_x[1]") == "tests/test_pacer.py::test_x[1]"  # type: ignore[arg-type]
