"""Which package may import which (docs/layout.md), checked from the source of every module.

Every import counts: at the top, inside a function, behind TYPE_CHECKING; so do module names
handed over as strings ("pkg.module:function" for importlib or uvicorn, `python -m pkg` in a
subprocess command). A forbidden import or an import circle between modules fails here with
the file and line that made it. The layers' picture in docs/layout.md is checked against the
same table: its arrows are parsed, and a missing, extra or upward arrow fails.

Inside gate_server the same holds one level down, between its rooms (a folder, or a module at
its root): SERVER_ROOMS is the table, "The server's rooms" in docs/layout.md its picture.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("stats", "rnx", "rnx_github", "rnx_cli", "bench_runner", "gate_server", "action")

# Packages that are not the product: they may import it, it never imports them.
NOT_SHIPPED = frozenset({"tests", "testbed", "benchmarks", "experiments"})
# Package -> the packages of ours it may import (itself always).
MAY_IMPORT: dict[str, frozenset[str]] = {
    "stats": frozenset(),
    "rnx": frozenset({"stats"}),
    "rnx_github": frozenset({"rnx", "stats"}),
    "bench_runner": frozenset({"rnx", "stats"}),
    "gate_server": frozenset({"rnx", "stats", "rnx_github"}),
    "action": frozenset({"rnx", "stats", "rnx_github", "bench_runner"}),
    "rnx_cli": frozenset(OURS),
}
# Package -> the only outside distributions it may import (None: no limit beyond the above),
# and distributions it must never import.
THIRD_PARTY_ONLY: dict[str, frozenset[str]] = {
    "stats": frozenset({"numpy", "scipy"}),
    "rnx": frozenset({"pydantic", "yaml"}),
}
NEVER: dict[str, frozenset[str]] = {
    "gate_server": frozenset({"torch", "triton", "tensorrt", "onnxruntime"}),
    "rnx_github": frozenset({"torch", "starlette", "sqlalchemy", "uvicorn"}),
}
# Circles that exist today and are being removed elsewhere; each names who removes it. An entry
# whose circle is gone fails the test: delete it then, so the list never hides a new circle.
KNOWN_CIRCLES: dict[frozenset[str], str] = {}

# gate_server's rooms, top to bottom: a folder, or a module at the package's root. Room -> the
# rooms it may import besides itself and the foundation. The foundation (modules at the root
# that every room uses) imports nothing of the server but itself.
SERVER_FOUNDATION = frozenset({"settings", "errors", "clock", "numbers", "workloads"})
SERVER_ROOMS: dict[str, frozenset[str]] = {
    "__init__": frozenset({"asgi"}),
    "__main__": frozenset({"cli"}),
    "cli": frozenset({"asgi", "domain", "db"}),
    "asgi": frozenset({"http", "jobs", "services", "db"}),
    "http": frozenset({"services", "dashboard", "github", "domain", "db"}),
    "jobs": frozenset({"domain", "db"}),
    "services": frozenset({"dashboard", "github", "domain", "db"}),
    "dashboard": frozenset({"domain", "db"}),
    "github": frozenset({"domain", "db"}),
    "domain": frozenset({"db"}),
    "db": frozenset(),
    "foundation": frozenset(),
}
_TARGET = re.compile(rf"^(?:{'|'.join(OURS)})(?:\.\w+)*(?::\w+)?$")


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, e.g. "action.gate"
    target: str  # what it imports, e.g. "rnx_github.client" or "torch"
    path: Path
    line: int

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.module} imports {self.target}"


def product_modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in OURS:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _string_targets(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """Module names in strings: "pkg.mod:attr" (importlib, uvicorn) and `-m pkg` commands."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if ":" in node.value and _TARGET.match(node.value):
                yield node.value.split(":")[0], node.lineno
        elif isinstance(node, (ast.List, ast.Tuple)):
            items = node.elts
            for flag, value in zip(items, items[1:], strict=False):
                if (
                    isinstance(flag, ast.Constant)
                    and flag.value == "-m"
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, str)
                ):
                    yield value.value, value.lineno
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, (ast.Attribute, ast.Name))
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.args[0].value, node.lineno


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[Import] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [Import(module, a.name, path, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, path, node)
            for alias in node.names:
                # `from pkg import module` imports the module; `from module import name` the module.
                sub = f"{base}.{alias.name}"
                found.append(Import(module, sub if sub in modules else base, path, node.lineno))
    found += [Import(module, t, path, line) for t, line in _string_targets(tree)]
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, list[Import]]:
    modules = product_modules()
    return {m: imports_of(m, p, modules) for m, p in modules.items()}


def _top(name: str) -> str:
    return name.split(".")[0]


def _stdlib(name: str) -> bool:
    return _top(name) in sys.stdlib_module_names or _top(name) == "__future__"


def test_every_product_package_is_known() -> None:
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - NOT_SHIPPED
    assert packages == set(OURS), "a new package needs its place in MAY_IMPORT (docs/layout.md)"


def test_packages_import_only_what_the_layout_allows(graph: dict[str, list[Import]]) -> None:
    wrong = [
        str(i)
        for imports in graph.values()
        for i in imports
        if _top(i.target) in OURS
        and _top(i.target) != _top(i.module)
        and _top(i.target) not in MAY_IMPORT[_top(i.module)]
    ]
    assert not wrong, "imports against docs/layout.md:\n" + "\n".join(wrong)


def test_the_product_never_imports_what_is_not_shipped(graph: dict[str, list[Import]]) -> None:
    wrong = [str(i) for imports in graph.values() for i in imports if _top(i.target) in NOT_SHIPPED]
    assert not wrong, "the product imports tests, testbed or benchmarks:\n" + "\n".join(wrong)


def test_outside_packages_stay_where_they_belong(graph: dict[str, list[Import]]) -> None:
    wrong = []
    for module, imports in graph.items():
        package = _top(module)
        for i in imports:
            name = _top(i.target)
            if name in OURS or _stdlib(i.target):
                continue
            allowed = THIRD_PARTY_ONLY.get(package)
            if (allowed is not None and name not in allowed) or name in NEVER.get(package, ()):
                wrong.append(str(i))
    assert not wrong, "outside packages where they must not be:\n" + "\n".join(wrong)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circle_between_modules(graph: dict[str, list[Import]]) -> None:
    edges = {
        m: {i.target for i in imports if i.target in graph and i.target != m}
        for m, imports in graph.items()
    }
    circles = [c for c in _cycles(edges) if frozenset(c) not in KNOWN_CIRCLES]
    lines = sorted(
        {
            str(i)
            for circle in circles
            for m in circle
            for i in graph[m]
            if i.target in circle and i.target != m
        }
    )
    assert not circles, "modules that import each other:\n" + "\n".join(lines)
    gone = [sorted(k) for k in KNOWN_CIRCLES if list(sorted(k)) not in _cycles(edges)]
    assert not gone, f"these circles are gone: delete them from KNOWN_CIRCLES: {gone}"


def test_the_checks_see_imports_inside_functions_and_in_strings(tmp_path: Path) -> None:
    # The test itself: a lazy import, an importlib string and a `-m` command all count.
    path = tmp_path / "probe.py"
    path.write_text(
        "def f():\n    import torch\n    from gate_server.cli.main import serve_main\n"
        "COMMANDS = {'x': ('rnx_cli.main:main', None)}\n"
        "CMD = ['python', '-m', 'rnx_cli', 'serve']\n"
    )
    targets = {
        i.target for i in imports_of("gate_server.probe", path, {"gate_server.cli.main": path})
    }
    assert targets == {"torch", "gate_server.cli.main", "rnx_cli.main", "rnx_cli"}
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


ARROW = re.compile(r"([a-z_]+) +--> +(.*)$")


def diagram_arrows(layout: str, heading: str = "The layers") -> list[tuple[str, frozenset[str]]]:
    """The arrows of the fenced picture under "## <heading>", top to bottom: `A --> B, C` is
    (A, {B, C}); a target list in parentheses means none."""
    section = layout.split(f"\n## {heading}\n", 1)[1]
    picture = section.split("```", 2)[1]
    arrows = []
    for line in picture.splitlines():
        found = ARROW.search(line)
        if found:
            source, targets = found.groups()
            names = [] if targets.startswith("(") else [t.strip() for t in targets.split(",")]
            arrows.append((source, frozenset(names)))
    return arrows


def diagram_errors(
    arrows: list[tuple[str, frozenset[str]]],
    table: dict[str, frozenset[str]] = MAY_IMPORT,
) -> list[str]:
    """Where the picture's arrows differ from the table (MAY_IMPORT unless told), or point up
    the picture."""
    errors = []
    drawn = dict(arrows)
    if len(drawn) != len(arrows):
        errors.append("a package has two arrows")
    for package in sorted(set(table) | set(drawn)):
        have, allowed = drawn.get(package), table.get(package)
        if allowed is not None:
            allowed = allowed - {package}  # itself always, drawn or not
        if have is None or allowed is None:
            errors.append(f"{package}: in {'the table' if have is None else 'the picture'} only")
        elif have != allowed:
            errors.append(f"{package}: picture {sorted(have)}, table {sorted(allowed)}")
    row = {source: i for i, (source, _) in enumerate(arrows)}
    for source, targets in arrows:
        up = [t for t in targets if row.get(t, len(arrows)) <= row[source]]
        if up:
            errors.append(f"{source} --> {', '.join(sorted(up))}: drawn pointing up")
    return errors


def test_the_layers_picture_matches_the_table() -> None:
    arrows = diagram_arrows((ROOT / "docs" / "layout.md").read_text())
    errors = diagram_errors(arrows)
    assert not errors, "docs/layout.md's picture against MAY_IMPORT:\n" + "\n".join(errors)


def test_a_wrong_picture_is_caught() -> None:
    picture = (ROOT / "docs" / "layout.md").read_text()
    extra = picture.replace("rnx          --> stats", "rnx          --> stats, rnx_github")
    missing = picture.replace("rnx_github   --> rnx, stats", "rnx_github   --> rnx")
    upward = picture.replace("bench_runner --> rnx, stats", "bench_runner --> rnx, stats, action")
    assert diagram_errors(diagram_arrows(extra)) == [
        "rnx: picture ['rnx_github', 'stats'], table ['stats']",
        "rnx --> rnx_github: drawn pointing up",
    ]
    assert diagram_errors(diagram_arrows(missing)) == [
        "rnx_github: picture ['rnx'], table ['rnx', 'stats']"
    ]
    assert "bench_runner --> action: drawn pointing up" in diagram_errors(diagram_arrows(upward))


def server_room(module: str) -> str:
    """The room of a gate_server module: its folder, or the module itself at the root (the
    foundation's modules share one room)."""
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 else "__init__"
    return "foundation" if name in SERVER_FOUNDATION else name


def server_room_imports(graph: dict[str, list[Import]]) -> dict[str, list[Import]]:
    """Room -> the imports by its modules of modules in another room."""
    found: dict[str, list[Import]] = {}
    for module, imports in graph.items():
        if _top(module) != "gate_server":
            continue
        room = server_room(module)
        found.setdefault(room, [])
        for i in imports:
            in_server = i.target in graph and _top(i.target) == "gate_server"
            if in_server and server_room(i.target) != room:
                found[room].append(i)
    return found


def test_every_server_module_is_in_a_known_room(graph: dict[str, list[Import]]) -> None:
    rooms = {server_room(m) for m in graph if _top(m) == "gate_server"}
    assert rooms <= set(SERVER_ROOMS), (
        f"rooms of gate_server without a row in SERVER_ROOMS: {sorted(rooms - set(SERVER_ROOMS))}"
        ' (and in docs/layout.md, "The server\'s rooms")'
    )


def test_server_rooms_import_only_what_the_layout_allows(graph: dict[str, list[Import]]) -> None:
    wrong = [
        str(i)
        for room, imports in server_room_imports(graph).items()
        for i in imports
        if server_room(i.target) not in SERVER_ROOMS[room]
        and not (server_room(i.target) == "foundation" and room != "foundation")
    ]
    assert not wrong, "imports between gate_server's rooms against docs/layout.md:\n" + "\n".join(
        wrong
    )


def test_no_import_circle_between_server_rooms(graph: dict[str, list[Import]]) -> None:
    # The table itself draws no circle, and neither do the imports as they are.
    assert _cycles({r: set(t) for r, t in SERVER_ROOMS.items()}) == []
    edges = {
        room: {server_room(i.target) for i in imports}
        for room, imports in server_room_imports(graph).items()
    }
    for targets in list(edges.values()):
        for target in targets:
            edges.setdefault(target, set())
    circles = _cycles(edges)
    lines = sorted(
        str(i)
        for circle in circles
        for i in server_room_imports(graph)[circle[0]]
        if server_room(i.target) in circle
    )
    assert not circles, f"gate_server's rooms that import each other: {circles}\n" + "\n".join(
        lines
    )


def test_the_rooms_picture_matches_the_table() -> None:
    arrows = diagram_arrows((ROOT / "docs" / "layout.md").read_text(), "The server's rooms")
    errors = diagram_errors(arrows, SERVER_ROOMS)
    assert not errors, "docs/layout.md's rooms against SERVER_ROOMS:\n" + "\n".join(errors)


def test_a_room_importing_upward_is_caught(tmp_path: Path) -> None:
    # The domain importing a route: the check names the file and line that made the import.
    path = tmp_path / "probe.py"
    path.write_text("from gate_server.http.answers import Answer\n")
    modules = {"gate_server.domain.probe": path, "gate_server.http.answers": path}
    graph = {m: imports_of(m, path, modules) for m in modules}
    graph["gate_server.http.answers"] = []
    imports = server_room_imports(graph)["domain"]
    assert [server_room(i.target) for i in imports] == ["http"]
    assert "http" not in SERVER_ROOMS["domain"]
    assert server_room("gate_server.settings") == "foundation"
    assert server_room("gate_server.db.runs") == "db"


def test_a_wrong_rooms_picture_is_caught() -> None:
    picture = (ROOT / "docs" / "layout.md").read_text()
    upward = picture.replace("domain     --> db", "domain     --> db, http")
    assert diagram_errors(diagram_arrows(upward, "The server's rooms"), SERVER_ROOMS) == [
        "domain: picture ['db', 'http'], table ['db']",
        "domain --> http: drawn pointing up",
    ]
