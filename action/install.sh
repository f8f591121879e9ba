#!/usr/bin/env bash
# Install rnx-benchmark for this job without touching the runner's Python: a private venv of
# the same interpreter that *sees* the runner's packages (torch above all) through a .pth file,
# so pip adds only what is missing (the core deps, never the torch extra) and replaces nothing.
set -euo pipefail

action_path="${GITHUB_ACTION_PATH:?this script runs inside the rnx-benchmark action}"
py="$(command -v python3 || command -v python || true)"
if [ -z "$py" ]; then
  echo "::error title=rnx-benchmark::no python3 on PATH; add actions/setup-python (3.10+) and install torch before this step"
  exit 1
fi
if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
  echo "::error title=rnx-benchmark::rnx-benchmark needs Python 3.10 or newer; $py is $("$py" -V 2>&1)"
  exit 1
fi

# One venv per job and action version: a second step of the same job reuses it.
sources="$(cd "$action_path" && for d in rnx rnx_github rnx_cli stats bench_runner gate_server action; do
  if [ -d "$d" ]; then find "$d" -name '*.py'; fi
done | LC_ALL=C sort)"
digest="$(cd "$action_path" && cat pyproject.toml $sources | sha256sum | cut -c1-16)"
venv="${RUNNER_TEMP:-/tmp}/rnx-benchmark-$digest"
if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.installed" ]; then
  "$py" -m venv --without-pip "$venv"
  # The runner's own site-packages, after the venv's: its torch is used, never reinstalled.
  site_dirs="$("$py" -c 'import site, sys; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))')"
  venv_site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  printf '%s\n' "$site_dirs" > "$venv_site/_rnx_runner_site.pth"

  pip=("$py" -m pip --python "$venv/bin/python")
  # pip >= 22.3 can install into another interpreter; older or missing pip: bootstrap one.
  if ! "${pip[@]}" --version >/dev/null 2>&1; then
    "$venv/bin/python" -m ensurepip --upgrade >/dev/null
    pip=("$venv/bin/python" -m pip)
  fi
  build=()
  # With a recent setuptools at hand, build without downloading one (offline runners).
  if "$venv/bin/python" -c 'import setuptools, sys; sys.exit(int(setuptools.__version__.split(".")[0]) < 68)' 2>/dev/null; then
    build=(--no-build-isolation)
  fi
  "${pip[@]}" install --quiet --disable-pip-version-check --no-input "${build[@]}" "$action_path"
  touch "$venv/.installed"
fi
echo "python=$venv/bin/python" >> "$GITHUB_OUTPUT"
