#!/usr/bin/env bash
# The verdict model's figures (issue 34) on the lent GPU machine's 16 CPU cores, each part a
# process of its own. From the repository root, with .whl/ carried (see
# benchmarks/gpu/device_python.sh):
#
#     bash benchmarks/quality/verdict_suite_device.sh figures [MAIN]  # per-run, every corpus
#     bash benchmarks/quality/verdict_suite_device.sh coverage [SIMS] # model draws (10000)
#       (CONFIGS=16: 16 configurations a pull request, the head's scale read; default 8.
#        SEED=N: another seed base than 2000, for a second share of draws to pool with the first)
#     bash benchmarks/quality/verdict_suite_device.sh sweep           # the sensitivity sweep
#
# FIGURES_ARGS: more verdict_model flags for `figures` (e.g. "--added-process open", the rule before).
# MAIN: a directory holding main's packages (stats, rnx, bench_runner, ...; carried, e.g. made
# with `git archive main stats rnx bench_runner | tar -x -C DIR`): the same figures with them,
# under this tree's harness, beside this tree's. Logs go to $OUT (default /tmp/out).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
PY="bash benchmarks/gpu/device_python.sh"
$PY -c "import pydantic" # installs the wheels once, before the jobs start side by side

# verdict_model with this tree's packages (tag "this") or main's (tag "main").
model() {
  local tag=$1 name=$2
  shift 2
  if [ "$tag" = this ]; then
    $PY -m benchmarks.quality.verdict_model "$@" >"$OUT/$name-$tag.log" 2>&1
  else
    # A script path, not -m: the current directory would come before main's packages.
    PYTHONPATH="$LINKS:$PWD:/tmp/site" python3 benchmarks/quality/verdict_model.py "$@" \
      >"$OUT/$name-$tag.log" 2>&1
  fi
}

case "${1:-figures}" in
figures)
  tags=(this)
  if [ -n "${2:-}" ]; then
    LINKS=$(mktemp -d)
    for pkg in "$(cd "$2" && pwd)"/*/; do
      [ -f "$pkg/__init__.py" ] && [ "$(basename "$pkg")" != benchmarks ] && ln -s "$pkg" "$LINKS/"
    done
    tags+=(main)
  fi
  none=$(mktemp -d) # no GPU corpus: the busy-CPU jobs
  read -r -a extra <<<"${FIGURES_ARGS:-}"
  common=(--sims 0 --repeat 1 "${extra[@]}")
  # 16 processes a tree (--jobs splits a job's replays): the weakest of 48 busy-CPU
  # configurations reads low by chance at 20 replays each (verdict_model prints by how much).
  for tag in "${tags[@]}"; do
    model "$tag" gpu "${common[@]}" --unchanged 1000 --per-config 40 --base-processes 3,9 \
      --cpu-unchanged 0 --cpu-per-config 0 --jobs 4 &
    model "$tag" cpu "${common[@]}" --runs-dir "$none" --unchanged 0 --per-config 0 \
      --cpu-corpus benchmarks/data/corpus-crossload.npz --cpu-unchanged 1000 --cpu-per-config 40 \
      --jobs 2 &
    # The two 9-process busy-CPU corpora in one job, so their coverage is also pooled.
    for n in 3 9; do
      model "$tag" "cpu9proc-$n" "${common[@]}" --runs-dir "$none" --unchanged 0 --per-config 0 \
        --cpu-corpus benchmarks/data/corpus-crossload-9proc.npz \
        --cpu-corpus benchmarks/data/corpus-crossload-9proc-b.npz --base-processes "$n" \
        --cpu-unchanged 1000 --cpu-per-config 100 --jobs 5 &
    done
  done
  ;;
coverage)
  for runs in 2 3 6 10; do
    for procs in 3 6 9; do
      $PY -m benchmarks.quality.interval_coverage --sims "${2:-10000}" --runs "$runs" \
        --processes "$procs" --parts --seed $((${SEED:-2000} + 100 * runs + 10 * procs)) \
        --configs "${CONFIGS:-8}" >"$OUT/coverage-$runs-$procs.log" 2>&1 &
    done
  done
  ;;
sweep)
  $PY -m benchmarks.quality.sensitivity_sweep --jobs 15 --unchanged 500 --per-config 30 \
    --cpu-unchanged 400 --cpu-per-config 20 --sims 200 >"$OUT/sweep.log" 2>&1 &
  ;;
*)
  echo "usage: $0 figures [MAIN] | coverage [SIMS] | sweep" >&2
  exit 2
  ;;
esac
wait
