# `make test` and `make run` set themselves up: a virtualenv in .venv with the project installed.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test services run lint typecheck unit test-reliability docs clean

# The suite runs in parallel worker processes (pytest-xdist): much of it waits on processes, brokers
# and databases rather than computing, so more workers than cores pays. Every test makes its own
# databases, key prefixes, vhosts and ports, so the workers never share state. TEST_JOBS=0: serial.
TEST_JOBS ?= 4

# Set-up prints one line; pip's own output goes to .venv/install.log (shown only if it fails).
$(STAMP): pyproject.toml
	@echo "setting up $(VENV) (pip's log: $(VENV)/install.log)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@{ $(BIN)/python -m pip install --disable-pip-version-check --upgrade pip && \
	   $(BIN)/python -m pip install --disable-pip-version-check -e '.[dev]'; } \
	   > $(VENV)/install.log 2>&1 || { tail -30 $(VENV)/install.log; exit 1; }
	@touch $(STAMP)

test: $(STAMP) services lint typecheck
	$(BIN)/python -m pytest -n $(TEST_JOBS) --durations=20

# MariaDB, Redis and RabbitMQ up; nginx and Prometheus installed (or one line naming what to run).
services:
	@tests/services/prepare.sh

lint: $(STAMP)
	$(BIN)/ruff check graphrag service storage tasks worker ops tests
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy graphrag service storage tasks worker ops

# The fast suite: algorithms, use cases and the in-memory ports; no database, Redis or broker.
unit: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit tests/usecases tests/contracts -m "not mariadb and not redis"

test-reliability: $(STAMP)
	GRAPHRAG_RELIABILITY_SCALE=full $(BIN)/python -m pytest tests/reliability \
	  tests/usecases/test_access_property.py

run: $(STAMP)
	@$(BIN)/python -m ops.demo

# README's configuration tables and the database grants' SQL (README, runbook) are generated
# (ops/docgen.py): this writes them again after a setting, a grant or docker-compose.yml changed.
docs: $(STAMP)
	$(BIN)/python -m ops.docgen --write

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

include benchmarks/Makefile.inc
