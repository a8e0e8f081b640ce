# Set-up and checks. Every target creates .venv and installs the package when needed.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The cores this process may use (nproc honours affinity and cgroup limits).
WORKERS ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[test,mpi,jax]"
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python examples/demo.py

# One worker per core (2 here: ~12 min instead of ~24 on a 2-core Zen 3); a test file's
# tests stay in one worker, in order (module fixtures, files a test writes).
test: $(STAMP)
	$(BIN)/python -m ruff check .
	$(BIN)/python -m pytest -n $(WORKERS) --dist loadfile tests

lint: $(STAMP)
	$(BIN)/python -m ruff check .

# One table of every issue-#7/#17 workload (ours, numpy, JAX when the `bench` extra is
# installed, targets, throughput, compile times), also written to bench/results.json.
# One row, quickly: make bench BENCH_ARGS="--quick --only sort"
BENCH_ARGS ?=
bench: $(STAMP)
	cd bench && ../$(BIN)/python suite.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
