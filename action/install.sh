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
  # addsitedir, not a bare path: what the runner reaches through its own .pth files counts too.
  site_line="$("$py" -c 'import site; print("import site; " + "; ".join("site.addsitedir(%r)" % d for d in site.getsitepackages() + [site.getusersitepackages()]))')"
  venv_site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  printf '%s\n' "$site_line" > "$venv_site/_rnx_runner_site.pth"

  pip=("$py" -m pip --python "$venv/bin/python")
  # pip >= 22.3 can install into another interpreter; older or missing pip: bootstrap one.
  if ! "${pip[@]}" --version >/dev/null 2>&1; then
    "$venv/bin/python" -m ensurepip --upgrade >/dev/null
    pip=("$venv/bin/python" -m pip)
  fi
  # Offline runners: the input `wheels` names a folder to install from instead of an index.
  # PIP_FIND_LINKS, PIP_INDEX_URL and PIP_NO_INDEX in the job's environment reach pip as they are.
  sources=()
  if [ -n "${INPUT_WHEELS:-}" ]; then
    if [ ! -d "$INPUT_WHEELS" ]; then
      echo "::error title=rnx-benchmark::input wheels: '$INPUT_WHEELS' is not a folder (give a folder of .whl files, relative to the workspace)"
      exit 1
    fi
    sources=(--no-index --find-links "$(cd "$INPUT_WHEELS" && pwd)")
  fi
  log="$(mktemp)"
  install_or_explain() {
    if "${pip[@]}" install --quiet --disable-pip-version-check --no-input "${sources[@]}" "$@" 2>"$log"; then
      return 0
    fi
    missing="$("$venv/bin/python" "$action_path/action/install_check.py" "$action_path/pyproject.toml" --build | paste -sd ';' - | sed 's/;/; /g')"
    where="index ${PIP_INDEX_URL:-https://pypi.org/simple}"
    if [ -n "${INPUT_WHEELS:-}" ] || [ -n "${PIP_NO_INDEX:-}" ]; then where="no index"; fi
    links="${INPUT_WHEELS:-${PIP_FIND_LINKS:-none}}"
    sed 's/^/pip: /' "$log" | tail -n 15 >&2
    echo "::error title=rnx-benchmark::cannot install rnx-benchmark: this runner's Python lacks ${missing:-(nothing it can name: see the pip output above)}, and pip could not get them (${where}; wheel folders: ${links}). On a runner without a package index, download wheels for them (pip download -d wheels PACKAGE ...) and pass the folder as the input 'wheels', or set PIP_FIND_LINKS to it and PIP_NO_INDEX=1"
    exit 1
  }
  # Build with the setuptools pyproject.toml asks for, installed into this venv first where the
  # runner lacks it, never in an isolated build environment (it would need an index).
  if ! "$venv/bin/python" -c 'import setuptools, sys; sys.exit(int(setuptools.__version__.split(".")[0]) < 77)' 2>/dev/null; then
    install_or_explain "setuptools>=77"
  fi
  install_or_explain --no-build-isolation "$action_path"
  touch "$venv/.installed"
fi
echo "python=$venv/bin/python" >> "$GITHUB_OUTPUT"
