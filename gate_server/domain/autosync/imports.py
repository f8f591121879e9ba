"""A workload's import closure within its repository: the Python files it imports, directly or
through each other, that are files of the repository (not third-party packages).

Pure: the repository's file list and a reader of one file's text come in as arguments, so the
server answers them from GitHub (gate_server/domain/autosync/jobs.py) and tests from a dict. The
harness runs a workload from the checkout's root, so `import kernels.common` is
kernels/common.py or kernels/common/__init__.py from the root; the workload's own folder is
tried too (a workload run as a script imports its neighbours that way).
"""

from __future__ import annotations

import ast
import posixpath
from collections.abc import Callable, Collection

MAX_FILES = 200  # a closure larger than this is cut (and said so): GitHub reads cost calls


def _module_files(module: str, folder: str, paths: Collection[str]) -> list[str]:
    """The repository files `import module` may load, from the root and from `folder`: the
    module itself and each package on the way (importing a.b runs a/__init__.py too)."""
    parts = module.split(".")
    found = []
    for base in dict.fromkeys(["", folder]):
        for n in range(1, len(parts) + 1):
            stem = posixpath.join(base, *parts[:n])
            for candidate in (stem + ".py", stem + "/__init__.py"):
                if candidate in paths:
                    found.append(candidate)
    return found


def imported_modules(source: str, path: str) -> list[str]:
    """The modules `source` (the file at `path`) imports, as dotted names from the root or its
    folder; a relative import is made absolute from its folder. A file that does not parse
    imports nothing we can see (the workload fails on it anyway)."""
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError):
        return []
    folder = posixpath.dirname(path)
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # from .x import y: relative to the file's package folder
                base = folder
                for _ in range(node.level - 1):
                    base = posixpath.dirname(base)
                prefix = ".".join(p for p in base.split("/") if p)
                module = ".".join(p for p in (prefix, node.module or "") if p)
            else:
                module = node.module or ""
            # `from pkg import name` may import the submodule pkg.name: both are candidates.
            names += [module] if module else []
            names += [f"{module}.{a.name}" if module else a.name for a in node.names]
    return names


def import_closure(
    workload: str,
    paths: Collection[str],
    read: Callable[[str], str | None],
    *,
    max_files: int = MAX_FILES,
) -> tuple[set[str], bool]:
    """The repository files `workload` depends on through Python imports, itself included,
    and whether the closure was cut at `max_files`. `paths`: every file of the repository at
    the commit; `read(path)`: its text (None when it cannot be read)."""
    closure = {workload}
    todo = [workload] if workload.endswith(".py") else []
    while todo:
        current = todo.pop()
        source = read(current)
        if source is None:
            continue
        folder = posixpath.dirname(current)
        for module in imported_modules(source, current):
            for found in _module_files(module, folder, paths):
                if found in closure:
                    continue
                if len(closure) >= max_files:
                    return closure, True
                closure.add(found)
                todo.append(found)
    return closure, False
