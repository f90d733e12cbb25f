"""Each allowed value has one home (experiments/config/schema.py): the config checks, the optimiser's options and
the Transformer's spec accept and refuse the same values with the same one-line message."""

from __future__ import annotations

import dataclasses

import pytest

from experiments.config.checks import check_config
from experiments.config.schema import ARCHS, EMBEDDINGS, NORMS, POOLINGS, SCHEDULES, OptimConf
from experiments.model.transformer import ModelSpec, VariantSpec
from tests.helpers.config import TINY, compose


def spec(**options) -> ModelSpec:
    return ModelSpec(
        vocab_size=11, num_classes=3, attention=VariantSpec("multihead"), position=VariantSpec("none"), **options
    )


def message(call) -> str:
    with pytest.raises(ValueError) as err:
        call()
    return str(err.value)


# (key, a value no check allows): the keys the config checks and ModelSpec.validate share
BAD_MODEL = [
    ("arch", "decodr"),
    ("norm", "middle"),
    ("pooling", "max"),
    ("embedding", "bert"),
    ("d_model", 0),
    ("ffn_dim", -4),
    ("dropout", 1.0),
    ("attention_dropout", -0.5),
    ("encoder_layers", 0),
    ("decoder_layers", 0),
]


@pytest.mark.parametrize("key, value", BAD_MODEL)
def test_config_checks_and_model_spec_refuse_alike(key: str, value) -> None:
    from_config = message(lambda: check_config(compose([*TINY, f"model.{key}={value}"])))
    from_spec = message(lambda: spec(**{key: value}).validate())
    assert from_config == from_spec, (from_config, from_spec)
    assert from_config.startswith(f"model.{key}={value} is not allowed") and "\n" not in from_config


BAD_OPTIM = [
    ("lr", -0.001),
    ("lr", float("inf")),
    ("weight_decay", -0.1),
    ("warmup_steps", -5),
    ("grad_clip", -1.0),
    ("schedule", "linear"),
    ("min_lr_ratio", 1.5),
    ("label_smoothing", 1.0),
]


@pytest.mark.parametrize("key, value", BAD_OPTIM)
def test_config_checks_and_optim_conf_refuse_alike(key: str, value) -> None:
    from_config = message(lambda: check_config(compose([*TINY, f"optim.{key}={value}"])))
    from_conf = message(lambda: dataclasses.replace(OptimConf(), **{key: value}).validate())
    assert from_config == from_conf, (from_config, from_conf)
    assert from_config.startswith(f"optim.{key}=") and "\n" not in from_config


@pytest.mark.parametrize(
    "key, allowed", [("arch", ARCHS), ("norm", NORMS), ("pooling", POOLINGS), ("embedding", EMBEDDINGS)]
)
def test_every_allowed_model_option_passes_both(key: str, allowed: tuple[str, ...]) -> None:
    for value in allowed:
        check_config(compose([*TINY, f"model.{key}={value}"]))
        spec(**{key: value}).validate()


def test_every_allowed_schedule_passes_both() -> None:
    for schedule in SCHEDULES:
        check_config(compose([*TINY, f"optim.schedule={schedule}"]))
        OptimConf(schedule=schedule).validate()
