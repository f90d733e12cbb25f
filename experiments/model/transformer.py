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

import torch
from torch import Tensor, nn

from experiments.model.layers import Stack
from experiments.model.spec import ModelSpec, VariantSpec, token_init
from variants import KVCache
from variants.checks import VariantConfigError

__all__ = ["PART_FIELDS", "ModelSpec", "Transformer", "VariantSpec", "count_parameters"]


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
            self.classifier = nn.Sequential(
                nn.Linear(d, d, bias=spec.bias), nn.Tanh(), nn.Linear(d, spec.num_classes, bias=spec.bias)
            )

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
