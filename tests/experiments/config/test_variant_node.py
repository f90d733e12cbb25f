"""A variant's config node is read in one place (experiments/config/variant_node.py), whatever its form, and
checking a command line's variants never imports Lightning."""

from __future__ import annotations

import subprocess
import sys

import pytest
from omegaconf import OmegaConf

from experiments.config.roles import expand_roles, role_variants
from experiments.config.variant_node import variant_node
from experiments.model.transformer import VariantSpec
from tests.helpers.config import compose
from tests.helpers.paths import ROOT

# Each form a config gives a variant in, and the plain node it stands for (written out by hand).
ROOT_CONFIG = OmegaConf.create({"width": 4, "attention": {"name": "local", "window": "${width}", "mode": "hard"}})
FORMS = [
    ("hard", {"name": "hard"}),
    ({"name": "local", "window": 4}, {"name": "local", "window": 4}),
    (ROOT_CONFIG.attention, {"name": "local", "window": 4, "mode": "hard"}),  # the interpolation resolved
]


@pytest.mark.parametrize("node, expected", FORMS, ids=["name", "mapping", "dictconfig"])
def test_every_form_of_a_node_reads_as_its_plain_node(node, expected) -> None:
    got = variant_node(node)
    assert got == expected and type(got) is dict
    got.pop("name")  # a copy: the caller may take it apart
    assert variant_node(node) == expected
    spec = VariantSpec.of(node)  # the model's spec reads the same node
    assert (spec.name, spec.params) == (expected["name"], {k: v for k, v in expected.items() if k != "name"})
    assert variant_node(None) is None


def test_the_roles_and_the_model_read_a_composed_role_alike() -> None:
    cfg = expand_roles(compose(["attention@model.cross_attention=local", "model.cross_attention.window=3"]))
    node = role_variants(cfg)["cross_attention"]
    assert node["name"] == "local" and node["window"] == 3
    spec = VariantSpec.of(cfg.model.cross_attention)
    assert {"name": spec.name, **spec.params} == node


LIGHTNING = "print('lightning' in sys.modules or 'pytorch_lightning' in sys.modules)"
# The variant checks of a single run's preflight (a composed config, its roles expanded, every variant built).
CHECK_VARIANTS = """
from omegaconf import OmegaConf
from experiments.config.roles import expand_roles
from experiments.config.schema import register_configs
from experiments.app.preflight.compose import compose_overrides
from experiments.app.preflight.single_run import build_variants
register_configs()
full = compose_overrides(
    ["attention=local", "position=sinusoidal", "attention@model.decoder_attention=local",
     "attention@model.cross_attention=hard"]
)
cfg = expand_roles(OmegaConf.masked_copy(full, [k for k in full if k != "hydra"]))
build_variants(cfg)
"""


@pytest.mark.parametrize("work", ["", CHECK_VARIANTS], ids=["import", "check_variants"])
def test_preflight_and_its_variant_checks_import_no_lightning(work: str) -> None:
    code = f"import sys\nimport experiments.app.preflight as preflight\n{work}\n{LIGHTNING}"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "False", done.stdout
