"""The shape of the product code: largest files, longest functions, settings models (issue 12's
before/after).

    .venv/bin/python -m experiments.code_shape                       # every product package
    .venv/bin/python -m experiments.code_shape gate_server --longer-than 60
    .venv/bin/python -m experiments.code_shape --root /tmp/old [--top 15] [--over 80] [--only A,B]

Reads the product packages of a checkout (this one by default; `--root` another, read only:
unpack an old revision with `git archive REV | tar -x -C DIR`) with `ast`. Packages are named as
arguments or with --only (comma-separated); by default all of them. A definition's length is its
lines from `def`/`class` (decorators excluded) to its last line, docstring and comments
included; a method counts on its own, and so does its class. Prints the `--top` largest files
and longest functions, every function longer than `--over` lines, every definition (function or
class) longer than `--longer-than` lines, and the settings models (classes named *Settings).
"""

from __future__ import annotations

import argparse
import ast
from dataclasses import dataclass
from pathlib import Path

PACKAGES = ("stats", "rnx", "rnx_github", "rnx_cli", "bench_runner", "gate_server", "action")


@dataclass(frozen=True)
class Definition:
    lines: int
    name: str
    where: str  # path:line
    is_class: bool

    def __str__(self) -> str:
        return f"{'class ' if self.is_class else ''}{self.name} ({self.where})"


def python_files(root: Path, packages: tuple[str, ...]) -> list[Path]:
    return sorted(f for package in packages for f in (root / package).rglob("*.py"))


def definitions(path: Path, root: Path) -> list[Definition]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [
        Definition(
            lines=(node.end_lineno or node.lineno) - node.lineno + 1,
            name=node.name,
            where=f"{path.relative_to(root)}:{node.lineno}",
            is_class=isinstance(node, ast.ClassDef),
        )
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    ]


def _section(title: str, rows: list[str]) -> None:
    print(f"\n{title}")
    for row in rows:
        print(f"  {row}")


def report(root: Path, packages: tuple[str, ...], args: argparse.Namespace) -> None:
    files = python_files(root, packages)
    sizes = sorted((len(f.read_text(encoding="utf-8").splitlines()), f) for f in files)[::-1]
    found = sorted((d for f in files for d in definitions(f, root)), key=lambda d: -d.lines)
    funcs = [d for d in found if not d.is_class]
    over = [d for d in funcs if d.lines > args.over]
    longer = [d for d in found if d.lines > args.longer_than]
    models = [d for d in found if d.is_class and d.name.endswith("Settings")]
    print(f"{root} ({', '.join(packages)})")
    top_files = sizes[: args.top if args.files is None else args.files]
    _section(
        f"largest files (of {len(sizes)}, {sum(n for n, _ in sizes)} lines):",
        [f"{n:5}  {f.relative_to(root)}" for n, f in top_files],
    )
    _section(
        f"longest functions (of {len(funcs)}):", [f"{d.lines:4}  {d}" for d in funcs[: args.top]]
    )
    _section(f"functions over {args.over} lines: {len(over)}", [f"{d.lines:4}  {d}" for d in over])
    _section(
        f"definitions (functions and classes) longer than {args.longer_than} lines: {len(longer)}",
        [f"{d.lines:4}  {d}" for d in longer],
    )
    _section(
        f"settings models (classes named *Settings): {len(models)}",
        [f"{m.where} {m.name}" for m in models],
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("packages", nargs="*", help="folders below --root (default: all products)")
    p.add_argument("--only", help="comma-separated packages, as the positional arguments")
    p.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    p.add_argument("--top", type=int, default=15, help="how many longest functions and files")
    p.add_argument("--files", type=int, help="how many of the largest files (default: --top)")
    p.add_argument("--over", type=int, default=80, help="list every function longer than this")
    p.add_argument("--longer-than", type=int, default=60, help="list every longer definition")
    args = p.parse_args(argv)
    named = tuple(args.packages) + (tuple(args.only.split(",")) if args.only else ())
    packages = tuple(pkg for pkg in named or PACKAGES if (args.root / pkg).is_dir())
    if not packages:
        print(f"no package of {named or PACKAGES} under {args.root}")
        return 2
    report(args.root, packages, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
