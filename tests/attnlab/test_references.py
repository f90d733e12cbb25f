"""One home for the papers: every registry entry names its references by key, every key resolves to one entry of
``attnlab/bibliography.py``, and no BibTeX entry is written anywhere else (read with ``ast``, nothing imported)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from attnlab import bibliography
from attnlab.bibliography import BIBLIOGRAPHY
from experiments.record.result import variant_references
from tests.helpers.paths import ROOT
from tests.helpers.registries import REGISTRIES
from variants import ATTENTION, RegistryError

HOME = ROOT / "attnlab" / "bibliography.py"
# A BibTeX entry's head as a BibTeX reader sees it: "@type{key," (white space allowed around the parts).
HEAD = re.compile(r"\s*@\s*(\w+)\s*\{\s*([^,\s{}]+)\s*,")


def written_entries() -> list[tuple[str, Path, int]]:
    """(key, file, line) of every string constant in the repository's Python files that opens a BibTeX entry."""
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        if {".venv", "node_modules", ".git"} & set(path.relative_to(ROOT).parts):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and (head := HEAD.match(node.value)):
                found.append((head.group(2), path.relative_to(ROOT), node.lineno))
    return found


@pytest.mark.parametrize("kind,name", [(k, n) for k, r in REGISTRIES.items() for n in r.names()])
def test_every_registered_entry_cites_keys_of_the_bibliography(kind: str, name: str) -> None:
    keys = REGISTRIES[kind].references(name)
    assert keys, f"{kind}={name} declares no reference"
    unknown = [k for k in keys if k not in BIBLIOGRAPHY]
    assert not unknown, f"{kind}={name} cites {unknown}, not in attnlab/bibliography.py"
    database = pytest.importorskip("pybtex.database")
    parsed = database.parse_string("\n\n".join(BIBLIOGRAPHY[k] for k in keys), "bibtex").entries
    assert list(parsed) == list(keys)  # each key names the entry that holds it (pybtex reads the key itself)
    for entry in parsed.values():
        assert entry.fields.get("title") and entry.fields.get("year") and entry.persons.get("author")


def test_no_bibtex_key_is_written_twice_and_every_entry_lives_in_the_bibliography() -> None:
    found = written_entries()
    by_key: dict[str, list[str]] = {}
    for key, path, line in found:
        by_key.setdefault(key, []).append(f"{path}:{line}")
    assert {k: v for k, v in by_key.items() if len(v) > 1} == {}
    layers = ("variants", "experiments", "analysis", "attnlab", "hydra_plugins")
    elsewhere = [
        f"{key} at {path}:{line}" for key, path, line in found if path.parts[0] in layers and ROOT / path != HOME
    ]
    assert not elsewhere, "BibTeX entries belong in attnlab/bibliography.py: " + "; ".join(elsewhere)
    # the walk sees the bibliography itself: every key of it, once
    assert sorted(k for k, p, _ in found if ROOT / p == HOME) == sorted(BIBLIOGRAPHY)


def test_a_bibtex_entry_given_as_a_reference_is_a_one_line_error() -> None:
    with pytest.raises(RegistryError) as info:
        ATTENTION.register("pasted", references="@misc{doe2099,\n title = {X}}")
    message = str(info.value)
    assert "\n" not in message and "attention='pasted'" in message and "attnlab/bibliography.py" in message
    assert "pasted" not in ATTENTION


def test_an_unknown_key_stops_the_run_naming_the_variant_and_the_nearest_key() -> None:
    ATTENTION.register("misspelt", references="vaswani2017atention")(ATTENTION.get("soft"))
    try:
        with pytest.raises(ValueError) as info:
            variant_references({"attention": ["misspelt"], "position": [], "task": []})
    finally:
        ATTENTION.unregister("misspelt")
    message = str(info.value)
    assert "\n" not in message and "attention=misspelt" in message and "'vaswani2017atention'" in message
    assert "did you mean 'vaswani2017attention'" in message


def test_declare_adds_a_plugins_entry_once_and_refuses_another_text_under_a_known_key(monkeypatch) -> None:
    monkeypatch.setattr(bibliography, "BIBLIOGRAPHY", dict(BIBLIOGRAPHY))
    entry = "@misc{doe2099plugin,\n  author = {Doe, Jane},\n  title = {A Plugin},\n  year = {2099}\n}"
    assert bibliography.declare(entry) == bibliography.declare(entry) == "doe2099plugin"
    assert bibliography.lookup(["doe2099plugin", "holm1979simple"], "test") == [entry, BIBLIOGRAPHY["holm1979simple"]]
    other = "@article{" + "holm1979simple" + ",\n  title = {Another},\n  year = {1979}\n}"  # built, not written
    with pytest.raises(ValueError, match="'holm1979simple' is already in attnlab/bibliography.py"):
        bibliography.declare(other)
