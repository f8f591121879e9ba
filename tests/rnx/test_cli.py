"""The `rnx` dispatcher: usage, unknown commands, and the JSON Schema for other tools."""

from __future__ import annotations

import json

import pytest

from rnx_cli.main import COMMANDS, main


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


def test_a_reader_that_goes_away_is_not_a_traceback() -> None:
    """`rnx schema | head -0`: the reader closes the pipe; rnx exits quietly."""
    import subprocess
    import sys

    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from rnx_cli.main import main; sys.exit(main(['schema']))",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # before rnx (still importing) writes anything
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0, stderr
    assert "Traceback" not in stderr
