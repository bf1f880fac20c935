# Everything runs from a local virtual environment made on first use; only Python 3.11+ and make are needed.
PYTHON ?= $(shell command -v python3.11 || command -v python3.12 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
GEN    := service/gen/.stamp
PROTOS := $(wildcard protos/gpuadvisor/v1/*.proto)
RULES  ?= rules

.PHONY: all venv gen run test lint bench rules-check rules-test clean

all: test

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

$(GEN): $(STAMP) $(PROTOS)
	rm -rf service/gen && mkdir -p service/gen
	$(PY) -m grpc_tools.protoc -I protos --python_out=service/gen --pyi_out=service/gen \
		--grpc_python_out=service/gen $(PROTOS)
	touch $(GEN)

gen: $(GEN)

run: $(GEN)
	$(PY) -m service

test: $(GEN)
	$(PY) -m pytest

lint: $(GEN)
	$(VENV)/bin/ruff check service tests

# BENCH_ARGS: e.g. --load-only, --baseline ../main (the same load on another checkout first), --load-seconds 10
bench: $(GEN)
	$(PY) -m service.bench $(BENCH_ARGS)

rules-check: $(GEN)
	$(PY) -m service.rules_cli check $(RULES)

rules-test: $(GEN)
	$(PY) -m service.rules_cli test $(RULES) --require-coverage

clean:
	rm -rf $(VENV) service/gen .pytest_cache .ruff_cache
