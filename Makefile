# One command to set up and run, one to test. Each creates .venv as needed.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin

# `make install`: infai for everyday use, on PATH: a venv of its own (not this
# checkout's .venv, not editable) with the `infai` launcher linked into ~/.local/bin.
PREFIX ?= $(HOME)/.local
INSTALL_VENV ?= $(PREFIX)/share/infai/venv

.PHONY: run test lint bench crash clean install uninstall

# The first run installs infai and its dependencies into .venv: pip prints each
# package as it goes, so a minute of setup is visibly progressing.
$(BIN)/infai: pyproject.toml
	@echo "infai: setting up $(VENV) (first run, or pyproject.toml changed)..."
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install --progress-bar on -e '.[dev]'
	@echo "infai: $(VENV) is ready"
	touch $(BIN)/infai

run: $(BIN)/infai
	$(BIN)/infai $(ARGS)

install:
	@echo "infai: installing into $(INSTALL_VENV) (a venv of its own)..."
	$(PY) -m venv $(INSTALL_VENV)
	$(INSTALL_VENV)/bin/pip install -q --upgrade pip
	$(INSTALL_VENV)/bin/pip install --progress-bar on --upgrade .
	mkdir -p $(PREFIX)/bin
	ln -sf $(INSTALL_VENV)/bin/infai $(PREFIX)/bin/infai
	@echo "infai: installed $(PREFIX)/bin/infai"
	@case ":$$PATH:" in *":$(PREFIX)/bin:"*) ;; \
	  *) echo "infai: $(PREFIX)/bin is not on your PATH: add it (export PATH=\"$(PREFIX)/bin:\$$PATH\")";; esac

uninstall:
	rm -f $(PREFIX)/bin/infai
	rm -rf $(INSTALL_VENV)

lint: $(BIN)/infai
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks
	$(BIN)/mypy

# Each test file whole on one worker (files share module-level servers). The fast
# suite: everything but the slow loops (`make crash`). Three workers on two cores:
# much of it waits on terminals, subprocesses and servers (3:20 against 4:46 with
# two, measured on this project's 2-core machine).
test: lint
	$(BIN)/pytest -n 3 --dist loadfile -m "not crash and not slow"

# The slow loops: real SIGKILLs over and over, simulated power loss, long random
# runs, the benchmarks' smoke runs. CI runs both.
crash: $(BIN)/infai
	$(BIN)/pytest -n 2 --dist loadfile -m "crash or slow"

bench: $(BIN)/infai
	$(BIN)/python benchmarks/store_bench.py
	$(BIN)/python benchmarks/agent_bench.py
	$(BIN)/python benchmarks/server_bench.py
	$(BIN)/python benchmarks/backend_bench.py
	$(BIN)/python benchmarks/checkpoint_bench.py
	$(BIN)/python benchmarks/startup_bench.py

clean:
	rm -rf $(VENV)
