"""The one plugin registry (attnlab/registry.py): loud errors, declared fields, discovery by scanning a package."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from attnlab.registry import Registry, RegistryError, import_modules, kinds, registry


@dataclass(frozen=True)
class RuleFields:
    estimand: str
    metrics: tuple[str, ...] = ()


def one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message, message
    return message


def write_package(root: Path, name: str, modules: dict[str, str]) -> None:
    """A package ``name`` under ``root`` holding ``modules`` (module name -> source)."""
    folder = root / name
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    for module, source in modules.items():
        (folder / f"{module}.py").write_text(textwrap.dedent(source))


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("plug_")]:
        del sys.modules[name]


def test_a_duplicate_names_the_kind_the_key_and_both_modules():
    rules: Registry[object] = Registry("rule", RuleFields)
    rules.register("welch", estimand="mean")(dict)  # dict.__module__ == "builtins"

    def again():
        return None

    with pytest.raises(RegistryError) as error:
        rules.register("welch", estimand="mean")(again)
    message = one_line(error)
    assert "rule='welch'" in message and "builtins" in message and __name__ in message
    assert rules.get("welch") is dict  # the first entry is kept


def test_an_unknown_key_lists_the_sorted_names_and_the_nearest():
    rules: Registry[object] = Registry("rule", RuleFields)
    for name in ("welch", "mann_whitney", "aso"):
        rules.register(name, estimand="mean")(dict)
    with pytest.raises(RegistryError) as error:
        rules.get("welsh")
    assert one_line(error) == (
        "rule='welsh' is unknown; choose one of ['aso', 'mann_whitney', 'welch']; did you mean 'welch'?"
    )
    assert rules.names() == ["aso", "mann_whitney", "welch"] and "aso" in rules and len(rules) == 3


def test_an_entry_declares_exactly_its_kinds_fields():
    rules: Registry[object] = Registry("rule", RuleFields)
    with pytest.raises(RegistryError) as missing:
        rules.register("welch")
    assert "missing field(s) ['estimand']" in one_line(missing) and "['estimand', 'metrics']" in str(missing.value)
    with pytest.raises(RegistryError) as unknown:
        rules.register("welch", estimand="mean", alpha=0.05)
    assert "unknown field(s) ['alpha']" in one_line(unknown)
    rules.register("median_test", estimand="median", metrics=("val/loss",))(dict)
    assert rules.declared("median_test") == RuleFields("median", ("val/loss",))
    assert rules.entry("median_test").module == "builtins"


def test_entries_are_found_by_scanning_their_package(on_path):
    write_package(
        on_path,
        "plug_rules",
        {
            "registry": """
                from attnlab.registry import Registry
                RULES = Registry("rule", package="plug_rules")
            """,
            "first": """
                from plug_rules.registry import RULES
                RULES.register("first")(len)
            """,
            "second": """
                from plug_rules.registry import RULES
                @RULES.register("second")
                def second(): ...
            """,
            "_private": "raise AssertionError('a module starting with _ is not a plugin')",
        },
    )
    from plug_rules.registry import RULES  # only the registry module: the entries come in when asked for

    assert "plug_rules.first" not in sys.modules
    assert RULES.names() == ["first", "second"]
    assert RULES.entry("second").module == "plug_rules.second"
    # a module dropped in later is found by the next scan, with no import list edited
    (on_path / "plug_rules" / "third.py").write_text(
        "from plug_rules.registry import RULES\nRULES.register('third')(abs)\n"
    )
    assert sorted(import_modules("plug_rules")) == [
        "plug_rules.first",
        "plug_rules.registry",
        "plug_rules.second",
        "plug_rules.third",
    ]
    assert RULES.get("third") is abs


@pytest.mark.slow  # imports every plugin of every kind (torch, Lightning, pandas)
def test_every_kind_has_a_registry_of_that_kind():
    assert {"attention", "position"} <= set(kinds())
    for kind in kinds():
        found = registry(kind)
        assert found.kind == kind and len(found.names()) >= 1
    with pytest.raises(RegistryError) as error:
        registry("atention")
    assert "plugin kind='atention' is unknown" in one_line(error) and "did you mean 'attention'?" in str(error.value)


def test_importing_the_registry_costs_the_standard_library_only():
    code = "import sys, attnlab.registry; print(sorted(m.split('.')[0] for m in sys.modules))"
    loaded = set(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("'")
    )
    assert not {"torch", "numpy", "pandas", "variants", "experiments", "analysis", "omegaconf"} & loaded
