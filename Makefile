# The two commands a newcomer needs: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint system-deps chaos bench clean

run: system-deps $(STAMP)
	$(BIN)/fieldsync-gui

test: system-deps $(STAMP) lint
	QT_QPA_PLATFORM=offscreen QT_QUICK_BACKEND=software $(BIN)/pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

system-deps:
	@sh scripts/system-deps.sh

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

chaos: system-deps $(STAMP)
	FIELDSYNC_CHAOS_SCALE=large $(BIN)/pytest tests/chaos

bench: $(STAMP)
	$(BIN)/python benchmarks/queue_bench.py --json bench-results/queue.json

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
