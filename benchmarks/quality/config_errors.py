"""Where a recorded corpus's coverage is off for one configuration, which part of the model is.

    python -m benchmarks.quality.config_errors benchmarks/data/gpu-aa-h200-9proc [--draws 300]
        [--set POOL_FLOOR=1]   # a stats.runlevel constant set otherwise, to see what it moves

Per configuration of a directory of `rnx bench` runs, over random draws of a head (3 of one
run's processes, drawn: an H200 run's processes are exchangeable) and --history baseline runs
(all their processes), as the server fits them (stats/runlevel.py): the squared error of the
draws' median over the draws' variance (about 1 where the spread is right; verdict_model's
split-half line says whether a configuration's coverage is its own), the model's own run-to-run
sd of the configuration (sigma_v, 0 where its estimate is not above zero), the head's and the
baseline's process parts, and the error's root mean square. Beside them, what the corpus
shows: the sd of the configuration's run medians with each run's median over the
configurations taken out, and of its processes within a run.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from benchmarks.quality.model_constants import add_set_flag, apply_settings

HEAD_PROCESSES = 3


def process_times(directory: Path) -> tuple[list[str], list[list[list[np.ndarray]]]]:
    """The configurations' ids, and per run, per configuration, each process's times."""
    from benchmarks.quality.verdict_model import load_runs

    docs = load_runs(directory)
    ids = [c.id for c in docs[0].configurations]
    runs = []
    for doc in docs:
        run = []
        for cfg in doc.configurations:
            assert cfg.samples is not None, f"{cfg.id}: no samples"
            ns, proc = np.array(cfg.samples.ns, float), np.array(cfg.samples.process)
            run.append([ns[proc == p] for p in np.unique(proc)])
        runs.append(run)
    return ids, runs


def error_lines(directory: Path, draws: int, history: int, seed: int) -> list[str]:
    from stats import bootstrap, runlevel
    from stats.compare import CONFIG_SHIFT_SD, RUN_SHIFT_SD

    ids, runs = process_times(directory)
    rng = np.random.default_rng(seed)
    c_n, r_n = len(ids), len(runs)
    sums = {k: np.zeros(c_n) for k in ("err2", "var", "sigma_v2", "head", "base")}
    for _ in range(draws):
        order = rng.permutation(r_n)
        head_run, base_runs = order[0], order[1 : history + 1]
        locations, labels = [], []
        for c in range(c_n):
            groups = [g for r in base_runs for g in runs[r][c]]
            locations.append(bootstrap.group_locations(groups, bootstrap.LOW, log=True))
            labels.append(
                np.repeat(np.arange(len(base_runs)), [len(runs[r][c]) for r in base_runs])
            )
        made = runlevel.baseline(locations, labels, run_shift_sd=RUN_SHIFT_SD)
        chosen = rng.permutation(len(runs[head_run][0]))[:HEAD_PROCESSES]
        head = [
            bootstrap.group_locations(
                [runs[head_run][c][p] for p in chosen], bootstrap.LOW, log=True
            )
            for c in range(c_n)
        ]
        fit = runlevel.fit(
            made,
            head,
            2000,
            rng,
            run_shift_sd=RUN_SHIFT_SD,
            config_shift_sd=CONFIG_SHIFT_SD,
            aligned=True,
        )
        sums["err2"] += np.median(fit.draws, axis=1) ** 2  # unchanged: the true log ratio is 0
        sums["var"] += fit.draws.var(axis=1)
        sums["sigma_v2"] += fit.config_shift_var
        sums["head"] += fit.head_var
        sums["base"] += fit.base_var
    # What the corpus shows: per run and configuration, its processes' log medians.
    medians = np.array([[[np.median(np.log(g)) for g in cfg] for cfg in run] for run in runs])
    run_medians = np.median(medians, axis=2)
    run_sd = (run_medians - run_medians.mean(axis=1, keepdims=True)).std(axis=0, ddof=1)
    process_sd = medians.std(axis=2, ddof=1).mean(axis=0)
    lines = [
        f"{directory.name}: {draws} draws, heads of {HEAD_PROCESSES} processes against {history} "
        "baseline runs",
        f"{'configuration':32} {'err2/var':>8} {'sigma_v':>8} {'head sd':>8} {'base sd':>8} "
        f"{'rmse':>8} {'runs sd':>8} {'procs sd':>8}",
    ]
    for c, cid in enumerate(ids):
        lines.append(
            f"{cid:32} {sums['err2'][c] / sums['var'][c]:8.2f} "
            f"{np.sqrt(max(sums['sigma_v2'][c] / draws, 0.0)):8.4f} "
            f"{np.sqrt(sums['head'][c] / draws):8.4f} {np.sqrt(sums['base'][c] / draws):8.4f} "
            f"{np.sqrt(sums['err2'][c] / draws):8.4f} {run_sd[c]:8.4f} {process_sd[c]:8.4f}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs_dir", type=Path, help="a directory of rnx bench runs (JSON)")
    p.add_argument("--draws", type=int, default=300, help="heads and baselines drawn (300)")
    p.add_argument("--history", type=int, default=6, help="baseline runs a draw (6)")
    p.add_argument("--seed", type=int, default=0)
    add_set_flag(p)
    args = p.parse_args(argv)
    apply_settings(p, args.set)
    print("\n".join(error_lines(args.runs_dir, args.draws, args.history, args.seed)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
