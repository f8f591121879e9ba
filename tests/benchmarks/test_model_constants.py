"""benchmarks/quality/model_constants.py: --set for the quality scripts."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from benchmarks.quality.model_constants import add_set_flag, apply_settings
from stats import runlevel


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_set_flag(p)
    return p


def test_a_constant_is_set_with_its_own_type(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runlevel, "POOL_FLOOR", runlevel.POOL_FLOOR)
    monkeypatch.setattr(runlevel, "MIN_CONFIGS_FOR_SCALE", runlevel.MIN_CONFIGS_FOR_SCALE)
    p = _parser()
    args = p.parse_args(["--set", "POOL_FLOOR=1", "--set", "MIN_CONFIGS_FOR_SCALE=8"])
    apply_settings(p, args.set)
    assert runlevel.POOL_FLOOR == 1.0
    assert runlevel.MIN_CONFIGS_FOR_SCALE == 8 and isinstance(runlevel.MIN_CONFIGS_FOR_SCALE, int)


def test_the_noise_goes_with_its_degrees_of_freedom(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TAIL_DF", "_NOISE", "_NORMAL_AT"):
        monkeypatch.setattr(runlevel, name, getattr(runlevel, name))
    before = runlevel._NOISE
    p = _parser()
    apply_settings(p, p.parse_args(["--set", "TAIL_DF=5"]).set)
    assert runlevel.TAIL_DF == 5.0
    assert runlevel._NOISE.max() > before.max()  # heavier tails, the same 95% point
    assert float(np.quantile(runlevel._NOISE, 0.95)) == pytest.approx(runlevel._NORMAL_AT, 1e-3)


@pytest.mark.parametrize(
    ("setting", "says"),
    [
        ("GAP_LEVEL=0.8", "sweep GAP_LEVEL with sensitivity_sweep"),
        ("NOPE=1", "no numeric constant 'NOPE'"),
        ("fit=1", "no numeric constant 'fit'"),
        ("POOL_FLOOR=wide", "'wide' is not a number"),
    ],
)
def test_a_setting_it_cannot_make_is_a_clear_error(
    setting: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    p = _parser()
    with pytest.raises(SystemExit):
        apply_settings(p, p.parse_args(["--set", setting]).set)
    assert says in capsys.readouterr().err
