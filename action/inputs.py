"""What the user asked for: the action's inputs and `rnx gate`'s flags, validated with fixes.

The one place they are read. action.yml hands each input to Python in its own environment
variable, INPUT_<NAME> (as GitHub does for JavaScript and Docker actions; never pasted into a
script); a flag wins over it. Outside the action, in any CI or a terminal, the server and the
tokens come from the documented KERNALIN_URL, KERNALIN_TOKEN and GITHUB_TOKEN. Each problem is
reported as what was written, what is wrong and what to write instead.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from rnx.config import parse_duration
from rnx.errors import UserError
from rnx.schema import DTYPES, MAX_BATCH_SIZE, MAX_CONFIGURATIONS, RUNTIMES

# `accept` (record an intended slowdown as the new baseline) is the next mode to come; it
# is listed so that a user who writes it learns it is known but not yet available here.
MODES = ("enforce", "soft-fail", "report-only")
LATER_MODES = ("accept",)
WORKLOAD_SUFFIXES = (".py", ".onnx")
_ENVIRONMENT_NAME = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")

INPUTS = (
    "workload",
    "runtimes",
    "batch-sizes",
    "dtypes",
    "config",
    "mode",
    "environment",
    "budget",
    "kernalin-url",
    "kernalin-token",
    "github-token",
)
# Where an input comes from when the action did not set it: `rnx gate` in another CI.
CLI_VARIABLES = {
    "kernalin-url": "KERNALIN_URL",
    "kernalin-token": "KERNALIN_TOKEN",
    "github-token": "GITHUB_TOKEN",
}
# Names earlier versions read; refused with the way to say it now, never silently ignored.
RETIRED_VARIABLES = {
    "RNX_WORKLOAD": "workload",
    "RNX_RUNTIMES": "runtimes",
    "RNX_BATCH_SIZES": "batch-sizes",
    "RNX_DTYPES": "dtypes",
    "RNX_CONFIG": "config",
    "RNX_MODE": "mode",
    "RNX_ENVIRONMENT": "environment",
}


def input_variable(name: str) -> str:
    """The environment variable action.yml passes an input in: batch-sizes -> INPUT_BATCH_SIZES."""
    return "INPUT_" + name.upper().replace("-", "_")


class InputError(UserError):
    """A malformed input; the message names the input and says what to write instead."""


@dataclass(frozen=True)
class Connection:
    """The gate server and the tokens: what both the gate and accept mode need."""

    kernalin_url: str | None = None
    kernalin_token: str | None = field(default=None, repr=False)
    github_token: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class GateInputs:
    """Validated inputs; None means "not given: take it from kernalin.yml or the default"."""

    workloads: tuple[str, ...] = ()
    runtimes: tuple[str, ...] | None = None
    batch_sizes: tuple[int, ...] | None = None
    dtypes: tuple[str, ...] | None = None
    config: str | None = None
    mode: str | None = None
    environment: str | None = None
    kernalin_url: str | None = None
    kernalin_token: str | None = field(default=None, repr=False)
    github_token: str | None = field(default=None, repr=False)
    budget_s: float | None = None


def _items(text: str) -> list[str]:
    return [part.strip() for part in re.split(r"[,\s]+", text) if part.strip()]


def _choices(name: str, text: str, allowed: tuple[str, ...], example: str) -> tuple[str, ...]:
    items = _items(text)
    if not items:
        raise InputError(f"input '{name}' is empty; write for example {name}: {example}")
    for item in items:
        if item not in allowed:
            close = difflib.get_close_matches(item.lower().replace("-", "_"), allowed, n=1)
            hint = f"did you mean '{close[0]}'? " if close else ""
            raise InputError(
                f"input '{name}': '{item}' is not one of {', '.join(allowed)}; {hint}"
                f"write a comma-separated list, e.g. {name}: {example}"
            )
    return tuple(dict.fromkeys(items))


def parse_runtimes(text: str) -> tuple[str, ...]:
    return _choices("runtimes", text, RUNTIMES, "pytorch_eager,torch_compile")


def parse_dtypes(text: str) -> tuple[str, ...]:
    return _choices("dtypes", text, DTYPES, "float32,float16")


def parse_batch_sizes(text: str) -> tuple[int, ...]:
    items = _items(text)
    if not items:
        raise InputError("input 'batch-sizes' is empty; write for example batch-sizes: \"1,8\"")
    sizes = []
    for item in items:
        if not re.fullmatch(r"[0-9]{1,7}", item) or not 1 <= int(item) <= MAX_BATCH_SIZE:
            raise InputError(
                f"input 'batch-sizes': {item!r} is not a positive whole number (at most "
                f"{MAX_BATCH_SIZE:,}); "
                f'write a comma-separated list in quotes, e.g. batch-sizes: "1,8"'
            )
        sizes.append(int(item))
    return tuple(dict.fromkeys(sizes))


def parse_mode(text: str) -> str:
    mode = text.strip().lower()
    if mode in LATER_MODES:
        raise InputError(
            f"input 'mode': '{mode}' is not available in this version of the action; "
            f"write one of {', '.join(MODES)}"
        )
    if mode not in MODES:
        raise InputError(
            f"input 'mode': {text.strip()!r} is not a mode; write one of {', '.join(MODES)} "
            f"(enforce fails the job on BLOCK, soft-fail only warns, report-only never fails)"
        )
    return mode


def parse_url(text: str) -> str:
    url = text.strip().rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(
            f"input 'kernalin-url': {text.strip()!r} is not an http(s) URL; "
            f"write the gate server's address, e.g. kernalin-url: https://gate.example.com"
        )
    if parts.query or parts.fragment:
        raise InputError(
            "input 'kernalin-url' must not carry a query or fragment; "
            "write only the server's address, e.g. https://gate.example.com"
        )
    return url


def parse_environment(text: str) -> str:
    name = text.strip()
    if not _ENVIRONMENT_NAME.fullmatch(name):
        raise InputError(
            f"input 'environment': {name!r} may only use letters, digits and _ . : - "
            f"(at most 128); write e.g. environment: a100-80gb"
        )
    return name


def parse_workloads(text: str, *, root: Path) -> tuple[str, ...]:
    paths = []
    for item in (line.strip() for line in re.split(r"[\n,]", text)):
        if not item:
            continue
        if not item.endswith(WORKLOAD_SUFFIXES):
            raise InputError(
                f"input 'workload': {item!r} is neither a .py nor an .onnx file; write the path "
                f"of a KernelBench-style Python file or an ONNX model, "
                f"e.g. workload: kernels/attention.py"
            )
        if Path(item).is_absolute() or ".." in Path(item).parts:
            raise InputError(
                f"input 'workload': {item!r} must be a path inside the repository, relative to "
                f"its root, e.g. workload: kernels/attention.py"
            )
        if not (root / item).is_file():
            raise InputError(
                f"input 'workload': {item!r} does not exist in the checkout ({root}); check the "
                f"path and that the workflow runs actions/checkout before this step"
            )
        paths.append(item)
    return tuple(dict.fromkeys(paths))


def parse_config_path(text: str, *, root: Path) -> str:
    path = text.strip()
    if not (root / path).is_file():
        raise InputError(
            f"input 'config': {path!r} does not exist; create it (rnx init writes a starter "
            f"kernalin.yml) or leave the input out to use kernalin.yml at the repository root"
        )
    return path


def _given(env: Mapping[str, str], name: str, flag: str | None = None) -> str | None:
    """A flag, else the action's input, else (for the server and tokens) the CLI's variable;
    an empty value means "not given"."""
    value = flag if flag is not None else env.get(input_variable(name), "")
    if not value.strip() and flag is None and name in CLI_VARIABLES:
        value = env.get(CLI_VARIABLES[name], "")
    return value if value.strip() else None


def _refuse_retired(env: Mapping[str, str]) -> None:
    for variable, name in RETIRED_VARIABLES.items():
        if env.get(variable, "").strip():
            raise InputError(
                f"{variable} is no longer read; pass --{name} to rnx gate (in the action: the "
                f"'{name}' input), and unset {variable}"
            )


def parse_budget(text: str) -> float:
    try:
        seconds = parse_duration(text)
    except ValueError as e:
        raise InputError(f"input 'budget': {e} (0 turns adaptive sampling off)") from None
    if not 0 <= seconds <= 86_400:
        raise InputError(f"input 'budget': {text.strip()!r} is not between 0 and 24h")
    return seconds


def read_connection(env: Mapping[str, str]) -> Connection:
    url = _given(env, "kernalin-url")
    token, github_token = _given(env, "kernalin-token"), _given(env, "github-token")
    return Connection(
        kernalin_url=parse_url(url) if url else None,
        kernalin_token=token.strip() if token else None,
        github_token=github_token.strip() if github_token else None,
    )


def read_inputs(
    env: Mapping[str, str],
    *,
    root: Path,
    workloads: list[str] | None = None,
    runtimes: str | None = None,
    batch_sizes: str | None = None,
    dtypes: str | None = None,
    config: str | None = None,
    mode: str | None = None,
    environment: str | None = None,
    budget: str | None = None,
) -> GateInputs:
    """Flags win over the action's inputs; an empty value means "not given"."""
    _refuse_retired(env)
    workload_text = "\n".join(workloads) if workloads else _given(env, "workload")
    runtimes_text = _given(env, "runtimes", runtimes)
    batch_text = _given(env, "batch-sizes", batch_sizes)
    dtypes_text = _given(env, "dtypes", dtypes)
    config_text = _given(env, "config", config)
    mode_text = _given(env, "mode", mode)
    env_text = _given(env, "environment", environment)
    budget_text = _given(env, "budget", budget)
    connection = read_connection(env)
    return GateInputs(
        workloads=parse_workloads(workload_text, root=root) if workload_text else (),
        runtimes=parse_runtimes(runtimes_text) if runtimes_text else None,
        batch_sizes=parse_batch_sizes(batch_text) if batch_text else None,
        dtypes=parse_dtypes(dtypes_text) if dtypes_text else None,
        config=parse_config_path(config_text, root=root) if config_text else None,
        mode=parse_mode(mode_text) if mode_text else None,
        environment=parse_environment(env_text) if env_text else None,
        kernalin_url=connection.kernalin_url,
        kernalin_token=connection.kernalin_token,
        github_token=connection.github_token,
        budget_s=parse_budget(budget_text) if budget_text else None,
    )


def check_configuration_count(count: int, workload: str) -> None:
    if count > MAX_CONFIGURATIONS:
        raise InputError(
            f"{workload}: {count} configurations (runtimes x dtypes x batch sizes) is more than "
            f"the {MAX_CONFIGURATIONS} one run may hold; list fewer, or split them into several "
            f"benchmarks in kernalin.yml"
        )
