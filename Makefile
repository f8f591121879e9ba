# The two commands a newcomer runs on a fresh machine: `make demo` and `make test`.
# Each creates or reuses .venv and installs what it needs, pinned by constraints.txt.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest venv clean

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[torch,onnx,server,dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m rnx_cli.demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check rnx rnx_github rnx_cli stats bench_runner gate_server action tests benchmarks examples

typecheck: $(STAMP)
	$(VENV)/bin/mypy rnx rnx_github rnx_cli stats bench_runner gate_server action

pytest: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -n 2 $(PYTEST_ARGS)

test: lint typecheck pytest

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
