"""The shape of the product code: its longest functions and largest files (issue 12's before/after).

    .venv/bin/python -m benchmarks.code_shape [--root DIR] [--top 15] [--over 80] [--only PKG,...]

Reads the product packages of a checkout (this one by default; `--root` another, read only)
with `ast`: a function's length is its lines from `def` (decorators excluded) to its last line,
docstring and comments included. Prints the `--top` longest functions and files, and every
function longer than `--over` lines.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

PACKAGES = ("stats", "rnx", "rnx_github", "rnx_cli", "bench_runner", "gate_server", "action")


def functions(root: Path, packages: tuple[str, ...]) -> list[tuple[int, str]]:
    found = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    length = (node.end_lineno or node.lineno) - node.lineno + 1
                    kind = "class " if isinstance(node, ast.ClassDef) else ""
                    where = f"{path.relative_to(root)}:{node.lineno}"
                    found.append((length, f"{kind}{node.name} ({where})"))
    return sorted(found, reverse=True)


def files(root: Path, packages: tuple[str, ...]) -> list[tuple[int, str]]:
    sizes = [
        (len(p.read_text(encoding="utf-8").splitlines()), str(p.relative_to(root)))
        for package in packages
        for p in (root / package).rglob("*.py")
    ]
    return sorted(sizes, reverse=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--over", type=int, default=80, help="list every function longer than this")
    p.add_argument("--only", help="comma-separated packages (default: all product packages)")
    args = p.parse_args(argv)
    packages = tuple(args.only.split(",")) if args.only else PACKAGES
    packages = tuple(pkg for pkg in packages if (args.root / pkg).is_dir())
    funcs = [f for f in functions(args.root, packages) if not f[1].startswith("class ")]
    print(f"{args.root} ({', '.join(packages)})")
    print(f"\nlongest functions (of {len(funcs)}):")
    for length, name in funcs[: args.top]:
        print(f"  {length:4}  {name}")
    over = [f for f in funcs if f[0] > args.over]
    print(f"\nfunctions over {args.over} lines: {len(over)}")
    for length, name in over:
        print(f"  {length:4}  {name}")
    sizes = files(args.root, packages)
    print(f"\nlargest files (of {len(sizes)}, {sum(n for n, _ in sizes)} lines):")
    for lines, name in sizes[: args.top]:
        print(f"  {lines:5}  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
