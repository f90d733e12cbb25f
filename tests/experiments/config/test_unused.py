"""A model reports the settings it did not use, and a run records them as unused.

The reference is the model itself, changed: a setting is unused exactly when changing it
changes neither the parameters nor the output of a model built from the same seed.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from experiments.config.schema import ARCHS
from experiments.config.unused import record_unused
from experiments.model.transformer import PART_FIELDS, ModelSpec, Transformer, VariantSpec

VOCAB = 13
# One changed value per field that only a part of the model reads.
CHANGED = {
    "encoder_attention": VariantSpec("local", {"num_heads": 2, "window": 1}),
    "decoder_attention": VariantSpec("local", {"num_heads": 2, "window": 1}),
    "cross_attention": VariantSpec("local", {"num_heads": 2, "window": 1, "mode": "predictive"}),
    "encoder_layers": 3,
    "decoder_layers": 3,
    "tie_embeddings": False,
    "pooling": "cls",
}


def spec(arch: str, **changes) -> ModelSpec:
    base = ModelSpec(
        arch=arch,
        vocab_size=VOCAB,
        attention=VariantSpec("multihead", {"num_heads": 2}),
        position=VariantSpec("sinusoidal"),
        d_model=16,
        ffn_dim=32,
        encoder_layers=1,
        decoder_layers=1,
        num_classes=3 if arch == "encoder" else 0,
        dropout=0.0,
    )
    return dataclasses.replace(base, **changes)


def output(model_spec: ModelSpec) -> tuple[dict[str, tuple], torch.Tensor]:
    torch.manual_seed(0)
    model = Transformer(model_spec).eval()
    src = torch.randint(3, VOCAB, (2, 7))
    tgt = torch.randint(3, VOCAB, (2, 5))
    with torch.no_grad():
        out = model(src if model_spec.arch != "decoder" else None, tgt if model_spec.arch != "encoder" else None)
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}, out


def test_every_part_field_is_covered():
    assert sorted(f for fields in PART_FIELDS.values() for f in fields) == sorted(CHANGED)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("field", sorted(CHANGED))
def test_a_setting_is_unused_exactly_when_changing_it_changes_nothing(arch, field):
    shapes, out = output(spec(arch))
    changed_shapes, changed_out = output(spec(arch, **{field: CHANGED[field]}))
    same = shapes == changed_shapes and out.shape == changed_out.shape and torch.equal(out, changed_out)
    assert (field in Transformer(spec(arch)).unused_settings()) == same


def test_record_unused_nulls_the_config_and_keeps_what_was_asked():
    config = {
        "model.arch": "decoder",
        "model.cross_attention.name": "local",
        "model.cross_attention.window": 4,
        "model.cross_attention.num_heads": 1,
        "model.encoder_layers": 2,
        "model.d_model": 16,
    }
    result = {"config": config, "cross_attention": "local(window=4)", "encoder_attention": None}
    unused = record_unused(result, ["cross_attention", "encoder_layers"])
    assert result["config"] == {
        "model.arch": "decoder",
        "model.cross_attention": None,
        "model.encoder_layers": None,
        "model.d_model": 16,
    }
    assert unused == {"model.cross_attention": "local(window=4)", "model.encoder_layers": 2}
    assert result["cross_attention"] is None and result["unused"] is unused
    assert config["model.cross_attention.window"] == 4  # the asked config (shared with W&B) is left as it was
