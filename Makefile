# gpushare: `make setup` once (builds the control plane, many minutes cold), then `make test`.
# Learners: `make grade` (WORKDIR=/root/gpushare by default).

PYTHON  ?= python3.11
VENV    := .venv
BIN     := $(VENV)/bin
WORKDIR ?= /root/gpushare
STAMP   := $(VENV)/.installed

.PHONY: setup install test lint grade up down reset status solve bench clean

setup: install
	$(BIN)/gpushare setup

install: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $@

test: setup
	$(BIN)/python -m pytest tests

lint: install
	$(BIN)/ruff check src tests graders benchmarks conftest.py
	$(BIN)/ruff format --check src tests graders benchmarks conftest.py

grade: setup
	$(BIN)/gpushare up
	$(BIN)/gpushare grade --workdir $(WORKDIR) $(GRADE_ARGS)

up: setup
	$(BIN)/gpushare up

down: install
	$(BIN)/gpushare down

reset: install
	$(BIN)/gpushare reset

status: install
	$(BIN)/gpushare status

solve: setup
	$(BIN)/gpushare solve --workdir $(WORKDIR)

bench: setup
	$(BIN)/python benchmarks/bench_lab.py
	$(BIN)/python benchmarks/bench_grade.py

clean:
	rm -rf $(VENV) build src/*.egg-info
