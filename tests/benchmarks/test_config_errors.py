"""benchmarks/quality/config_errors.py: the model's parts per configuration of a corpus."""

from __future__ import annotations

from pathlib import Path

from benchmarks.quality.config_errors import error_lines

CORPUS = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "gpu-aa-h200-9proc"


def test_every_configuration_gets_its_parts_and_the_corpus_its_spreads() -> None:
    lines = error_lines(CORPUS, draws=4, history=6, seed=0)
    rows = {line.split()[0]: [float(x) for x in line.split()[1:]] for line in lines[2:]}
    assert len(rows) == 12
    assert all(len(r) == 7 and all(x >= 0 for x in r) and r[0] > 0 for r in rows.values())
    # The corpus's own figures: torch_compile/float32/bs128's runs stray the most (0.0040,
    # the others 0.0020-0.0034), and a process's spread is larger than a run median's.
    runs_sd = {k: r[5] for k, r in rows.items()}
    assert max(runs_sd, key=lambda k: runs_sd[k]) == "torch_compile/float32/bs128"
    assert all(r[6] > r[5] for r in rows.values())
