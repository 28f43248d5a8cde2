# Every target builds its own virtual environment, so a fresh clone needs nothing but Python 3.12.
PYTHON ?= $(shell command -v python3.12 >/dev/null 2>&1 && echo python3.12 || echo python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP_ARC := $(VENV)/.installed-arc
STAMP_DEV := $(VENV)/.installed-dev
# The machine's PostgreSQL server; its tests skip when it cannot be reached (and fail under CI=true).
export LEDGER_TEST_PG_URL ?= postgresql+psycopg://postgres@127.0.0.1:5432/test

# Test processes side by side (pytest-xdist); 0 runs the tests in this process, one after another. Most fast tests
# wait on a child process or a server, so four of them share two cores well (each takes the next test when it is
# done: worksteal); the heavy tier's soaks and kill loops load the machine themselves and keep two.
TEST_WORKERS ?= 4
HEAVY_WORKERS ?= 2

.PHONY: demo test test-all lint bench clean chromium

# The viewer's browser tests drive Debian's chromium through Playwright (the dev extra); never a downloaded browser.
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP_ARC): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[arc]'
	touch $@

$(STAMP_DEV): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@ $(STAMP_ARC)

demo: $(STAMP_ARC)
	$(BIN)/ledger demo $(if $(DB),--db $(DB),)

# The tests start `ledger` many times: compiled once here, not in each process (where PYTHONDONTWRITEBYTECODE is
# set, every process would compile every module it imports again). Game files and test data are left as they are:
# a folder of them must hold only what the toolkit or a recording put there.
COMPILE := $(BIN)/python -m compileall -q -x '/(demo_games|environment_files|harness_games|recordings_corpus|vectors)/' \
	ledger migrations tests scripts

# The fast tier: everything but the tests marked `heavy` (pyproject.toml says which).
test: lint
	$(COMPILE)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal -m "not heavy" $(PYTEST_ARGS)

# Both tiers: what CI runs (.ci/run). The browser tests are heavy, so only this target needs chromium.
test-all: lint chromium
	$(COMPILE)
	$(BIN)/python -m pytest -n $(HEAVY_WORKERS) $(PYTEST_ARGS)

lint: $(STAMP_DEV)
	$(BIN)/ruff check ledger tests scripts migrations
	$(BIN)/ruff format --check ledger tests scripts migrations
	$(BIN)/mypy

chromium:
	@test -x $(CHROMIUM) || { $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; }

bench: $(STAMP_DEV)
	$(BIN)/python scripts/bench.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache build dist *.egg-info
