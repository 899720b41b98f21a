# make demo: create .venv, install, run the closed loop on the embedded model.
# make test: create .venv, install what the tests need, run the suite.
# System packages: bubblewrap (the code environment's sandbox) and chromium (browser tests of the
# report and viewer). `make test` installs them with apt-get when it runs as root; elsewhere the
# tests that need them skip with a reason, unless TRAJFORGE_REQUIRE_SYSDEPS=1 (CI) makes that fail.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

SYSPKGS := bubblewrap chromium

.PHONY: demo test install sysdeps clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

sysdeps:
	@missing=""; for p in $(SYSPKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	else echo "note: system packages missing:$$missing (run as root to install; their tests will skip)"; fi

demo: install
	$(BIN)/trajforge demo --out runs/demo

# Two workers (CI has 2 cores), a test file per worker at a time: its module fixtures build once.
# Files with a slow test go first (tests/conftest.py), in that order: none is left to run alone at the end.
# Each worker's torch keeps to one thread (tests/conftest.py), so the two do not fight for cores.
# --durations: CI's log names the slowest tests, so the suite's 15-minute budget can be kept.
TEST_WORKERS ?= 2

test: install sysdeps
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25 tests

clean:
	rm -rf $(VENV) runs .pytest_cache
