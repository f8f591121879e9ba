"""Valid results documents with chosen sample distributions, for server and gate tests."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from typing import Any

import numpy as np

from rnx.schema import MIN_SAMPLES, ResultsDocument, SpeedOfLight

DEFAULT_CONFIGS: tuple[tuple[str, str, int], ...] = tuple(
    (runtime, dtype, bs)
    for runtime in ("pytorch_eager", "onnxruntime")
    for dtype in ("float32", "float16")
    for bs in (1, 8)
)  # 8 configurations


def samples(
    median_ns: float,
    *,
    n: int = 30,
    processes: int = 3,
    spread: float = 0.01,
    rng: np.random.Generator,
) -> dict[str, list[int]]:
    """`n` samples around `median_ns` (lognormal, `spread` ~ relative sd), split over processes."""
    values = median_ns * np.exp(rng.normal(0.0, spread, size=n))
    return {
        "ns": [max(1, int(v)) for v in values],
        "round": [i // processes for i in range(n)],
        "process": [i % processes for i in range(n)],
    }


def make_results(
    *,
    repository: str = "acme/kernels",
    branch: str = "main",
    sha: str | None = None,
    event: str = "push",
    pr_number: int | None = None,
    base_branch: str | None = None,
    environment: str = "linux-x86_64-cpu-test",
    configs: Sequence[tuple[str, str, int]] = DEFAULT_CONFIGS,
    median_ns: float = 1_000_000.0,
    slowdown: float | dict[str, float] = 1.0,
    spread: float = 0.01,
    n: int = 30,
    processes: int = 3,
    broken: Sequence[str] = (),
    seed: int = 0,
    run_id: uuid.UUID | str | None = None,
    workload: str = "kernels/attention.py",
    workload_sha256: str = "0" * 64,
    broken_reason: str = "max abs error 0.5 > atol 1e-05",
) -> ResultsDocument:
    """A valid document. `slowdown` scales every configuration's times (or, as a dict keyed by
    configuration id like "pytorch_eager/float32/bs1", only those); `broken` ids get status
    "diverged" with a reason and no samples."""
    rng = np.random.default_rng(seed)
    is_pr = pr_number is not None or event.startswith("pull_request")
    configurations: list[dict[str, Any]] = []
    for i, (runtime, dtype, bs) in enumerate(configs):
        cid = f"{runtime}/{dtype}/bs{bs}"
        factor = slowdown.get(cid, 1.0) if isinstance(slowdown, dict) else slowdown
        entry: dict[str, Any] = {"runtime": runtime, "dtype": dtype, "batch_size": bs}
        if cid in broken:
            entry.update(status="diverged", reason=broken_reason)
        else:
            base = median_ns * (1 + 0.1 * i)  # configurations differ, as real ones do
            entry.update(
                status="ok",
                samples=samples(base * factor, n=n, processes=processes, spread=spread, rng=rng),
                correctness={"passed": True, "trials": 3, "atol": 1e-5, "rtol": 1e-5},
            )
        configurations.append(entry)
    doc = {
        "schema_version": 1,
        "run_id": str(run_id or uuid.uuid4()),
        "repository": repository,
        "git": {
            "branch": branch,
            "sha": sha or hashlib.sha1(f"{branch}{seed}".encode()).hexdigest(),
            "event": event,
            "pr_number": pr_number,
            "base_branch": base_branch if base_branch is not None else ("main" if is_pr else None),
        },
        "environment": {"key": environment, "name": "test runner"},
        "workload": {"path": workload, "sha256": workload_sha256},
        "settings": {
            # Asked for at least what the statistics need; a configuration may hold fewer.
            "samples": max(n, MIN_SAMPLES),
            "warmup": 1,
            "rounds": n // processes or 1,
            "processes": processes,
        },
        "configurations": configurations,
    }
    return ResultsDocument.model_validate(doc)


# What a fork's workflow may write into a results document to dress up, link from or break
# the sticky comment: it must come out as the characters it is (assert_inert).
HOSTILE_WORKLOAD = "kernels/<img src=x onerror=alert(1)>[click](https://evil.example)**b**.py"
HOSTILE_REASON = "<!-- rnx-benchmark:part-end --> [click](https://evil.example) **b** <script>"


def h200_score(
    score: float,
    bound: str = "memory",
    *,
    measured_s: float = 1e-6,
    peak_flops: float = 989.5e12,
    beyond_roofline: bool = False,
) -> SpeedOfLight:
    """A configuration's speed-of-light score against the H200's table peaks (4.8 TB/s, dense
    float16 FLOP/s): the roofline time is the score times the measured time."""
    peak = {"peak_bandwidth": 4.8e12} if bound == "memory" else {"peak_flops": peak_flops}
    return SpeedOfLight(
        score=score,
        bound=bound,
        roofline_s=score * measured_s,
        measured_s=measured_s,
        peak_source="table",
        peak_part="H200 SXM",
        beyond_roofline=beyond_roofline,
        **peak,
    )


def assert_inert(comment: str, *, parts: int = 1) -> None:
    """The hostile texts above are shown, escaped, and neither format nor link nor forge."""
    assert "[click](" not in comment and "**b**" not in comment
    assert "<img" not in comment and "<script" not in comment
    assert comment.count("<!-- rnx-benchmark:part-end -->") == parts
    assert "&lt;img src=x onerror=alert\\(1\\)&gt;" in comment
    assert "&lt;script&gt;" in comment


def body(doc: ResultsDocument) -> bytes:
    """The bytes an uploader sends."""
    return doc.to_json().encode("utf-8")
