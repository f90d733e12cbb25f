"""Size limits over the whole tree: no module passes 450 lines and no function 60.

A file that grows past a screenful of concepts is split by concept; these limits say when. They hold for
every module and function of the packages, with no list of exceptions.
"""

from __future__ import annotations

import ast
import functools

from tests.helpers.paths import ROOT

PACKAGES = ("variants", "experiments", "analysis", "attnlab", "hydra_plugins")
MODULE_LINES = 450
FUNCTION_LINES = 60


def function_sizes(source: str, path: str) -> dict[str, int]:
    """Lines of every function and method in ``source`` (``def`` line to last line), by "path:qualified.name"."""
    sizes: dict[str, int] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert child.end_lineno is not None
                sizes[f"{path}:{prefix}{child.name}"] = child.end_lineno - child.lineno + 1
                walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                walk(child, f"{prefix}{child.name}.")
            else:
                walk(child, prefix)

    walk(ast.parse(source), "")
    return sizes


def tree_sizes() -> tuple[dict[str, int], dict[str, int]]:
    """(module lines by path, function lines by "path:name") over ``PACKAGES``."""
    modules: dict[str, int] = {}
    functions: dict[str, int] = {}
    for package in PACKAGES:
        for file in sorted((ROOT / package).rglob("*.py")):
            path = file.relative_to(ROOT).as_posix()
            source = file.read_text()
            modules[path] = len(source.splitlines())
            functions.update(function_sizes(source, path))
    return modules, functions


@functools.cache
def over_the_limits() -> dict[str, int]:
    modules, functions = tree_sizes()
    over = {path: n for path, n in modules.items() if n > MODULE_LINES}
    over.update({name: n for name, n in functions.items() if n > FUNCTION_LINES})
    return over


def test_function_sizes_count_from_def_to_last_line_and_name_methods_and_nested_functions() -> None:
    source = (
        "class A:\n    def f(self):\n        def g():\n            return 1\n\n        return g\n"
        "\n\ndef h():\n    pass\n"
    )
    # by hand: f spans lines 2-6, g lines 3-4, h lines 9-10
    assert function_sizes(source, "m.py") == {"m.py:A.f": 5, "m.py:A.f.g": 2, "m.py:h": 2}


def test_no_module_or_function_passes_the_limits() -> None:
    over = over_the_limits()
    assert not over, (
        f"over the limits ({MODULE_LINES} lines a module, {FUNCTION_LINES} a function); split by concept: {over}"
    )
