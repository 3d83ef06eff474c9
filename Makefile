# `make test` and `make run` set themselves up: a virtualenv in .venv with the project installed.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test run lint typecheck unit test-reliability clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

test: $(STAMP) lint typecheck
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check graphrag storage tasks worker ops tests
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy graphrag storage tasks worker ops

unit: $(STAMP)
	$(BIN)/python -m pytest tests/unit

test-reliability: $(STAMP)
	GRAPHRAG_RELIABILITY_SCALE=full $(BIN)/python -m pytest tests/reliability

run: $(STAMP)
	$(BIN)/python -m ops.demo

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

include benchmarks/Makefile.inc
