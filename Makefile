# The two commands a newcomer needs: `make run` and `make test`.
# `make run` installs only what running needs: the app, the embedded server's extra
# (fieldsync[server]) and the libraries Qt loads. `make test` adds the dev tools and every
# system package the tests use (PostgreSQL, a keyring, validators).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
RUN_STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
# tus-js-client for the tus interop tests (tests/server/test_uploads_interop.py), from npm.
INTEROP := tests/interop
NODE_STAMP := $(INTEROP)/node_modules/.installed

.PHONY: run test lint ruff system-deps system-deps-run chaos bench report clean

run: system-deps-run $(RUN_STAMP)
	$(BIN)/fieldsync-gui

# `make test` spreads the tests over TEST_WORKERS processes (pytest-xdist; `worksteal` hands a
# finished worker the next test of a busy one). More workers than the 2 cores pay: much of the
# suite waits on subprocesses, sockets and fsync, so a fourth worker fills the core the others
# leave idle at the same CPU. TEST_WORKERS=0 runs in this process. The 25
# slowest tests are printed at the end, so the next slow one is seen. Bytecode is written even
# where the environment says not to (PYTHONDONTWRITEBYTECODE): else each worker and each of the
# hundreds of programs the tests start compiles the sources and rewrites the tests' asserts again.
# mypy (15 s on one core in a fresh clone) runs beside the tests, which leave a core idle while
# they wait; its verdict is printed after theirs and fails `make test` as well.
TEST_WORKERS ?= 4
MYPY_LOG := .mypy_cache/make-test.log

test: system-deps $(TEST_STAMP) $(NODE_STAMP) ruff
	@mkdir -p .mypy_cache; $(BIN)/mypy >$(MYPY_LOG) 2>&1 & mypy=$$!; \
	PYTHONDONTWRITEBYTECODE= QT_QPA_PLATFORM=offscreen QT_QUICK_BACKEND=software $(BIN)/pytest \
		-n $(TEST_WORKERS) --dist worksteal --durations=25; tests=$$?; \
	wait $$mypy; typed=$$?; echo "mypy:"; cat $(MYPY_LOG); \
	[ $$tests -eq 0 ] && [ $$typed -eq 0 ]

lint: ruff
	$(BIN)/mypy

ruff: $(TEST_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

system-deps:
	@sh scripts/system-deps.sh test

system-deps-run:
	@sh scripts/system-deps.sh run

# The venv's pip installs uv, and uv the rest: it fetches and unpacks the wheels in parallel,
# a few seconds where pip took 20 to 70 on a fresh clone, before any test could start. Bytecode
# is compiled at install, as pip does, not by each test worker racing the others for it.
UV := VIRTUAL_ENV=$(abspath $(VENV)) UV_COMPILE_BYTECODE=1 $(BIN)/uv

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

# Its own target, so that a venv made before uv was used gets it too.
$(BIN)/uv: | $(VENV)/bin/python
	$(BIN)/python -m pip install --quiet uv

$(RUN_STAMP): pyproject.toml | $(BIN)/uv
	$(UV) pip install --quiet -e '.[server]'
	touch $(RUN_STAMP)

# The test install covers the run one.
$(TEST_STAMP): pyproject.toml | $(BIN)/uv
	$(UV) pip install --quiet -e '.[dev,server]'
	touch $(TEST_STAMP) $(RUN_STAMP)

$(NODE_STAMP): $(INTEROP)/package.json $(INTEROP)/package-lock.json
	cd $(INTEROP) && npm ci --no-audit --no-fund --loglevel=error
	touch $(NODE_STAMP)

chaos: system-deps $(TEST_STAMP)
	FIELDSYNC_CHAOS_SCALE=large $(BIN)/pytest tests/chaos

# Every benchmark's full run and both chaos scales, each writing benchmarks/results/<name>.json,
# then the figure tables of README.md and docs/ rendered from them (commit the lot).
# `make test` checks the tables against the JSON (tests/test_report.py).
QT_ENV := QT_QPA_PLATFORM=offscreen QT_QUICK_BACKEND=software
RESULTS := benchmarks/results

bench: system-deps $(TEST_STAMP)
	$(BIN)/python benchmarks/queue_bench.py --json $(RESULTS)/queue_bench.json
	$(BIN)/python benchmarks/sync_bench.py --json $(RESULTS)/sync_bench.json
	$(BIN)/python benchmarks/cli_sync_bench.py --json $(RESULTS)/cli_sync_bench.json
	$(BIN)/python benchmarks/server_bench.py --json $(RESULTS)/server_bench.json
	$(QT_ENV) $(BIN)/python benchmarks/ui_bench.py --json $(RESULTS)/ui_bench.json
	$(QT_ENV) FIELDSYNC_CHAOS_RESULTS=1 $(BIN)/pytest tests/chaos
	$(QT_ENV) FIELDSYNC_CHAOS_RESULTS=1 FIELDSYNC_CHAOS_SCALE=large $(BIN)/pytest tests/chaos
	$(BIN)/python benchmarks/report.py

# The tables again from the committed JSON (a failed chaos run above still wrote its figures).
report: $(TEST_STAMP)
	$(BIN)/python benchmarks/report.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache $(INTEROP)/node_modules
