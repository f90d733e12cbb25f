"""analysis/ stays in rooms a reader can hold: every module at most MAX_MODULE_LINES lines, every function (nested
ones too) at most MAX_FUNCTION_LINES, counted with ``ast`` from its ``def`` to its last line (nothing is imported).

The limits are an alarm, not the rule: a module that passes one is split by concept, not cut at a line count, and
a long function becomes named steps.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers.paths import ROOT

MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 80


def too_long(root: Path) -> tuple[list[str], list[str]]:
    """(modules over MAX_MODULE_LINES, functions over MAX_FUNCTION_LINES) under ``root``, as 'path: n' strings."""
    modules, functions = [], []
    for path in sorted(root.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        name = path.relative_to(root.parent).as_posix()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            modules.append(f"{name}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text, name)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    functions.append(f"{name}:{node.name}: {length} lines")
    return modules, functions


def test_every_analysis_module_and_function_is_short():
    modules, functions = too_long(ROOT / "analysis")
    assert not modules, f"split by concept (over {MAX_MODULE_LINES} lines): " + "; ".join(modules)
    assert not functions, f"break into named steps (over {MAX_FUNCTION_LINES} lines): " + "; ".join(functions)


def test_the_counter_finds_a_planted_long_module_and_function(tmp_path):
    # counted by hand: a def line and MAX_FUNCTION_LINES body lines (one over), blank lines up to one line past the
    # module limit; beside it a function and a module exactly at the limits, which pass
    lines = [f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES)]
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "big.py").write_text("def long():\n" + "".join(lines) + "\n" * (MAX_MODULE_LINES - MAX_FUNCTION_LINES))
    (root / "edge.py").write_text(
        "def edge():\n" + "".join(lines[:-1]) + "\n" * (MAX_MODULE_LINES - MAX_FUNCTION_LINES)
    )
    modules, functions = too_long(root)
    assert modules == [f"pkg/big.py: {MAX_MODULE_LINES + 1} lines"]
    assert functions == [f"pkg/big.py:long: {MAX_FUNCTION_LINES + 1} lines"]
