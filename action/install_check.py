"""Which of rnx-benchmark's requirements a Python lacks: install.sh names them when pip fails.

Run with the interpreter to check, before rnx-benchmark is installed (it imports nothing of
ours): python install_check.py PYPROJECT [--build]. Prints one requirement per line that is not
installed or whose installed version is outside the requirement's range; --build adds the build
backend's requirement (setuptools) when it is missing.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import sys
from pathlib import Path


def _requirements(pyproject: str, key: str) -> list[str]:
    """[project] dependencies or [build-system] requires, without needing tomllib (3.10)."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: the list is simple enough to read with a pattern
        found = re.search(rf"^{key}\s*=\s*\[(.*?)\]", pyproject, re.S | re.M)
        return re.findall(r'"([^"]+)"', found.group(1)) if found else []
    data = tomllib.loads(pyproject)
    if key == "requires":
        return list(data.get("build-system", {}).get("requires", []))
    return list(data.get("project", {}).get("dependencies", []))


def _satisfied(requirement: str) -> bool:
    name = re.match(r"[A-Za-z0-9_.-]+", requirement)
    if name is None:
        return False
    try:
        version = importlib.metadata.version(name.group(0))
    except importlib.metadata.PackageNotFoundError:
        return False
    for module in ("packaging.requirements", "pip._vendor.packaging.requirements"):
        try:
            requirements = importlib.import_module(module)
        except ImportError:
            continue
        spec = requirements.Requirement(requirement).specifier
        return bool(spec.contains(version, prereleases=True))
    return True  # installed; its version cannot be judged here (pip will)


def missing(pyproject_path: str, *, build: bool) -> list[str]:
    text = Path(pyproject_path).read_text(encoding="utf-8")
    wanted = _requirements(text, "dependencies")
    if build:
        wanted += _requirements(text, "requires")
    return [r for r in wanted if not _satisfied(r)]


if __name__ == "__main__":
    args = sys.argv[1:]
    print("\n".join(missing(args[0], build="--build" in args)))
