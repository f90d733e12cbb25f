"""The blocks of a Transformer: the feed-forward, a residual around each sub-layer, one layer (self
attention, optional cross attention, feed-forward) and a stack of layers with its embedding and its
position encoding."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from experiments.model.elementwise import Dropout, ReLU
from experiments.model.spec import ModelSpec, VariantSpec, token_init
from variants import ATTENTION, POSITION, AttentionLayer, KVCache, PositionEncoding
from variants.pairs import check_pair


class FeedForward(nn.Module):
    def __init__(self, d_model: int, ffn_dim: int, dropout: float, bias: bool = True) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_model, ffn_dim, bias=bias), ReLU(), Dropout(dropout), nn.Linear(ffn_dim, d_model, bias=bias)
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class Residual(nn.Module):
    """LayerNorm(x + Dropout(f(x))) for ``post``; x + Dropout(f(LayerNorm(x))) for ``pre``."""

    def __init__(self, d_model: int, dropout: float, norm: str, bias: bool = True) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d_model, bias=bias)
        self.drop = Dropout(dropout)
        self.pre = norm == "pre"

    def forward(self, x: Tensor, fn) -> Tensor:
        if self.pre:
            return x + self.drop(fn(self.norm(x)))
        return self.norm(x + self.drop(fn(x)))


def _build_attention(spec: ModelSpec, variant: VariantSpec) -> AttentionLayer:
    # model.bias is every projection's default; an attention group's own ``bias`` decides for its role
    params = {"bias": spec.bias, **variant.params}
    return ATTENTION.build(
        variant.name, d_model=spec.d_model, dropout=spec.attention_dropout, backend=spec.backend, **params
    )


class Layer(nn.Module):
    """One encoder or decoder layer: self attention, optional cross attention, FFN."""

    def __init__(self, spec: ModelSpec, self_attn: VariantSpec, cross_attn: VariantSpec | None) -> None:
        super().__init__()
        self.self_attn = _build_attention(spec, self_attn)
        self.cross_attn = _build_attention(spec, cross_attn) if cross_attn is not None else None
        self.ffn = FeedForward(spec.d_model, spec.ffn_dim, spec.dropout, spec.bias)
        n_sub = 3 if cross_attn is not None else 2
        self.sub = nn.ModuleList(Residual(spec.d_model, spec.dropout, spec.norm, spec.bias) for _ in range(n_sub))

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
        self.final_norm = nn.LayerNorm(spec.d_model, bias=spec.bias) if spec.norm == "pre" else nn.Identity()

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
