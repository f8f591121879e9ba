#!/usr/bin/env bash
# python3 with this project's pure-Python dependencies on the lent GPU machine (no package
# index there; it has numpy, scipy, torch, httpx and pyyaml but not pydantic), from the
# repository root:
#
#     bash benchmarks/gpu/device_python.sh -m benchmarks.gpu.gpu_aa_runs --runs 12 ...
#
# It needs .whl/ (git-ignored, named in the call's carry) prepared beforehand here:
#
#     .venv/bin/pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
#       --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d .whl \
#       pydantic==2.14.4 pydantic_core==2.50.5 annotated_types typing_inspection \
#       typing_extensions pyjwt
#
# The wheels go into /tmp/site once (it stays while the machine is warm).
set -euo pipefail
SITE=/tmp/site
if ! PYTHONPATH="$SITE" python3 -c "import pydantic" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" .whl/*.whl
fi
export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
exec python3 "$@"
