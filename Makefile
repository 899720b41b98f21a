# make demo: create .venv, install, run the closed loop on the embedded model.
# make test: create .venv, install what the tests need, run the suite.
# (No system packages are needed yet: SQLite comes with Python.)
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test install clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

install: $(VENV)/.installed

demo: install
	$(BIN)/trajforge demo --out runs/demo

test: install
	$(BIN)/python -m pytest tests

clean:
	rm -rf $(VENV) runs .pytest_cache
