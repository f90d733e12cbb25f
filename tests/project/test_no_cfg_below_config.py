"""The composed config stops at experiments/config/ and experiments/app/: below them, functions take the run
spec (experiments/config/spec.py) or plain values, never the ``DictConfig``. Read with ``ast``: nothing is
imported."""

from __future__ import annotations

import ast

import pytest

from tests.helpers.paths import ROOT

LAYERS = ("experiments", "attnlab", "analysis")
# where the composed config may still be read: the command line and the config's own reading of it
ABOVE = ("experiments/config/", "experiments/app/")
CONFIG_TYPES = ("DictConfig", "ListConfig", "omegaconf")
# Functions that still take the composed config, "path:qualified.name"; the list may only shrink (a stale
# entry fails below).
STILL_TAKING_CFG = frozenset(
    {
        "experiments/record/files.py:save_hydra_config_atomically.save",  # Hydra's own hook, as Hydra calls it
        # the sweep's Hydra callback, as Hydra calls it with the sweep's whole config (the hydra node included)
        "experiments/sweep/grid.py:SweepSummary.on_multirun_end",
        "experiments/sweep/grid.py:SweepSummary.on_multirun_start",
    }
)


def takes_the_config(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The parameters of ``function`` named ``cfg`` or annotated with an OmegaConf type."""
    arguments = function.args
    every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
    found = []
    for arg in every:
        if arg is None:
            continue
        annotation = ast.unparse(arg.annotation) if arg.annotation is not None else ""
        if arg.arg == "cfg" or any(t in annotation for t in CONFIG_TYPES):
            found.append(arg.arg)
    return found


def offenders(source: str, path: str) -> dict[str, list[str]]:
    """``path:qualified.name`` -> its parameters that take the composed config, for every function in ``source``."""
    found: dict[str, list[str]] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                params = takes_the_config(child)
                if params:
                    found[f"{path}:{name}"] = params
                visit(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source, path), "")
    return found


def below_config() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for layer in LAYERS:
        for file in sorted((ROOT / layer).rglob("*.py")):
            path = file.relative_to(ROOT).as_posix()
            if not path.startswith(ABOVE):
                found.update(offenders(file.read_text(), path))
    return found


def test_no_function_below_config_and_app_takes_the_composed_config() -> None:
    found = below_config()
    new = sorted(f"{name}({', '.join(params)})" for name, params in found.items() if name not in STILL_TAKING_CFG)
    stale = sorted(STILL_TAKING_CFG - set(found))
    assert not new, "take the run spec (experiments.config.spec) or plain values instead: " + "; ".join(new)
    assert not stale, "no longer takes the config, drop from STILL_TAKING_CFG: " + "; ".join(stale)


@pytest.mark.parametrize(
    "source, expected",
    [
        ("def build(cfg, run_dir):\n    pass\n", {"m.py:build": ["cfg"]}),
        ("class Part:\n    def make(self, node: 'DictConfig') -> None:\n        pass\n", {"m.py:Part.make": ["node"]}),
        ("def outer():\n    def inner(*, c: omegaconf.DictConfig):\n        pass\n", {"m.py:outer.inner": ["c"]}),
        ("def fine(spec: Spec, run_dir: Path) -> None:\n    cfg = 1\n", {}),
    ],
)
def test_a_planted_function_that_takes_the_config_is_found(source: str, expected: dict[str, list[str]]) -> None:
    assert offenders(source, "m.py") == expected
