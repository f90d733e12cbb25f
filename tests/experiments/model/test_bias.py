"""``model.bias=false``: the Transformer without additive biases is the biased one with its biases at zero.

The reference is the biased model itself: the same weights, its bias vectors set to zero, computes what the
unbiased model computes, for every attention type and architecture; and no bias is left in the unbiased one
(a position encoding's own parameters are the encoding's, outside ``model.bias``).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from experiments.app import api
from experiments.config.spec import build_spec
from experiments.model.transformer import ModelSpec, Transformer, VariantSpec
from tests.experiments.model.test_model import tiny, tokens
from variants import ATTENTION


def _inputs(arch: str) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    src, tgt = tokens(2, 6), tokens(2, 5, seed=2)
    return (None if arch == "decoder" else src), (None if arch == "encoder" else tgt)


@pytest.mark.parametrize("attention", ATTENTION.names())
@pytest.mark.parametrize("arch", ["seq2seq", "decoder", "encoder"])
def test_unbiased_model_is_the_biased_one_with_zero_biases(arch: str, attention: str) -> None:
    biased, unbiased = tiny(arch, attention, norm="pre"), tiny(arch, attention, norm="pre", bias=False)
    kept = unbiased.state_dict()
    dropped = [name for name in biased.state_dict() if name not in kept]
    modules = dict(biased.named_modules())
    # exactly the biases of the linear maps and layer norms are gone, and every one of them
    biased_maps = [n for n, m in modules.items() if isinstance(m, (nn.Linear, nn.LayerNorm)) and m.bias is not None]
    every_bias = [f"{name}.bias" for name in biased_maps]
    assert sorted(dropped) == sorted(every_bias) and dropped
    assert not [n for n, _ in unbiased.named_parameters() if n.endswith("bias")]
    with torch.no_grad():
        for name in dropped:
            biased.get_parameter(name).zero_()
    unbiased.load_state_dict({name: biased.state_dict()[name] for name in kept})
    with torch.no_grad():
        expected, actual = biased(*_inputs(arch)), unbiased(*_inputs(arch))
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6)


def _decoder(model_bias: bool, **attention_params) -> nn.Module:
    spec = ModelSpec(
        arch="decoder",
        vocab_size=12,
        attention=VariantSpec("multihead", {"num_heads": 2, **attention_params}),
        position=VariantSpec("sinusoidal"),
        d_model=16,
        ffn_dim=32,
        decoder_layers=1,
        bias=model_bias,
    )
    return Transformer(spec)


@pytest.mark.parametrize("model_bias", [False, True])
def test_an_attention_groups_own_bias_decides_for_its_projections(model_bias: bool) -> None:
    layer = _decoder(model_bias, bias=not model_bias).decoder.layers[0]
    assert all((p.bias is not None) is (not model_bias) for p in (layer.self_attn.w_q, layer.self_attn.w_o))
    assert (layer.ffn.net[0].bias is not None) is model_bias and (layer.sub[0].norm.bias is not None) is model_bias


@pytest.mark.parametrize(("value", "expected"), [("false", False), ("true", True)])
def test_model_bias_reaches_the_spec(value: str, expected: bool) -> None:
    spec = build_spec(api.compose(["task=reverse", f"model.bias={value}"]))
    assert spec.model.options["bias"] is expected


def test_the_shakespeare_preset_has_no_biases_as_nanogpts_recipe() -> None:
    assert api.compose(["experiment=shakespeare_char"]).model.bias is False
