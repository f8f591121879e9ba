"""The effective configuration: kernalin.yml with the action's inputs laid over it."""

from __future__ import annotations

from pathlib import Path

from action.inputs import GateInputs, InputError, check_configuration_count
from rnx.config import Benchmark, KernalinConfig, load_config, override


def _override(bench: Benchmark, inputs: GateInputs) -> Benchmark:
    changes = {
        "runtimes": inputs.runtimes,
        "batch-sizes": inputs.batch_sizes,
        "dtypes": inputs.dtypes,
    }
    return override(bench, changes, source="action inputs")


def effective_config(
    inputs: GateInputs, *, root: Path, require_benchmarks: bool = True
) -> KernalinConfig:
    """Inputs override the file: a `workload` input replaces the file's benchmark list (keeping
    a matching entry's tolerances), runtimes/batch sizes/dtypes override every benchmark."""
    config_path = root / inputs.config if inputs.config else None
    if config_path is None and (root / "kernalin.yml").is_file():
        config_path = root / "kernalin.yml"
    config = load_config(config_path) if config_path else KernalinConfig()

    if inputs.workloads:
        by_path = {b.workload: b for b in config.benchmarks}
        benches = [by_path.get(w) or Benchmark(workload=w) for w in inputs.workloads]
    else:
        benches = list(config.benchmarks)
    if not benches and require_benchmarks:
        raise InputError(
            "nothing to benchmark: set the input 'workload' (e.g. workload: kernels/attention.py) "
            "or list benchmarks in kernalin.yml (rnx init writes a starter file)"
        )
    benches = [_override(b, inputs) for b in benches]
    for b in benches:
        if not (root / b.workload).is_file():
            raise InputError(
                f"kernalin.yml lists workload {b.workload!r}, which does not exist in the "
                f"checkout; fix the path or remove the entry"
            )
        check_configuration_count(len(b.runtimes) * len(b.batch_sizes) * len(b.dtypes), b.workload)

    gate = config.gate
    if inputs.mode is not None:
        gate = gate.model_copy(update={"mode": inputs.mode})
    if inputs.budget_s is not None:
        gate = gate.model_copy(update={"budget": inputs.budget_s})
    return config.model_copy(update={"gate": gate, "benchmarks": benches})
