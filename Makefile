# The two set-up commands (see README): `make run` starts the daemon, `make test` runs the whole suite
# (`make test-fast`: the suite without the e2e, browser, crash-and-fault and slow tests, about two minutes
# on two cores, for the edit-test loop; CI runs `make test`).
# Each creates the virtualenv and installs what it needs on a fresh machine, at the exact versions (and
# hashes) locked: `make run` only what the daemon needs (requirements-run.lock), `make test` that plus the
# test tools (requirements.lock). After changing dependencies in pyproject.toml, run `make lock` and commit
# all three files: tests/test_lock.py fails while they disagree.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run
LOCK := requirements.lock
RUN_LOCK := requirements-run.lock
UV_VERSION := 0.13.9
# Herald's own packages: an editable install leaves them uncompiled, and where PYTHONDONTWRITEBYTECODE is set
# every start compiled its ~150 modules again (~0.15-0.4 s before the first answer); compiled here once.
PACKAGES := gateway agent_core tools cron

.PHONY: run test test-fast lint bench faults soak lock clean

$(STAMP): pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r $(LOCK)
	$(BIN)/python -m pip install --quiet --no-deps -e .
	$(BIN)/python -m compileall -q -j0 $(PACKAGES)
	touch $(STAMP) $(RUN_STAMP)

# The daemon's own dependencies only (no pytest, ruff, playwright); `make test` later adds the rest.
$(RUN_STAMP): pyproject.toml $(RUN_LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r $(RUN_LOCK)
	$(BIN)/python -m pip install --quiet --no-deps -e .
	$(BIN)/python -m compileall -q -j0 $(PACKAGES)
	touch $(RUN_STAMP)

run: $(RUN_STAMP)
	@echo "herald is installed in $(BIN)/ (e.g. $(BIN)/herald web-url, $(BIN)/herald --help)"
	$(BIN)/herald run

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n auto -q

# The markers are registered in pyproject.toml; tests/e2e and tests/faults mark their tests in their conftest.
test-fast: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n auto -q -m "not e2e and not faults and not browser and not slow"

lint: $(STAMP)
	$(BIN)/ruff check .

# Every bench at small sizes, one at a time (about a minute and a half); writes bench/RESULTS.md.
# `make bench BENCH_ARGS="--only telegram,discord"` for some of them.
BENCH_ARGS ?=
bench: $(STAMP)
	$(BIN)/python bench/run_all.py $(BENCH_ARGS)

# The crash-and-fault suite at full length (20 kills in a row, minute-long model and platform outages);
# the default `make test` runs the same tests short.
faults: $(STAMP)
	HERALD_FAULTS_LONG=1 $(BIN)/python -m pytest -m faults -q -o timeout=3600 tests/faults

# An hour at a steady load with a cron job every minute; fails if memory or file descriptors keep growing.
soak: $(STAMP)
	$(BIN)/python bench/soak.py

# Resolves every dependency (runtime and dev) for every platform, with hashes, keeping the versions
# already locked where pyproject.toml still allows them; then the runtime-only lock, constrained to the
# versions of the full one (tests/test_lock.py checks that they agree). Newest of everything: `make lock UPGRADE=--upgrade`;
# of one package: `make lock UPGRADE="--upgrade-package aiohttp"`.
UPGRADE ?=
lock:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet "uv==$(UV_VERSION)"
	$(BIN)/uv pip compile pyproject.toml --extra dev --universal --python-version 3.11 --generate-hashes \
		--custom-compile-command "make lock" --quiet $(UPGRADE) -o $(LOCK)
	$(BIN)/uv pip compile pyproject.toml --universal --python-version 3.11 --generate-hashes \
		--constraint $(LOCK) --custom-compile-command "make lock" --quiet -o $(RUN_LOCK)

clean:
	rm -rf $(VENV) .pytest_cache
