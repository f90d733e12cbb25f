"""The tests' layout, read with ``ast`` (nothing is imported): every test file sits in a folder that mirrors a
package or room of the project, or in tests/docs/ (the README and docs/) or tests/project/ (whole-tree checks);
every folder is a package, so two test files of one name cannot clash; and no function or dict is defined with
the same body in two files under tests/: what test files share has one home, tests/helpers/."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests.helpers.paths import ROOT, TESTS

# folders of tests/ that mirror no package yet hold tests: docs/ pages, whole-tree checks, and the SLURM cluster
# tests (make test-cluster runs that folder alone, with its own conftest); tests/helpers/ holds no tests
OWN_FOLDERS = ("docs", "project", "cluster")


def misplaced(tests: Path, root: Path) -> list[str]:
    """Test files of ``tests`` in a folder that mirrors no package or room of ``root`` (a folder of ``root``
    holding Python modules) and is none of ``OWN_FOLDERS``; a test file at the top of ``tests`` mirrors nothing."""
    out = []
    for path in sorted(tests.rglob("test_*.py")):
        folder = path.parent.relative_to(tests)
        top = folder.parts[0] if folder.parts else None
        if top in OWN_FOLDERS or (top not in (None, "helpers") and any((root / folder).rglob("*.py"))):
            continue
        out.append(path.relative_to(tests.parent).as_posix())
    return out


def without_init(tests: Path) -> list[str]:
    """Folders of ``tests`` holding Python files but no ``__init__.py`` (tests/cluster/ runs alone)."""
    folders = {p.parent for p in tests.rglob("*.py") if "__pycache__" not in p.parts}
    return sorted(
        f.relative_to(tests.parent).as_posix()
        for f in folders
        if not (f / "__init__.py").is_file() and f.relative_to(tests).parts[:1] != ("cluster",)
    )


def _is_dict(value: ast.expr) -> bool:
    if isinstance(value, (ast.Dict, ast.DictComp)):
        return True
    if isinstance(value, ast.Call):
        return isinstance(value.func, ast.Name) and value.func.id == "dict"
    return (
        isinstance(value, ast.BinOp)
        and isinstance(value.op, ast.BitOr)
        and (_is_dict(value.left) or _is_dict(value.right))
    )


def definitions(source: str) -> dict[str, str]:
    """{name: body} of a module's top-level functions (arguments and statements, the docstring and decorators
    left out: a copy with a new docstring is still a copy) and dicts (the value)."""
    found = {}
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            found[node.name] = ast.dump(node.args) + ast.dump(ast.Module(body=body, type_ignores=[]))
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if _is_dict(node.value):
                found[node.targets[0].id] = ast.dump(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            if _is_dict(node.value):
                found[node.target.id] = ast.dump(node.value)
    return found


def defined_twice(tests: Path) -> list[str]:
    """``name: file, file, ...`` for each function or dict that two or more files of ``tests`` define alike."""
    where: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(tests.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        for name, body in definitions(path.read_text(encoding="utf-8")).items():
            where[name, body].append(path.relative_to(tests.parent).as_posix())
    return sorted(f"{name}: {', '.join(files)}" for (name, _), files in where.items() if len(files) > 1)


def test_every_test_file_sits_in_a_folder_that_mirrors_a_package_or_room() -> None:
    wrong = misplaced(TESTS, ROOT)
    assert not wrong, (
        f"{wrong}: a test file goes into the folder of what it tests (tests/experiments/sweep/ for "
        f"experiments/sweep/), or into one of tests/{{docs,project}}/"
    )


def test_every_folder_of_the_tests_is_a_package() -> None:
    assert without_init(TESTS) == [], "add an __init__.py: pytest imports the tests package-style (tests.x.test_y)"


def test_no_function_or_dict_is_defined_alike_in_two_test_files() -> None:
    twins = defined_twice(TESTS)
    assert not twins, f"defined alike in two files; give it one home in tests/helpers/: {twins}"


def write(path: Path, text: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_planted_misplaced_file_and_a_folder_without_init_are_named(tmp_path: Path) -> None:
    write(tmp_path / "analysis" / "report" / "__init__.py")
    write(tmp_path / "hydra_plugins" / "launcher" / "__init__.py")  # a namespace package at the top
    tests = tmp_path / "tests"
    for placed in ("analysis/report", "hydra_plugins", "docs", "project"):
        write(tests / placed / "test_ok.py")
        write(tests / placed / "__init__.py")
    write(tests / "__init__.py")
    write(tests / "analysis" / "__init__.py")
    write(tests / "test_top.py")  # at the top: mirrors nothing
    write(tests / "analysis" / "plots" / "test_plot.py")  # analysis/plots/ does not exist
    write(tests / "helpers" / "test_helper.py")  # a helper folder holds no tests
    write(tests / "helpers" / "__init__.py")
    write(tests / "cluster" / "test_slurm.py")  # runs alone: no __init__.py asked of it
    assert misplaced(tests, tmp_path) == [
        "tests/analysis/plots/test_plot.py",
        "tests/helpers/test_helper.py",
        "tests/test_top.py",
    ]
    assert without_init(tests) == ["tests/analysis/plots"]


def test_planted_twins_are_named_and_near_twins_are_not(tmp_path: Path) -> None:
    env = 'ENV = {**os.environ, "WANDB_MODE": "offline"}\n'
    cli = 'def cli(*args):\n    """{}"""\n    return run(["python", *args], env=ENV)\n'
    write(tmp_path / "tests" / "a" / "test_a.py", env + cli.format("one docstring") + "SEEDS = [0, 1]\n")
    write(tmp_path / "tests" / "b" / "test_b.py", env + cli.format("another") + "SEEDS = [0, 1]\n")
    # the same name with another body, and the same body under another name: not twins
    write(
        tmp_path / "tests" / "c" / "test_c.py",
        'ENV = {**os.environ, "WANDB_MODE": "disabled"}\n'
        'def start(*args):\n    return run(["python", *args], env=ENV)\n'
        'OPTIONS = dict(window=2) | {"block": 3}\n',
    )
    write(tmp_path / "tests" / "helpers" / "options.py", 'OPTIONS = dict(window=2) | {"block": 3}\n')
    assert defined_twice(tmp_path / "tests") == [
        "ENV: tests/a/test_a.py, tests/b/test_b.py",
        "OPTIONS: tests/c/test_c.py, tests/helpers/options.py",
        "cli: tests/a/test_a.py, tests/b/test_b.py",
    ]
