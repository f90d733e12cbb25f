"""No dead code: every public module-level function or class of the package (variants, experiments, analysis,
common) is used by the project itself, not only by the tests (read with ``ast``; nothing is imported).

A name counts as used where project code outside its own definition names it (a call, an attribute, an import),
where a yaml config, the Makefile, CI or pyproject.toml names it (Hydra ``_target_``, entry points), or where a
decorator call registers it (``@TASKS.register(...)``, ``@command(...)``, ``@check(...)``). Methods are left out:
Lightning and Hydra call their hooks by name, which no walk can tell from dead code. A helper only the tests need
lives in tests/helpers/.
"""

from __future__ import annotations

import ast
import re

from tests.helpers.paths import ROOT

LAYERS = ("variants", "experiments", "analysis", "attnlab", "hydra_plugins")
CHECKED = ("variants", "experiments", "analysis", "attnlab")
CONFIG_FILES = ("conf/**/*.yaml", "Makefile", ".ci/*", "pyproject.toml")
# Public on purpose though no project code calls them, with the reason.
ALLOWED = {
    "analysis/data/collect.py:collect_wandb_offline": "library API: runs read from W&B offline folders "
    "(ARCHITECTURE.md: collect reads result.json and W&B runs)",
    "analysis/data/collect.py:collect_wandb_api": "library API: runs read from the W&B server (needs a login)",
    "attnlab/bibliography.py:declare": "plugin API: an outside variant adds its paper (docs/architecture.md)",
}


def referenced(tree: ast.Module) -> set[str]:
    """The names a module's code refers to, a definition's own name left out of its own body (recursion)."""
    found: set[str] = set()
    for statement in tree.body:
        names = set()
        for node in ast.walk(statement):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.alias):
                names.add(node.name.rpartition(".")[2])
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.discard(statement.name)
        found |= names
    return found


def public_definitions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]:
    """Module-level public functions and classes that no decorator call registers."""
    return [
        d
        for d in tree.body
        if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        and not d.name.startswith("_")
        and not any(isinstance(x, ast.Call) for x in d.decorator_list)
    ]


def unreferenced() -> list[str]:
    trees = {
        p.relative_to(ROOT).as_posix(): ast.parse(p.read_text(encoding="utf-8"), str(p))
        for layer in LAYERS
        for p in sorted((ROOT / layer).rglob("*.py"))
    }
    used = set().union(*(referenced(t) for t in trees.values()))
    for pattern in CONFIG_FILES:
        for path in ROOT.glob(pattern):
            if path.is_file():
                used |= set(re.findall(r"\w+", path.read_text(encoding="utf-8")))
    return [
        f"{path}:{d.name}"
        for path, tree in trees.items()
        if path.split("/")[0] in CHECKED
        for d in public_definitions(tree)
        if d.name not in used
    ]


def test_every_public_function_is_used_by_the_project():
    dead = [name for name in unreferenced() if name not in ALLOWED]
    assert not dead, (
        "defined but used by nothing outside tests (remove it, or move a test-only helper into "
        "tests/helpers/): " + ", ".join(dead)
    )


def test_the_allowlist_names_only_what_would_fail_without_it():
    assert sorted(set(ALLOWED) - set(unreferenced())) == []  # an entry since used or removed is stale
