"""The shape of the code: its largest files, its longest functions and its settings models.

    .venv/bin/python benchmarks/code_shape.py gate_server              # this checkout
    .venv/bin/python benchmarks/code_shape.py --root /tmp/old gate_server --longer-than 60

For a before/after comparison, unpack the old revision (`git archive REV | tar -x -C DIR`) and
pass it as --root. Functions count from their `def` line to their last line (decorators and
docstrings included); a method counts on its own, and so does its class.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path


def python_files(root: Path, packages: list[str]) -> list[Path]:
    return sorted(f for p in packages for f in (root / p).rglob("*.py"))


def long_definitions(path: Path, root: Path, longer_than: int) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > longer_than:
                kind = "class " if isinstance(node, ast.ClassDef) else ""
                found.append((lines, f"{path.relative_to(root)}:{node.lineno} {kind}{node.name}"))
    return found


def settings_models(path: Path, root: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        f"{path.relative_to(root)}:{node.lineno} {node.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef) and node.name.endswith("Settings")
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="+", help="folders below --root, e.g. gate_server")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--longer-than", type=int, default=60, help="list longer definitions")
    parser.add_argument("--files", type=int, default=8, help="how many of the largest files")
    args = parser.parse_args(argv)
    files = python_files(args.root, args.packages)
    if not files:
        print(f"no Python files under {args.root} / {args.packages}", file=sys.stderr)
        return 2
    sizes = sorted(((len(f.read_text().splitlines()), f) for f in files), reverse=True)
    total = sum(n for n, _ in sizes)
    print(f"{len(files)} files, {total} lines; the largest:")
    for n, f in sizes[: args.files]:
        print(f"{n:6d}  {f.relative_to(args.root)}")
    longest = sorted(d for f in files for d in long_definitions(f, args.root, args.longer_than))
    print(f"definitions longer than {args.longer_than} lines: {len(longest)}")
    for n, where in reversed(longest):
        print(f"{n:6d}  {where}")
    models = [m for f in files for m in settings_models(f, args.root)]
    print(f"settings models (classes named *Settings): {len(models)}")
    for m in models:
        print(f"        {m}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
