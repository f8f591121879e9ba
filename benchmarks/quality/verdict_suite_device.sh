#!/usr/bin/env bash
# The verdict model's figures (issue 34) on the lent GPU machine's 16 CPU cores, at once: the
# sensitivity sweep (11 values at a time), the per-run figures on every corpus, and the
# intervals' coverage on model draws (one process per baseline-run count). From the repository
# root, with .whl/ carried (see benchmarks/gpu/device_python.sh):
#
#     bash benchmarks/quality/verdict_suite_device.sh
#
# Logs go to $OUT (default /tmp/out): sweep.log, verdict_model.log, coverage-R.log.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
PY="bash benchmarks/gpu/device_python.sh"
$PY -c "import pydantic" # installs the wheels once, before the jobs start side by side
$PY -m benchmarks.quality.sensitivity_sweep --jobs 11 --unchanged 500 --per-config 30 \
  --cpu-unchanged 400 --cpu-per-config 20 --sims 200 >"$OUT/sweep.log" 2>&1 &
$PY -m benchmarks.quality.verdict_model --unchanged 1000 --per-config 40 --sims 0 --repeat 1 \
  --base-processes 3,9 --cpu-unchanged 1000 --cpu-per-config 20 >"$OUT/verdict_model.log" 2>&1 &
for runs in 2 3 6 10; do
  $PY -m benchmarks.quality.interval_coverage --sims 2000 --runs "$runs" \
    >"$OUT/coverage-$runs.log" 2>&1 &
done
wait
