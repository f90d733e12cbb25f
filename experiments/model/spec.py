"""What a Transformer is built from, as data: a variant (attention or position name and its parameters)
and the model's spec (the config's model options with what the data decides), validated before building."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from attnlab.roles import ROLES
from experiments.config.schema import ModelOptions
from experiments.config.variant_node import variant_node
from variants.checks import positive

# the token-embedding conventions (model.embedding) are explained beside their allowed values, EMBEDDINGS in
# experiments/config/schema.py; an absolute position term is matched to whichever is chosen
# (see ``experiments.model.layers.Stack``)
GPT2_STD = 0.02


def token_init(embedding: str, d_model: int) -> tuple[float, float]:
    """(std of the token table at initialisation, factor at the input) under a convention."""
    if embedding == "scaled":
        return d_model**-0.5, math.sqrt(d_model)
    return GPT2_STD, 1.0


@dataclass
class VariantSpec:
    """A registry name plus its parameters, e.g. ``VariantSpec("local", {"window": 8})``."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, node: Any) -> "VariantSpec":
        """A group node (``{name: local, window: 4}``, plain or a ``DictConfig``) or a bare registry name,
        read by ``experiments.config.variant_node``."""
        params = variant_node(node)
        if params is None:
            raise TypeError("VariantSpec.of(None): a variant needs a node or a registry name")
        return cls(params.pop("name"), params)


@dataclass(kw_only=True)
class ModelSpec(ModelOptions):
    """What the Transformer is built from: the user's options (``ModelOptions``, with their
    defaults) and what the run decides: the task's vocabulary and special tokens, the variants."""

    vocab_size: int
    attention: VariantSpec
    position: VariantSpec
    num_classes: int = 0
    backend: str = "auto"
    # per-role attention; None means "the same as ``attention``"
    encoder_attention: VariantSpec | None = None
    decoder_attention: VariantSpec | None = None
    cross_attention: VariantSpec | None = None
    pad_id: int = 0
    bos_id: int = 1
    eos_id: int = 2

    @classmethod
    def of(cls, options: ModelOptions, **decided: Any) -> "ModelSpec":
        """The spec of ``options`` (a ``ModelConf`` from the config, say) with what the run decided."""
        return cls(**{f.name: getattr(options, f.name) for f in fields(ModelOptions)}, **decided)

    @classmethod
    def from_dict(cls, fields_: Mapping[str, Any]) -> "ModelSpec":
        """The spec from plain data (``dataclasses.asdict`` of a spec: a checkpoint's hyperparameters), with each
        variant given as ``{"name": ..., "params": {...}}``."""
        data = dict(fields_)
        for key in ("attention", "position", *ROLES):
            value = data.get(key)
            if isinstance(value, Mapping):
                data[key] = VariantSpec(value["name"], dict(value.get("params", {})))
        return cls(**data)

    def validate(self) -> None:
        super().validate()  # the user's options, checked as the config checks check them
        positive("model.vocab_size", self.vocab_size, integer=True)
        if self.arch == "encoder":
            positive("model.num_classes", self.num_classes, integer=True)
