"""The `rnx` dispatcher: usage, unknown commands, and the JSON Schema for other tools."""

from __future__ import annotations

import json

import pytest

from rnx.cli import COMMANDS, main


def test_help_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert name in out


def test_unknown_command_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["frobnicate"]) == 2
    assert "unknown command 'frobnicate'" in capsys.readouterr().err


def test_every_command_target_exists() -> None:
    import importlib

    for target, _, _ in COMMANDS.values():
        module, func = target.split(":")
        assert callable(getattr(importlib.import_module(module), func)), target


def test_schema_prints_the_results_json_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["title"] == "ResultsDocument"
    assert "configurations" in schema["properties"]
