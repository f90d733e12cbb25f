"""The "Adding a variant" example of docs/architecture.md works as printed, and the backend table of
docs/variants.md is the generated one."""

from __future__ import annotations

import re
import types
from pathlib import Path

import pytest
import torch

from tests.helpers.paths import ROOT
from variants import ATTENTION, POSITION

ARCHITECTURE = ROOT / "docs" / "architecture.md"
VARIANTS = ROOT / "docs" / "variants.md"


def doc_block(doc: Path, after: str, language: str) -> str:
    """The first ``language`` code block of ``doc`` after the text ``after``."""
    text = doc.read_text()
    start = text.index(after)
    match = re.search(rf"```{language}\n(.*?)```", text[start:], re.S)
    assert match, f"no {language} block after {after!r} in {doc.name}"
    return match.group(1)


@pytest.fixture
def cosine_attention():
    module = types.ModuleType("readme_cosine")
    exec(doc_block(ARCHITECTURE, "`variants/attention/cosine.py`:", "python"), module.__dict__)  # noqa: S102
    yield ATTENTION.get("cosine")
    ATTENTION.unregister("cosine")


def test_architecture_attention_example_registers_and_keeps_the_invariants(cosine_attention) -> None:
    import yaml

    params = yaml.safe_load(doc_block(ARCHITECTURE, "`conf/attention/cosine.yaml`:", "yaml"))
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


def test_variants_page_backend_table_is_the_generated_one() -> None:
    """docs/variants.md's backend table is what ``variants.backend_table`` prints from the registries now."""
    from variants.backend_table import backend_table

    text = VARIANTS.read_text()
    match = re.search(r"<!-- backend-table -->\n(.*?)<!-- /backend-table -->", text, re.S)
    assert match, "docs/variants.md has no <!-- backend-table --> block"
    assert match.group(1) == backend_table(), "regenerate it: python -m variants.backend_table"
