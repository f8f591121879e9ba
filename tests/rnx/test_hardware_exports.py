"""The hardware comparison's money and exports (issue 27): costs in USD with the cheapest
environment of each configuration marked, and the Markdown a team pastes into a pull request
(`rnx compare-hardware --markdown`; the dashboard's /hardware.md is the same text)."""

from __future__ import annotations

import csv
import io
import re
import threading
import time
from pathlib import Path

import pytest

from gate_server.dashboard.hardware import Comparisons
from rnx.hardware import CURRENCY, compare_hardware, to_csv, to_markdown
from rnx_cli.main import main
from tests.rnx.test_hardware import run


def _priced():
    # The H200 is 20 times as fast at 35 times the price: the CPU is cheaper per item.
    cpu, gpu = run("cpu", seed=1), run("h200", seed=2, slowdown=0.05)
    return compare_hardware([cpu, gpu], prices={"cpu": 0.10, "h200": 3.50})


def test_the_cheapest_environment_of_each_configuration_is_marked() -> None:
    comparison = _priced()
    for row in comparison.rows:
        cheapest = [c.environment for c in row.cells if c.cheapest]
        costs = {c.environment: c.cost_per_million for c in row.cells}
        assert cheapest == [min(costs, key=lambda e: costs[e] or 0.0)] == ["cpu"]
    # One price alone compares nothing: nothing is marked.
    alone = compare_hardware([run("cpu", seed=1), run("h200", seed=2)], prices={"cpu": 0.1})
    assert not any(c.cheapest for r in alone.rows for c in r.cells)


def test_the_csv_says_the_currency_and_the_cheapest() -> None:
    rows = list(csv.DictReader(io.StringIO(to_csv(_priced()))))
    assert {r["currency"] for r in rows} == {CURRENCY} == {"USD"}
    assert {r["environment"] for r in rows if r["cheapest"] == "yes"} == {"cpu"}


def test_markdown_is_a_table_with_usd_and_the_cheapest_marked() -> None:
    text = to_markdown(_priced())
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("| configuration"))
    assert "cost / 1M items (USD)" in lines[header]
    assert lines[header + 1] == "|---|---|---:|---:|---:|---:|---|"
    table = lines[header + 2 : header + 6]
    assert all(line.count(" | ") == 6 for line in table), table  # 7 cells each
    assert sum("(cheapest)" in line for line in table) == 2
    assert "faster (20" in text and "| **hardware** (differs)" not in text  # same hardware


def test_markdown_shows_uploaded_text_as_the_characters_it_is() -> None:
    evil = "h200 | <img src=x> [click](https://evil.example) **b**"
    comparison = compare_hardware([run("cpu", seed=1), run("gpu", name=evil, seed=2)])
    text = to_markdown(comparison)
    assert "<img" not in text and "[click](" not in text and "**b**" not in text
    assert "h200 \\| &lt;img src=x&gt; \\[click\\](https://evil.example) \\*\\*b\\*\\*" in text
    # The pipe does not split a cell: each row keeps its table's cells.
    rows = [line for line in text.splitlines() if "&lt;img" in line and line.startswith("|")]
    pipes = sorted(len(re.findall(r"(?<!\\)\|", line)) for line in rows)
    assert pipes == [4, 8, 8], rows  # the software header (3 cells), two configurations (7)


def test_cli_markdown_to_stdout_and_to_a_file(tmp_path: Path, capsys) -> None:
    paths = []
    for env, seed, slowdown in (("cpu", 1, 1.0), ("h200", 2, 0.05)):
        path = tmp_path / f"{env}.json"
        path.write_text(run(env, seed=seed, slowdown=slowdown).to_json())
        paths.append(str(path))
    prices = ["--price", "cpu=0.10", "--price", "h200=3.50"]
    assert main(["compare-hardware", *paths, *prices, "--markdown", "-"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("### Hardware comparison: kernels/attention.py")
    assert "(cheapest)" in out
    target = tmp_path / "cmp.md"
    assert main(["compare-hardware", *paths, *prices, "--markdown", str(target)]) == 0
    table = capsys.readouterr().out
    assert "cost/1M items (USD)" in table and "* the cheapest per million items" in table
    assert target.read_text().startswith("### Hardware comparison")
    both = ["--markdown", "-", "--csv", "-"]
    assert main(["compare-hardware", *paths, *both]) == 2
    assert "both ask for stdout" in capsys.readouterr().err


def test_viewers_asking_at_once_get_one_comparison_worked_out() -> None:
    kept = Comparisons(max_entries=2)
    calls = []

    def work():
        calls.append(1)
        time.sleep(0.05)
        return _priced()

    found = []
    threads = [
        threading.Thread(target=lambda: found.append(kept.get(("a",), work))) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and kept.computed == 1 and len({id(f) for f in found}) == 1
    kept.get(("b",), _priced)
    kept.get(("c",), _priced)  # the bound: ("a",) is dropped
    kept.get(("a",), _priced)
    assert kept.computed == 4


@pytest.mark.parametrize("flag", ["--csv", "--markdown"])
def test_an_unwritable_export_is_one_line(tmp_path: Path, capsys, flag: str) -> None:
    paths = []
    for env, seed in (("cpu", 1), ("h200", 2)):
        path = tmp_path / f"{env}.json"
        path.write_text(run(env, seed=seed).to_json())
        paths.append(str(path))
    assert main(["compare-hardware", *paths, flag, str(tmp_path / "no" / "such" / "dir")]) == 2
    assert f"cannot write {flag}" in capsys.readouterr().err
