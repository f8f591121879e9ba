# The two commands a newcomer runs on a fresh machine: `make demo` and `make test`.
# Each creates or reuses .venv and installs what it needs, pinned by constraints.txt.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest venv clean bench-quality bench-server bench-reliability bench-harness bench-gpu

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
	$(VENV)/bin/ruff format --check rnx rnx_github rnx_cli stats bench_runner gate_server action tests testbed benchmarks experiments examples

typecheck: $(STAMP)
	$(VENV)/bin/mypy rnx rnx_github rnx_cli stats bench_runner gate_server action

pytest: $(STAMP)
	$(PY) -m pytest -q -p no:cacheprovider -n 2 --dist worksteal $(PYTEST_ARGS)

# The linters run beside the tests, not before them: the tests' two workers leave a third of two
# cores idle while they wait on servers and subprocesses, and mypy alone takes 20 s on a fresh
# clone. --output-sync=line keeps each printed line whole.
test: $(STAMP)
	$(MAKE) --no-print-directory -j3 --output-sync=line lint typecheck pytest

# Each suite's quick run (benchmarks/README.md): minutes on 2 cores, one at a time.
bench-quality: $(STAMP)
	$(PY) -m benchmarks.quality.changepoint_quality --quick

bench-server: $(STAMP)
	$(PY) -m benchmarks.server.upload_stages --uploads 100

bench-reliability: $(STAMP)
	$(PY) -m benchmarks.reliability.server_crash --database sqlite --uploads 120

bench-harness: $(STAMP)
	$(PY) -m benchmarks.harness.harness_overhead --samples 10 --processes 2

# On a machine with a CUDA GPU (python3 there, as the gpu/ scripts' docstrings say).
bench-gpu:
	python3 -m benchmarks.gpu.gpu_timing --parts dobench --samples 10 --out $${OUT:-.}

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
