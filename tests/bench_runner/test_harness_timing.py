"""Timers and warm-up, with a timer passed in instead of a real clock where it matters."""

from __future__ import annotations

from bench_runner.timing import SPIN_MAX_NS, CpuTimer, next_spin_ns, warm_up


class ScriptedTimer:
    """Answers sample() from a script of per-call times; records the loops it was asked for."""

    method = "scripted"

    def __init__(self, values):
        self.values = list(values)
        self.loops = []
        self.details = {}

    def sample(self, fn, loops):
        self.loops.append(loops)
        return self.values.pop(0) if len(self.values) > 1 else self.values[0]


def test_warm_up_stops_once_three_samples_agree():
    timer = ScriptedTimer([5000, 3000, 1000, 1010, 1005, 1000])
    w = warm_up(
        timer,
        lambda: None,
        min_iterations=1,
        budget_ns=1e12,
        target_sample_ns=10_000,
        max_sample_ns=1e9,
    )
    assert w.stable and w.iterations == 5
    assert w.loops == 10  # 10 us target / 1 us per call


def test_warm_up_respects_its_budget_when_never_stable():
    timer = ScriptedTimer([1000, 2000] * 50 + [1000])
    w = warm_up(
        timer, lambda: None, min_iterations=2, budget_ns=0, target_sample_ns=1000, max_sample_ns=1e9
    )
    assert not w.stable and w.iterations == 2


def test_loops_never_exceed_the_per_sample_cap():
    timer = ScriptedTimer([100.0])
    w = warm_up(
        timer,
        lambda: None,
        min_iterations=1,
        budget_ns=1e12,
        target_sample_ns=1e6,
        max_sample_ns=5e3,
    )
    assert w.loops == 50


def test_cpu_timer_reports_time_per_call():
    calls = []
    t = CpuTimer().sample(lambda: calls.append(1), 100)
    assert len(calls) == 100 and t > 0


def test_the_spin_outlasts_twice_the_median_launch_and_never_shrinks():
    assert next_spin_ns(100_000, [60_000, 80_000, 300_000], late=False) == 2 * 80_000 + 50_000
    assert next_spin_ns(400_000, [60_000, 80_000], late=False) == 400_000
    assert next_spin_ns(100_000, [], late=False) == 100_000


def test_a_late_call_at_least_doubles_the_spin_up_to_its_cap():
    assert next_spin_ns(100_000, [10_000], late=True) == 200_000
    assert next_spin_ns(100_000, [2_000_000], late=True) == 4_050_000
    assert next_spin_ns(40e6, [10_000], late=True) == SPIN_MAX_NS
