"""The one adapter from results documents to stats: for `rnx compare`, the server and the action."""

from __future__ import annotations

import math
import threading
from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import stats
from rnx.clocks import explained_by_clock
from rnx.config import GateSettings
from rnx.memory_gate import memory_change, worse
from rnx.profile_diff import diff_profiles
from rnx.schema import (
    ConfigComparison,
    Configuration,
    GateReport,
    Inconclusive,
    Memory,
    Profile,
    ResultsDocument,
    Samples,
    SpeedOfLight,
)
from stats.reasons import Code, Reason, Wording, render

NO_BASELINE = render(Reason(Code.NO_BASELINE))
# Sets of configurations (one per head's configurations and clocks) a PreparedBaselines keeps
# the statistics' prepared sides for: uploads of one workload compare the same set.
KEEP_CONFIGURATION_SETS = 8


class PreparedBaselines:
    """The baseline documents of one baseline set, prepared once for every head gated
    against them (evaluate(..., prepared=...)): each configuration's baseline groups, and the
    statistics' prepared sides (stats.prepare_baseline) per set of configurations compared.
    The server makes one per baseline set and keeps it beside the parsed documents; the numbers
    are the same as without it. Safe to share between threads."""

    def __init__(self, baselines: Sequence[ResultsDocument]):
        self.baselines = tuple(baselines)
        self.index = [doc.by_id for doc in self.baselines]
        self._groups: dict[tuple[str, str | None], tuple[list[Any], str | None, list[int]]] = {}
        self._sides: OrderedDict[tuple[Any, ...], stats.PreparedBaseline] = OrderedDict()
        self._lock = threading.Lock()

    def groups(self, cid: str, head_method: str | None) -> tuple[list[Any], str | None, list[int]]:
        """_baseline_groups of this set, worked out once per configuration and clock."""
        k = (cid, head_method)
        found = self._groups.get(k)
        if found is None:
            found = _baseline_groups(cid, self.index, head_method)
            with self._lock:
                found = self._groups.setdefault(k, found)
        return found

    def statistics(
        self, keys: tuple[Any, ...], pairs: list[tuple[Any, Any]], runs: list[list[int]]
    ) -> stats.PreparedBaseline:
        """The statistics' prepared sides of these pairs (their bases from groups())."""
        with self._lock:
            found = self._sides.get(keys)
            if found is not None:
                self._sides.move_to_end(keys)
                return found
        made = stats.prepare_baseline([p[0] for p in pairs], runs)
        with self._lock:
            found = self._sides.setdefault(keys, made)
            self._sides.move_to_end(keys)
            while len(self._sides) > KEEP_CONFIGURATION_SETS:
                self._sides.popitem(last=False)
        return found


@dataclass
class _Plan:
    """What evaluate compares: a row per configuration, and the pairs that go to the statistics."""

    rows: dict[str, dict[str, Any]] = field(default_factory=dict)
    pairs: list[tuple[Any, Any]] = field(default_factory=list)
    pair_runs: list[list[int]] = field(default_factory=list)
    pair_ids: list[str] = field(default_factory=list)
    pair_keys: list[tuple[str, str | None]] = field(default_factory=list)
    broken: dict[str, str] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    used_baselines: set[int] = field(default_factory=set)


def _plan(head: ResultsDocument, prepared: PreparedBaselines, paired: bool) -> _Plan:
    """A row per configuration of head; the ones that can be compared become pairs."""
    plan = _Plan()
    baselines = prepared.baselines
    # Each baseline's configurations by id: looking each one up by scanning every baseline
    # grows with the square of the configurations (48 x 48 x 7 for a large run).
    index = prepared.index
    for cfg in head.configurations:
        cid = cfg.id  # worked out anew on every read
        row = _row(cfg, cid)
        row["base_speed_of_light"] = _base_speed_of_light(cid, index)
        plan.rows[cid] = row
        if cfg.status in ("diverged", "error"):
            row.update(verdict="broken", reason=f"{cfg.status}: {cfg.reason}")
            plan.broken[cid] = row["reason"]
            continue
        if cfg.status == "unsupported":
            row.update(verdict="skipped", reason=f"unsupported: {cfg.reason}")
            continue
        head_groups = _groups(cfg.samples)
        row["head_samples"] = sum(len(g) for g in head_groups)
        if not head_groups:
            row.update(verdict="undecided", reason="head has no samples for this configuration")
            continue
        used: list[int] = []
        if paired:
            base_groups, head_groups, why = _paired_groups(cfg)
            if why is not None:
                row.update(verdict="undecided", reason=why)
                continue
        else:
            base_groups, why, used = prepared.groups(cid, cfg.timing_method)
            plan.used_baselines.update(used)
            if why is not None and why.startswith(OTHER_CLOCK):
                # Not a missing baseline: one exists, measured in another unit. Undecided, so
                # the run warns and says why (never compared silently).
                row.update(verdict="undecided", reason=why)
                continue
            if why is not None:
                row.update(verdict="no-baseline", reason=why)
                if baselines:
                    plan.missing.append(cid)
                continue
        plan.pairs.append((base_groups, head_groups))
        plan.pair_runs.append(used)
        plan.pair_ids.append(cid)
        plan.pair_keys.append((cid, cfg.timing_method))
    return plan


def evaluate(
    head: ResultsDocument,
    baselines: Sequence[ResultsDocument],
    gate: GateSettings,
    *,
    resamples: int = 2000,
    seed: int | None = 0,
    explain_all: bool = False,
    wording: Mapping[Code, Wording] | None = None,
    prepared: PreparedBaselines | None = None,
) -> GateReport:
    """Compare head with its baselines (or, in paired mode, with its own base samples) and gate it.

    Configurations are matched by id. Each baseline document is a run and its worker processes
    are groups; stats carries the spread between runs into the interval (the run-level model),
    with the head's processes as one run.

    Then memory (rnx/memory_gate.py) may raise the tier, and each configuration that is
    slower or grew in memory (every one with explain_all) gets its profile diff
    (rnx/profile_diff.py) as its explanation: it explains, never decides.

    wording: the caller's sentence for a reason's code (stats/reasons.py), where it says it
    differently (the server: a workload, not the environment, has no baseline).

    prepared: these baselines prepared once (PreparedBaselines(baselines)), for a caller that
    gates many heads against them (the server); made anew for this call where None.
    """
    paired = head.settings.mode == "paired"
    if prepared is None:
        prepared = PreparedBaselines(baselines)
    elif len(prepared.baselines) != len(baselines) or any(
        a is not b for a, b in zip(prepared.baselines, baselines, strict=True)
    ):
        raise ValueError("prepared must be made from these very baseline documents")
    plan = _plan(head, prepared, paired)
    rows = plan.rows
    comparisons: dict[str, stats.Comparison] = {}
    if plan.pairs:
        sides = (
            None
            if paired
            else prepared.statistics(tuple(plan.pair_keys), plan.pairs, plan.pair_runs)
        )
        results = stats.compare_many(
            plan.pairs,
            rope=gate.rope,
            probability=gate.probability,
            resamples=resamples,
            seed=seed,
            paired=paired,
            baseline=sides,
        )
        for cid, c in zip(plan.pair_ids, results, strict=True):
            comparisons[cid] = c
            rows[cid].update(_fill(c, gate.block_threshold, paired))

    # A slowdown a lower GPU clock explains is the machine's, not the code's (rnx/clocks.py).
    for cid, why in explained_by_clock(head, baselines, comparisons, rope=gate.rope).items():
        del comparisons[cid]
        rows[cid].update(verdict="undecided", reason=why)
    decision = stats.gate(
        comparisons,
        broken=plan.broken,
        missing_baseline=plan.missing,
        no_baseline=not paired and not baselines,
        block_threshold=gate.block_threshold,
        probability=gate.probability,
    )
    tier, reasons = _tier(decision, rows, comparisons, wording)
    tier, reasons = _memory_and_profiles(head, baselines, gate, rows, tier, reasons, explain_all)
    used = sorted(plan.used_baselines)
    compared = [ConfigComparison(**row) for row in rows.values()]  # in head's order
    return GateReport(
        tier=tier,
        reasons=reasons,
        comparisons=compared,
        baseline_run_ids=[] if paired else [baselines[i].run_id for i in used],
        inconclusive=inconclusive(compared, tier=tier, block_threshold=gate.block_threshold),
    )


def _base_profiles(
    cfg: Configuration, index: Sequence[dict[str, Configuration]], paired: bool
) -> tuple[Memory | None, Profile | None]:
    """Paired: the base measured beside the head; else the first baseline run that has them."""
    if paired:
        return cfg.base_memory, cfg.base_profile
    memory = profile = None
    for by_id in index:
        found = by_id.get(cfg.id)
        if found is not None and found.status == "ok":
            memory = memory or found.memory
            profile = profile or found.profile
    return memory, profile


def _memory_and_profiles(
    head: ResultsDocument,
    baselines: Sequence[ResultsDocument],
    gate: GateSettings,
    rows: dict[str, dict[str, Any]],
    tier: str,
    reasons: list[str],
    explain_all: bool,
) -> tuple[str, list[str]]:
    """Memory's WARN/BLOCK reasons on top of the statistics' tier, and the explanations."""
    paired = head.settings.mode == "paired"
    index = [doc.by_id for doc in baselines]
    found: list[str] = []
    memory_tier = "PASS"
    for cfg in head.configurations:
        if cfg.status != "ok":
            continue
        row = rows[cfg.id]
        base_memory, base_profile = _base_profiles(cfg, index, paired)
        change, why = memory_change(
            cfg.id, base_memory, cfg.memory, base_profile, cfg.profile, gate
        )
        row["memory"] = change
        found.extend(why)
        if change is not None:
            memory_tier = worse(memory_tier, change.tier)
        wanted = explain_all or row["verdict"] == "slower" or bool(why)
        if wanted and base_profile is not None and cfg.profile is not None:
            row["explanation"] = diff_profiles(base_profile, cfg.profile)
    if not found:
        return tier, reasons
    return worse(tier, memory_tier), (found if tier == "PASS" else reasons + found)


def inconclusive(
    comparisons: Sequence[ConfigComparison], *, tier: str, block_threshold: float
) -> Inconclusive | None:
    """Whether a PASS or WARN could not have seen a block-sized slowdown: the configurations
    left undecided by the statistics whose resolution (the smallest slowdown their data could
    call credible) is wider than the block threshold. Such a configuration is a note, not a
    WARN (stats.gate), so without this a run of them reads as a plain PASS. None when every
    configuration could have shown a block-sized change, or the run blocks anyway."""
    if tier == "BLOCK":
        return None
    blind = [
        c
        for c in comparisons
        if c.verdict == "undecided" and c.resolution is not None and c.resolution > block_threshold
    ]
    if not blind:
        return None
    return Inconclusive(
        resolution=max(c.resolution or 0.0 for c in blind),
        block_threshold=block_threshold,
        configurations=[c.id for c in blind],
    )


def _tier(
    decision: stats.GateDecision,
    rows: dict[str, dict[str, Any]],
    comparisons: dict[str, stats.Comparison],
    wording: Mapping[Code, Wording] | None,
) -> tuple[str, list[str]]:
    """The run's tier and reasons: the statistics' decision, in the caller's wording, plus the
    configurations left undecided without statistics (no samples, unusable pairs, a
    clock-explained slowdown)."""
    undecided = [k for k, r in rows.items() if r["verdict"] == "undecided" and k not in comparisons]
    reasons = [render(r, wording) for r in decision.findings]
    extra = [f"{k} is undecided: {rows[k]['reason']}" for k in undecided]
    tier: str = decision.tier
    if extra:
        reasons = reasons + extra if tier != "PASS" else extra
        tier = "BLOCK" if tier == "BLOCK" else "WARN"
    if tier == "PASS" and not comparisons:
        skipped = sum(r["verdict"] == "skipped" for r in rows.values())
        reasons = [f"nothing to compare: {skipped} of {len(rows)} configurations skipped"]
    return tier, reasons


def _row(cfg: Configuration, cid: str) -> dict[str, Any]:
    return {
        "id": cid,
        "runtime": cfg.runtime,
        "dtype": cfg.dtype,
        "batch_size": cfg.batch_size,
        "status": cfg.status,
        "verdict": "undecided",
        "speed_of_light": cfg.speed_of_light,
    }


def _base_speed_of_light(
    cid: str, index: Sequence[dict[str, Configuration]]
) -> SpeedOfLight | None:
    for by_id in index:
        cfg = by_id.get(cid)
        if cfg is not None and cfg.speed_of_light is not None:
            return cfg.speed_of_light
    return None


def _groups(samples: Samples | None) -> list[Any]:
    # process_arrays holds no empty group: a process has a group once it has a time.
    return [] if samples is None else list(samples.process_arrays)


def _other_clock(head_method: str | None, base: Configuration) -> str | None:
    """The baseline's timing method when it is not head's (documents that do not record one
    are taken as comparable: they predate the choice, when every GPU run used events)."""
    base_method = base.timing_method
    if head_method is None or base_method is None or base_method == head_method:
        return None
    return base_method


def _baseline_groups(
    cid: str, index: Sequence[dict[str, Configuration]], head_method: str | None = None
) -> tuple[list[Any], str | None, list[int]]:
    """One group per (baseline run, worker process) that measured this configuration with
    head's clock, and the index of the baseline document (the run) each group came from.
    index: each baseline document's configurations by id (ids are unique within a document)."""
    if not index:
        return [], NO_BASELINE, []
    groups: list[Any] = []
    used: list[int] = []
    statuses: list[str] = []
    other_clocks: set[str] = set()
    for i, by_id in enumerate(index):
        cfg = by_id.get(cid)
        if cfg is None:
            continue
        other = _other_clock(head_method, cfg) if cfg.status == "ok" else None
        if other is not None:
            # Kernel time and event time differ by the GPU's gaps between kernels (1.2-3x at
            # microsecond kernels): comparing them would read a timer change as a speed change.
            other_clocks.add(other)
            continue
        statuses.append(cfg.status)
        found = _groups(cfg.samples) if cfg.status == "ok" else []
        groups.extend(found)
        used.extend([i] * len(found))
    if groups:
        return groups, None, used
    if other_clocks:
        return [], _other_clock_reason(head_method, sorted(other_clocks)), []
    if statuses:
        seen = ", ".join(sorted(set(statuses)))
        return [], f"no usable baseline: the baseline has status {seen} for this configuration", []
    return [], "no baseline for this configuration yet", []


OTHER_CLOCK = "not compared: the baseline was timed with"


def _other_clock_reason(head_method: str | None, base_methods: list[str]) -> str:
    return (
        f"{OTHER_CLOCK} {' and '.join(base_methods)}, this run with {head_method}, and the two "
        "measure different things; record a baseline with the same harness.gpu-timer "
        "(kernalin.yml or rnx bench --gpu-timer), or time this run as the baseline was"
    )


def _paired_groups(
    cfg: Configuration,
) -> tuple[list[Sequence[int]], list[Sequence[int]], str | None]:
    """Pair base and head samples measured in the same (process, round), grouped by process."""
    if cfg.base_samples is None or not cfg.base_samples.ns:
        return [], [], "paired mode, but this configuration has no base samples"
    if cfg.samples is None:
        return [], [], "paired mode, but this configuration has no head samples"

    def keyed(s: Samples) -> dict[tuple[int, int, int], int]:
        seen: Counter[tuple[int, int]] = Counter()
        out = {}
        for t, r, p in zip(s.ns, s.round, s.process, strict=True):
            out[(p, r, seen[(p, r)])] = t
            seen[(p, r)] += 1
        return out

    base, head = keyed(cfg.base_samples), keyed(cfg.samples)
    by_process: dict[int, tuple[list[int], list[int]]] = {}
    for key in sorted(base.keys() & head.keys()):
        b, h = by_process.setdefault(key[0], ([], []))
        b.append(base[key])
        h.append(head[key])
    if not by_process:
        return [], [], "paired mode, but no base and head samples share a round"
    procs = sorted(by_process)
    return [by_process[p][0] for p in procs], [by_process[p][1] for p in procs], None


def _fill(c: stats.Comparison, block_threshold: float, paired: bool) -> dict[str, Any]:
    def num(x: float) -> float | None:
        return x if math.isfinite(x) else None

    return {
        "verdict": c.verdict,
        "reason": c.reason,
        "base_median_ns": num(c.base_median),
        "head_median_ns": num(c.head_median),
        "ratio": num(c.ratio),
        "low": num(c.low),
        "high": num(c.high),
        "p_slower": c.p_slower,
        "p_faster": c.p_faster,
        "p_equivalent": c.p_equivalent,
        "p_block": c.p_exceeds(block_threshold),
        "resolution": None if c.resolution is None else num(c.resolution),
        "base_samples": c.base_samples,
        "head_samples": c.head_samples,
    }
