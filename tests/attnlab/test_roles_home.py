"""The attention roles have one home, ``attnlab/roles.py``: its names are the model schema's per-role fields, its
``built`` agrees with the parts a Transformer of each architecture actually builds, and no other module spells the
three names again."""

from __future__ import annotations

import ast
import dataclasses

import pytest

from attnlab.roles import ROLES, built
from experiments.config.schema import ModelConf, ModelOptions
from experiments.model.transformer import ModelSpec, Transformer, VariantSpec
from tests.helpers.paths import ROOT

ARCHS = ("seq2seq", "decoder", "encoder")


def test_the_roles_are_the_schemas_per_role_fields():
    own = {f.name for f in dataclasses.fields(ModelConf)} - {f.name for f in dataclasses.fields(ModelOptions)}
    assert set(ROLES) == {name for name in own if name.endswith("_attention")}


@pytest.mark.parametrize("arch", ARCHS)
def test_built_agrees_with_the_parts_a_model_builds(arch):
    spec = ModelSpec(
        arch=arch,
        vocab_size=11,
        attention=VariantSpec("soft", {"num_heads": 2}),
        position=VariantSpec("sinusoidal"),
        d_model=8,
        ffn_dim=16,
        encoder_layers=1,
        decoder_layers=1,
        dropout=0.0,
        **({"num_classes": 2} if arch == "encoder" else {}),
    )
    unused = Transformer(spec).unused_settings()  # the model's own account of what it did not build
    assert {role: built(role, arch) for role in ROLES} == {role: role not in unused for role in ROLES}


def test_an_unknown_role_is_one_line_naming_the_allowed_ones():
    with pytest.raises(ValueError, match=r"role='self' is not allowed; choose one of \['encoder_attention'"):
        built("self", "seq2seq")


def test_no_other_module_spells_the_three_roles():
    spelled = []
    for layer in ("attnlab", "experiments", "analysis", "variants"):
        for path in sorted((ROOT / layer).rglob("*.py")):
            if path == ROOT / "attnlab" / "roles.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                    words = {e.value for e in node.elts if isinstance(e, ast.Constant)}
                    if set(ROLES) <= words:
                        spelled.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not spelled, f"the roles are spelled again (import attnlab.roles.ROLES instead): {spelled}"
