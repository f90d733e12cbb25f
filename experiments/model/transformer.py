"""The Transformer, assembled from registry names (plain torch, no Lightning).

``arch``:
- ``seq2seq``: encoder-decoder as in "Attention Is All You Need": N encoder layers of
  self attention + FFN, N decoder layers of causal self attention + cross attention
  + FFN, residual and LayerNorm around every sub-layer, the decoder input shifted
  right with ``<bos>``;
- ``decoder``: a decoder-only language model (no cross attention);
- ``encoder``: an encoder and a pooled classifier (``pooling`` = ``mean`` | ``cls``).

Each stack owns one position encoding (absolute ones add to its embeddings,
relative ones bias every self-attention layer). Cross attention gets no position
hooks: decoder and encoder positions do not share an index space.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import torch
from torch import Tensor, nn

from experiments.config.schema import ModelOptions
from experiments.config.variant_node import variant_node
from experiments.model.elementwise import Dropout, ReLU
from variants import ATTENTION, POSITION, AttentionLayer, KVCache, PositionEncoding
from variants.checks import VariantConfigError, positive
from variants.pairs import check_pair

# the token-embedding conventions (model.embedding) are explained beside their allowed values, EMBEDDINGS in
# experiments/config/schema.py; an absolute position term is matched to whichever is chosen (see ``Stack``)
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
        for key in ("attention", "position", "encoder_attention", "decoder_attention", "cross_attention"):
            value = data.get(key)
            if isinstance(value, Mapping):
                data[key] = VariantSpec(value["name"], dict(value.get("params", {})))
        return cls(**data)

    def validate(self) -> None:
        super().validate()  # the user's options, checked as the config checks check them
        positive("model.vocab_size", self.vocab_size, integer=True)
        if self.arch == "encoder":
            positive("model.num_classes", self.num_classes, integer=True)


class FeedForward(nn.Module):
    def __init__(self, d_model: int, ffn_dim: int, dropout: float) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_model, ffn_dim), ReLU(), Dropout(dropout), nn.Linear(ffn_dim, d_model))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class Residual(nn.Module):
    """LayerNorm(x + Dropout(f(x))) for ``post``; x + Dropout(f(LayerNorm(x))) for ``pre``."""

    def __init__(self, d_model: int, dropout: float, norm: str) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.drop = Dropout(dropout)
        self.pre = norm == "pre"

    def forward(self, x: Tensor, fn) -> Tensor:
        if self.pre:
            return x + self.drop(fn(self.norm(x)))
        return self.norm(x + self.drop(fn(x)))


def _build_attention(spec: ModelSpec, variant: VariantSpec) -> AttentionLayer:
    return ATTENTION.build(
        variant.name, d_model=spec.d_model, dropout=spec.attention_dropout, backend=spec.backend, **variant.params
    )


class Layer(nn.Module):
    """One encoder or decoder layer: self attention, optional cross attention, FFN."""

    def __init__(self, spec: ModelSpec, self_attn: VariantSpec, cross_attn: VariantSpec | None) -> None:
        super().__init__()
        self.self_attn = _build_attention(spec, self_attn)
        self.cross_attn = _build_attention(spec, cross_attn) if cross_attn is not None else None
        self.ffn = FeedForward(spec.d_model, spec.ffn_dim, spec.dropout)
        n_sub = 3 if cross_attn is not None else 2
        self.sub = nn.ModuleList(Residual(spec.d_model, spec.dropout, spec.norm) for _ in range(n_sub))

    def forward(
        self,
        x: Tensor,
        *,
        causal: bool,
        pad: Tensor | None,
        position: PositionEncoding,
        memory: Tensor | None = None,
        memory_pad: Tensor | None = None,
        caches: tuple[KVCache, KVCache] | None = None,
        maps: list[Tensor] | None = None,
    ) -> Tensor:
        self_cache, cross_cache = caches if caches is not None else (None, None)
        want = maps is not None

        def attend_self(h: Tensor) -> Tensor:
            out, w = self.self_attn(
                h, causal=causal, key_padding_mask=pad, position=position, cache=self_cache, need_weights=want
            )
            if want:
                maps.append(w)
            return out

        x = self.sub[0](x, attend_self)
        if self.cross_attn is not None:

            def attend_cross(h: Tensor) -> Tensor:
                out, w = self.cross_attn(h, memory, key_padding_mask=memory_pad, cache=cross_cache, need_weights=want)
                if want:
                    maps.append(w)
                return out

            x = self.sub[1](x, attend_cross)
        return self.sub[-1](x, self.ffn)


class Stack(nn.Module):
    """Embedding + position encoding + N layers (+ a final LayerNorm for pre-norm)."""

    def __init__(
        self,
        spec: ModelSpec,
        embedding: nn.Embedding,
        num_layers: int,
        self_attn: VariantSpec,
        cross_attn: VariantSpec | None,
    ) -> None:
        super().__init__()
        self.embedding = embedding
        std, self.scale = token_init(spec.embedding, spec.d_model)
        # The RMS of one element of the token term at initialisation (1 under "scaled", 0.02
        # under "gpt2"). Absolute position encodings start at this scale: a term of fixed
        # amplitude would swamp small token embeddings (the sinusoid, amplitude 1, over GPT-2's
        # 0.02) or vanish beside large ones (a 0.02 table beside sqrt(d)-scaled tokens), and a
        # comparison of encodings would then measure the convention, not the encoding.
        self.token_rms = std * self.scale
        # The position hooks need the head count of the layers they serve.
        heads = self_attn.params.get("num_heads") or getattr(ATTENTION.get(self_attn.name), "default_heads", 1)
        self.position = POSITION.build(
            spec.position.name, d_model=spec.d_model, num_heads=heads, **spec.position.params
        )
        self.drop = Dropout(spec.dropout)
        self.layers = nn.ModuleList(Layer(spec, self_attn, cross_attn) for _ in range(num_layers))
        # Only self attention takes the stack's encoding (cross attention gets no position hooks):
        # a pair that cannot compose is refused here, in one line, before anything trains.
        if num_layers:
            check_pair(self_attn.name, self.layers[0].self_attn, spec.position.name, self.position)
        self.final_norm = nn.LayerNorm(spec.d_model) if spec.norm == "pre" else nn.Identity()

    def embed(self, tokens: Tensor, offset: int = 0, prefix: Tensor | None = None) -> Tensor:
        x = self.embedding(tokens) * self.scale  # (B, T, d_model)
        if prefix is not None:
            x = torch.cat((prefix.expand(x.shape[0], -1, -1), x), dim=1)
        positions = torch.arange(offset, offset + x.shape[1], device=tokens.device)
        return self.drop(self.position.embed(x, positions, scale=self.token_rms))

    def forward(
        self,
        x: Tensor,
        *,
        causal: bool,
        pad: Tensor | None,
        memory: Tensor | None = None,
        memory_pad: Tensor | None = None,
        caches: list[tuple[KVCache, KVCache]] | None = None,
        maps: list[Tensor] | None = None,
    ) -> Tensor:
        for i, layer in enumerate(self.layers):
            x = layer(
                x,
                causal=causal,
                pad=pad,
                position=self.position,
                memory=memory,
                memory_pad=memory_pad,
                caches=caches[i] if caches is not None else None,
                maps=maps,
            )
        return self.final_norm(x)


# The spec fields that only one part of the model reads: a model that does not build the part
# leaves them unused (``Transformer.unused_settings``).
PART_FIELDS = {
    "encoder": ("encoder_attention", "encoder_layers"),
    "decoder": ("decoder_attention", "decoder_layers", "tie_embeddings"),
    "cross attention": ("cross_attention",),
    "classifier": ("pooling",),
}


class Transformer(nn.Module):
    def __init__(self, spec: ModelSpec) -> None:
        super().__init__()
        spec.validate()
        self.spec = spec
        d = spec.d_model
        self.embedding = nn.Embedding(spec.vocab_size, d, padding_idx=spec.pad_id)
        # "scaled": times sqrt(d) at the input, so unit-variance embeddings after scaling.
        nn.init.normal_(self.embedding.weight, std=token_init(spec.embedding, d)[0])
        with torch.no_grad():
            self.embedding.weight[spec.pad_id].zero_()
        enc_attn = spec.encoder_attention or spec.attention
        dec_attn = spec.decoder_attention or spec.attention
        cross = spec.cross_attention or spec.attention
        self.encoder = self.decoder = None
        if spec.arch in ("seq2seq", "encoder"):
            self.encoder = Stack(spec, self.embedding, spec.encoder_layers, enc_attn, None)
        if spec.arch in ("seq2seq", "decoder"):
            self.decoder = Stack(
                spec, self.embedding, spec.decoder_layers, dec_attn, cross if spec.arch == "seq2seq" else None
            )
            self.lm_head = nn.Linear(d, spec.vocab_size, bias=False)
            if spec.tie_embeddings:
                self.lm_head.weight = self.embedding.weight
        if spec.arch == "encoder":
            self.cls = nn.Parameter(torch.randn(1, 1, d) * d**-0.5) if spec.pooling == "cls" else None
            self.classifier = nn.Sequential(nn.Linear(d, d), nn.Tanh(), nn.Linear(d, spec.num_classes))

    def built_parts(self) -> set[str]:
        """The parts of ``PART_FIELDS`` this model built, read off its modules (not off ``spec.arch``)."""
        layers = list(self.decoder.layers) if self.decoder is not None else []
        parts = {
            "encoder": self.encoder is not None,
            "decoder": self.decoder is not None,
            "cross attention": any(layer.cross_attn is not None for layer in layers),
            "classifier": hasattr(self, "classifier"),
        }
        return {part for part, built in parts.items() if built}

    def kernel_plan(self, *, cuda: bool, keys: int | None = None) -> dict[str, str]:
        """{layer path: the kernel a training call runs, with why where it is not the type's first
        pick}, e.g. ``{"decoder.layers.0.self_attn": "sdpa (head dim 8 < 16, ...)"}``: what
        ``AttentionLayer.explain`` says for each layer on the device (``cuda``) for calls of ``keys``
        keys (the longest sequence the run meets; None: any length), recorded with the run."""
        plan = {}
        for name, stack in (("encoder", self.encoder), ("decoder", self.decoder)):
            if stack is None:
                continue
            for i, layer in enumerate(stack.layers):
                # Only self attention takes the stack's encoding; cross attention gets no position hooks.
                roles = (("self_attn", stack.position), ("cross_attn", None))
                for role, position in roles:
                    attention = getattr(layer, role)
                    if attention is None:
                        continue
                    was = attention.training
                    with torch.enable_grad():  # a training call is differentiated
                        backend, why = attention.train().explain(position, cuda=cuda, keys=keys)
                    attention.train(was)
                    plan[f"{name}.layers.{i}.{role}"] = backend if why is None else f"{backend} ({why})"
        return plan

    def flex_head_dims(self, *, cuda: bool, keys: int | None = None) -> set[int]:
        """The head widths of the layers whose plan runs flex, in training or in evaluation (without grad),
        at ``keys`` keys (the longest sequence the run meets; None: any length)."""
        dims = set()
        for stack in (self.encoder, self.decoder):
            for layer in stack.layers if stack is not None else ():
                for attention, position in ((layer.self_attn, stack.position), (layer.cross_attn, None)):
                    if attention is None:
                        continue
                    was = attention.training
                    for training in (True, False):
                        with torch.set_grad_enabled(training):
                            if attention.train(training).plan(position, cuda=cuda, keys=keys) == "flex":
                                dims.add(attention.head_dim)
                    attention.train(was)
        return dims

    def unused_settings(self) -> dict[str, str]:
        """{spec field: why it is unused} for the fields no built part reads, e.g. on a decoder-only model
        ``{"cross_attention": "this model builds no cross attention", ...}``: a run records them as unused, and
        the analysis never makes them factors."""
        built = self.built_parts()
        return {
            name: f"this model builds no {part}"
            for part, fields in PART_FIELDS.items()
            if part not in built
            for name in fields
        }

    # -- encoder ---------------------------------------------------------------------------------
    def encode(self, src: Tensor, maps: list[Tensor] | None = None) -> tuple[Tensor, Tensor]:
        """src (B, S) -> memory (B, S', d), padding mask (B, S') with S' = S (+1 for a [CLS] token)."""
        pad = src.eq(self.spec.pad_id)  # (B, S)
        prefix = getattr(self, "cls", None) if self.spec.arch == "encoder" else None
        if prefix is not None:
            pad = torch.cat((pad.new_zeros(pad.shape[0], 1), pad), dim=1)
        # The stack's positions are 0 .. S'-1: declared from the shape, no hook reads them back.
        with self.encoder.position.known_length(pad.shape[1]):
            x = self.encoder.embed(src, prefix=prefix)
            return self.encoder(x, causal=False, pad=pad, maps=maps), pad

    def classify(self, src: Tensor) -> Tensor:
        """src (B, S) -> class logits (B, C); padded positions never enter the pooled vector."""
        memory, pad = self.encode(src)
        if self.spec.pooling == "cls":
            pooled = memory[:, 0]
        else:
            keep = (~pad).unsqueeze(-1).to(memory.dtype)  # (B, S, 1)
            pooled = (memory * keep).sum(1) / keep.sum(1).clamp(min=1)
        return self.classifier(pooled)

    # -- decoder ---------------------------------------------------------------------------------
    def decode(
        self,
        tokens: Tensor,
        memory: Tensor | None = None,
        memory_pad: Tensor | None = None,
        *,
        caches: list[tuple[KVCache, KVCache]] | None = None,
        offset: int = 0,
        maps: list[Tensor] | None = None,
    ) -> Tensor:
        """tokens (B, T) -> logits (B, T, V); with ``caches`` only the new tokens are given."""
        # Decoder inputs are padded on the right only, so the causal mask already keeps
        # every real token away from padding; no key padding mask is needed.
        # Positions offset .. offset+T-1: declared from the shape unless generation declared its final length.
        with self.decoder.position.known_length(offset + tokens.shape[1]):
            x = self.decoder.embed(tokens, offset=offset)
            h = self.decoder(x, causal=True, pad=None, memory=memory, memory_pad=memory_pad, caches=caches, maps=maps)
        return self.lm_head(h)

    def forward(self, src: Tensor | None = None, tgt_in: Tensor | None = None) -> Tensor:
        arch = self.spec.arch
        if arch == "encoder":
            return self.classify(src)
        if arch == "decoder":
            return self.decode(tgt_in)
        memory, memory_pad = self.encode(src)
        return self.decode(tgt_in, memory, memory_pad)

    def new_caches(self) -> list[tuple[KVCache, KVCache]]:
        return [(KVCache(), KVCache()) for _ in self.decoder.layers]

    # -- generation ------------------------------------------------------------------------------
    @torch.no_grad()
    def generate(self, prompt: Tensor, steps: int, src: Tensor | None = None, use_cache: bool = True) -> Tensor:
        """Greedy decoding of ``steps`` tokens after ``prompt`` (B, P) -> (B, steps).

        For ``seq2seq`` the prompt is ``<bos>`` and ``src`` is encoded once; for
        ``decoder`` the prompt is the unpadded context. Once a sequence emits
        ``<eos>`` it keeps emitting padding.
        """
        memory = memory_pad = None
        if src is not None:
            memory, memory_pad = self.encode(src)
        out = []
        done = torch.zeros(prompt.shape[0], dtype=torch.bool, device=prompt.device)
        seq = prompt
        caches = self.new_caches() if use_cache else None
        step_input, offset = prompt, 0
        # One declared length for every step: an encoding that depends on the length (rope
        # scaling) then rotates the cached keys and a recomputed prefix alike.
        with self.decoder.position.sequence_length(prompt.shape[1] + steps):
            for _ in range(steps):
                if use_cache:
                    logits = self.decode(step_input, memory, memory_pad, caches=caches, offset=offset)
                    offset += step_input.shape[1]
                else:
                    logits = self.decode(seq, memory, memory_pad)
                nxt = logits[:, -1].argmax(-1)  # (B,)
                nxt = nxt.masked_fill(done, self.spec.pad_id)
                done |= nxt.eq(self.spec.eos_id)
                out.append(nxt)
                step_input = nxt[:, None]
                seq = torch.cat((seq, step_input), dim=1)
                if bool(done.all()):
                    break
        generated = torch.stack(out, dim=1)
        if generated.shape[1] < steps:
            fill = generated.new_full((generated.shape[0], steps - generated.shape[1]), self.spec.pad_id)
            generated = torch.cat((generated, fill), dim=1)
        return generated

    # -- inspection --------------------------------------------------------------------------------
    @torch.no_grad()
    def attention_weights(
        self, src: Tensor | None = None, tgt_in: Tensor | None = None
    ) -> dict[str, tuple[Tensor, Tensor, Tensor]]:
        """Every attention layer's weights for a batch, with what each query could see.

        {"<block>/<layer>": (weights (B, H, Tq, Tk), visible (B|1, 1, Tq|1, Tk) bool, queries (B, Tq) bool)}:
        ``visible`` is padding and causality (not a variant's own window), ``queries`` the real ones.
        """
        out: dict[str, tuple[Tensor, Tensor, Tensor]] = {}
        arch = self.spec.arch
        memory = memory_pad = None
        if arch in ("seq2seq", "encoder"):
            enc: list[Tensor] = []
            memory, memory_pad = self.encode(src, maps=enc)
            keys = ~memory_pad  # (B, S)
            out.update({f"encoder_self/{i}": (w, keys[:, None, None, :], keys) for i, w in enumerate(enc)})
        if arch in ("seq2seq", "decoder"):
            dec: list[Tensor] = []
            self.decode(tgt_in, memory, memory_pad, maps=dec)
            T = tgt_in.shape[1]
            queries = tgt_in.ne(self.spec.pad_id)  # (B, T); right-padded, so causal keeps keys real
            causal = torch.ones(T, T, dtype=torch.bool, device=tgt_in.device).tril()[None, None]  # (1, 1, T, T)
            per_layer = 2 if arch == "seq2seq" else 1
            for i in range(len(dec) // per_layer):
                out[f"decoder_self/{i}"] = (dec[i * per_layer], causal, queries)
                if arch == "seq2seq":
                    out[f"cross/{i}"] = (dec[i * per_layer + 1], (~memory_pad)[:, None, None, :], queries)
        return out

    @torch.no_grad()
    def attention_maps(self, src: Tensor | None = None, tgt_in: Tensor | None = None) -> dict[str, Tensor]:
        """Weights of every attention layer for one example: {"<block>/<layer>": (H, Tq, Tk)}."""
        layers = self.attention_weights(src, tgt_in)
        return {k: w[0].float().cpu() for k, (w, _, _) in layers.items()}


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


__all__ = ["ModelSpec", "Transformer", "VariantConfigError", "VariantSpec", "count_parameters"]
