"""The package's imports, read with ``ast`` (nothing is imported): they run one way and in no circle.

Layers (ARCHITECTURE.md): ``variants`` is pure PyTorch and imports no other layer but
``attnlab`` (the shared core: standard library only, e.g. the one ``Registry``); ``experiments`` trains and may
import ``variants`` and ``attnlab``; ``analysis`` reads files (result.json, W&B runs) and may import only ``attnlab``;
``attnlab`` holds what two layers share (the result.json key spelling, the claim schema) and imports nothing of
the project and nothing outside the standard library. Every import counts, a deferred one inside a function too:
it is the same dependency, only later.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import ROOT

LAYERS = ("variants", "experiments", "analysis", "attnlab")
ALLOWED = {
    "variants": {"variants", "attnlab"},
    "experiments": {"experiments", "variants", "attnlab"},
    "analysis": {"analysis", "attnlab"},
    "attnlab": {"attnlab"},
}
# Thin modules that keep a public import working (docs/sweeps.md: ``from analysis.collect import collect``).
TOP_LEVEL_MODULES = {"analysis/__init__.py", "analysis/collect.py"}


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for layer in LAYERS for p in sorted((ROOT / layer).rglob("*.py"))}


def import_nodes(tree: ast.AST, lazy_counts: bool) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: not those under ``if TYPE_CHECKING:``; with ``lazy_counts`` False, not
    those inside a function either (a package's __init__ runs whenever a module below it is imported, and what
    runs then is its body; an import in a function there, a lazy export, runs only when the name is asked for)."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            children = node.orelse
        elif not lazy_counts and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            children = []
        else:
            children = list(ast.iter_child_nodes(node))
        for child in children:
            visit(child)

    visit(tree)
    return found


def imported(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """The project modules ``path`` imports (``from a.b import c`` is a.b.c when c is a module, else a.b)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in import_nodes(ast.parse(path.read_text(), str(path)), lazy_counts=path.name != "__init__.py"):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        found |= {t for t in targets if t.split(".")[0] in LAYERS or t in known}
    return found


def graph() -> dict[str, set[str]]:
    """Module -> the modules it imports, with the packages whose ``__init__`` an import runs on the way."""
    known = modules()
    edges: dict[str, set[str]] = {}
    for name, path in known.items():
        own = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 2)}
        targets = set()
        for target in imported(path, name, known):
            parts = target.split(".")
            # importing a.b.c runs a/__init__ and a/b/__init__ first (those above the importer's own are already run)
            targets |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)} - own
        edges[name] = {t for t in targets if t in known and t != name}
    return edges


def circles(edges: dict[str, set[str]], within: str) -> list[list[str]]:
    """The strongly connected components of more than one module among ``within``'s modules (Tarjan)."""
    nodes = [n for n in edges if n.split(".")[0] == within]
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(n: str) -> None:
        index[n] = low[n] = len(index)
        stack.append(n)
        for m in edges[n]:
            if m.split(".")[0] != within:
                continue
            if m not in index:
                visit(m)
                low[n] = min(low[n], low[m])
            elif m in stack:
                low[n] = min(low[n], index[m])
        if low[n] == index[n]:
            component = []
            while True:
                m = stack.pop()
                component.append(m)
                if m == n:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for n in nodes:
        if n not in index:
            visit(n)
    return found


def depth(edges: dict[str, set[str]], within: str) -> int:
    """The longest chain of imports among ``within``'s modules (1: a module that imports none of them)."""
    memo: dict[str, int] = {}

    def longest(n: str, seen: frozenset) -> int:
        if n not in memo:
            below = [longest(m, seen | {n}) for m in edges[n] if m.split(".")[0] == within and m not in seen]
            memo[n] = 1 + max(below, default=0)
        return memo[n]

    return max((longest(n, frozenset()) for n in edges if n.split(".")[0] == within), default=0)


@pytest.mark.parametrize("layer", LAYERS)
def test_imports_run_one_way(layer):
    edges = graph()
    wrong = sorted(
        f"{n} imports {m}"
        for n, targets in edges.items()
        if n.split(".")[0] == layer
        for m in targets
        if m.split(".")[0] not in ALLOWED[layer]
    )
    assert not wrong, f"{layer} may import only {sorted(ALLOWED[layer])}: " + "; ".join(wrong)


def test_common_needs_only_the_standard_library():
    outside = []
    for path in sorted((ROOT / "attnlab").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            outside += [
                f"{path.name}: {n}"
                for n in names
                if n.split(".")[0] not in sys.stdlib_module_names and n.split(".")[0] not in {"attnlab", "__future__"}
            ]
    assert not outside, outside


@pytest.mark.parametrize("layer", LAYERS)
def test_no_import_circle(layer):
    found = circles(graph(), layer)
    assert not found, "import circles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_circle_finder_finds_a_planted_circle():
    edges = {
        "analysis.a": {"analysis.b"},
        "analysis.b": {"analysis.c"},
        "analysis.c": {"analysis.a"},
        "analysis.d": {"analysis.a"},
    }
    assert circles(edges, "analysis") == [["analysis.a", "analysis.b", "analysis.c"]]
    assert depth({"analysis.a": {"analysis.b"}, "analysis.b": set()}, "analysis") == 2


def test_an_eager_package_init_that_closes_a_circle_is_found():
    # analysis.x.m imports analysis.y.n; running analysis.y's __init__ first, which imports analysis.y.k, which
    # imports analysis.x.m: a circle that no single import line shows.
    edges = {
        "analysis.x.m": {"analysis.y", "analysis.y.n"},
        "analysis.y": {"analysis.y.k"},
        "analysis.y.k": {"analysis.x.m", "analysis.x"},
        "analysis.y.n": set(),
        "analysis.x": set(),
    }
    assert circles(edges, "analysis") == [["analysis.x.m", "analysis.y", "analysis.y.k"]]


def test_every_analysis_module_sits_in_a_sub_package():
    loose = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "analysis").glob("*.py"))
    assert set(loose) <= TOP_LEVEL_MODULES, f"modules outside a sub-package: {set(loose) - TOP_LEVEL_MODULES}"
    for package in sorted(p for p in (ROOT / "analysis").iterdir() if p.is_dir() and p.name != "__pycache__"):
        init = package / "__init__.py"
        assert init.exists(), f"{package.relative_to(ROOT)} has no __init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc, f"{init.relative_to(ROOT)} does not say what the package holds"
        # the report's rooms (tests/analysis/report/test_report_rooms.py), one level below it
        if package.name == "report":
            for room in sorted(p for p in package.iterdir() if p.is_dir() and p.name != "__pycache__"):
                assert ast.get_docstring(ast.parse((room / "__init__.py").read_text())), f"{room} says nothing"
                assert not list(room.glob("*/*.py")), f"{room.relative_to(ROOT)} nests packages; keep one level"
            continue
        assert not list(package.glob("*/*.py")), f"{package.relative_to(ROOT)} nests packages; keep one level"


def test_the_public_entry_points_still_import():
    from analysis.collect import collect
    from analysis.report import build_report, main
    from experiments.record.result import flatten

    assert callable(collect) and callable(build_report) and callable(main) and callable(flatten)
    for command in ("report", "claims"):  # python -m analysis.report, python -m analysis.claims
        assert (ROOT / "analysis" / command / "__main__.py").exists()


# experiments/'s sub-packages, highest first: each imports only those after it. The command modules at its top
# (python -m experiments.train, .evaluate, .gpu_check, .flex_check, .device_check) and its __init__ stand above
# them all.
ROOMS = ("diagnostics", "bench", "app", "sweep", "ensemble", "training", "record", "model", "config", "tasks")


def room_of(module: str, layer: str = "experiments", rooms: tuple[str, ...] = ROOMS) -> str | None:
    """The sub-package of ``layer`` a module lives in; None for the layer's own top-level modules."""
    parts = module.split(".")
    return parts[1] if parts[0] == layer and len(parts) > 1 and parts[1] in rooms else None


def back_imports(edges: dict[str, set[str]], layer: str = "experiments", rooms: tuple[str, ...] = ROOMS) -> set[str]:
    """Imports from a sub-package of ``layer`` to one listed above it in ``rooms``."""
    found = set()
    for n, targets in edges.items():
        source = room_of(n, layer, rooms)
        for m in targets:
            # a package's __init__ (a room's or a sub-room's) runs on the way: its docstring, or lazy exports
            package = (ROOT / m.replace(".", "/") / "__init__.py").exists()
            target = room_of(m, layer, rooms) if m.count(".") > 1 and not package else None
            if source in rooms and target in rooms and rooms.index(target) < rooms.index(source):
                found.add(f"{n} -> {m}")
    return found


def test_every_experiments_module_lives_in_a_room():
    loose = sorted(n for n in modules() if n.startswith("experiments.") and room_of(n) is None)
    commands = sorted(
        f"experiments.{name}" for name in ("device_check", "evaluate", "flex_check", "gpu_check", "train")
    )
    assert loose == commands, "experiments/ holds its commands only at its top; the rest lives in " + ", ".join(ROOMS)


def test_a_planted_back_import_is_found():
    edges = {
        "experiments.config.checks": {"experiments.training.build"},
        "experiments.app.train": {"experiments.config.schema"},
    }
    assert back_imports(edges) == {"experiments.config.checks -> experiments.training.build"}


# analysis/'s sub-packages, highest first: the report assembles the paper files and the claims; claims and stats
# decide; data reads the files; command holds what every command shares. analysis/collect.py (a public import) and
# analysis/report's lazy exports stand above them all.
ANALYSIS_ROOMS = ("dashboards", "report", "paper", "claims", "stats", "data", "command")
# The imports that still run back up; the list may only shrink. Claims render into the report's document model
# (report/document/model.py); the paper's LaTeX summary reads the report's ranking rows (by_key).
ANALYSIS_BACK_IMPORTS = frozenset(
    {
        "analysis.claims.adaptive -> analysis.report.document.model",
        "analysis.claims.evaluate -> analysis.report.document.model",
        "analysis.claims.render -> analysis.report.document.model",
        "analysis.paper.latex -> analysis.report.plan.summary",
        "analysis.stats.simulate -> analysis.claims.evaluate",  # the simulation runs the fixed-n engine as it is
    }
)


def test_every_analysis_sub_package_has_a_place_in_the_order():
    packages = {p.name for p in (ROOT / "analysis").iterdir() if (p / "__init__.py").exists()}
    assert packages == set(ANALYSIS_ROOMS), f"analysis/ sub-packages {sorted(packages)} vs ANALYSIS_ROOMS"


@pytest.mark.parametrize(
    "layer,rooms,allowed,allowed_name",
    [
        ("experiments", ROOMS, frozenset(), "no exceptions: experiments/ has none"),
        ("analysis", ANALYSIS_ROOMS, ANALYSIS_BACK_IMPORTS, "ANALYSIS_BACK_IMPORTS"),
    ],
)
def test_rooms_import_one_way(layer: str, rooms: tuple[str, ...], allowed: frozenset, allowed_name: str) -> None:
    found = back_imports(graph(), layer, rooms)
    new = sorted(found - allowed)
    stale = sorted(allowed - found)
    assert not new, "imports up the room order " + " > ".join(rooms) + ": " + "; ".join(new)
    assert not stale, f"no longer imported, drop from {allowed_name}: " + "; ".join(stale)


def test_a_planted_analysis_back_import_is_found():
    edges = {
        "analysis.data.runs": {"analysis.stats.inference", "analysis.data.cells"},
        "analysis.report.build": {"analysis.data.runs", "analysis.report"},
        "analysis.collect": {"analysis.report.build"},
    }
    assert back_imports(edges, "analysis", ANALYSIS_ROOMS) == {"analysis.data.runs -> analysis.stats.inference"}
