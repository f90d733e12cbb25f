"""The README's "Adding a variant" example works as printed."""

from __future__ import annotations

import re
import types

import pytest
import torch

from tests.conftest import ROOT
from variants import ATTENTION, POSITION


def readme_block(after: str, language: str) -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index(after)
    match = re.search(rf"```{language}\n(.*?)```", text[start:], re.S)
    assert match, f"no {language} block after {after!r}"
    return match.group(1)


@pytest.fixture
def cosine_attention():
    module = types.ModuleType("readme_cosine")
    exec(readme_block("`variants/attention/cosine.py`:", "python"), module.__dict__)  # noqa: S102
    yield ATTENTION.get("cosine")
    ATTENTION.unregister("cosine")


def test_readme_attention_example_registers_and_keeps_the_invariants(cosine_attention) -> None:
    import yaml

    params = yaml.safe_load(readme_block("`conf/attention/cosine.yaml`:", "yaml"))
    assert params.pop("name") == "cosine"
    layer = ATTENTION.build("cosine", d_model=16, **params).eval()
    x = torch.randn(2, 7, 16)
    for position in POSITION.names():
        pos = POSITION.build(position, d_model=16, num_heads=layer.num_heads)
        out, weights = layer(x, causal=True, position=pos, need_weights=True)
        assert torch.allclose(weights.sum(-1), torch.ones_like(weights.sum(-1)), atol=1e-5)
        y = x.clone()
        y[:, 4:] = torch.randn(2, 3, 16)
        assert torch.allclose(layer(y, causal=True, position=pos)[0][:, :4], out[:, :4], atol=1e-5)


def test_readme_backend_table_is_the_generated_one() -> None:
    """The README's backend table is what ``variants.backend_table`` prints from the registries now."""
    from variants.backend_table import backend_table

    text = (ROOT / "README.md").read_text()
    match = re.search(r"<!-- backend-table -->\n(.*?)<!-- /backend-table -->", text, re.S)
    assert match, "README.md has no <!-- backend-table --> block"
    assert match.group(1) == backend_table(), "regenerate it: python -m variants.backend_table"
