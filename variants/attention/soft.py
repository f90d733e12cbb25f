"""Global soft attention over all keys, and Vaswani's multi-head attention.

Both run through a fused kernel (SDPA, FlexAttention, or xformers on CUDA) when the weights
are not requested and the score is a dot product after a transform of the query; otherwise
through the reference path. The two are tested equal. On ``flex`` a score bias enters as the
encoding's ``score_mod`` and causality and padding as a block mask; flex takes no dropout, so a
training call with dropout runs SDPA with the dense bias instead.
"""

from __future__ import annotations

from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import Tensor

from variants.attention.layer import AttentionLayer
from variants.flex import (
    KeyIntervals,
    band_rule,
    bucket_length,
    cached_block_mask,
    flex_attend,
    pad_rows,
    prefix_intervals,
    within,
)
from variants.kernels import fused_attention
from variants.masking import Masking
from variants.position.base import PositionEncoding
from variants.registries import ATTENTION


class _GlobalSoft(AttentionLayer):
    backends = ("auto", "math", "sdpa", "xformers", "flex")

    def attend(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        *,
        masking: Masking,
        position: PositionEncoding | None,
        need_weights: bool,
    ) -> tuple[Tensor, Tensor | None]:
        keys = max(q.shape[2], k.shape[2])
        backend = self.plan(position, cuda=q.is_cuda, need_weights=need_weights, keys=keys, dtype=q.dtype)
        if backend == "math":
            return self.soft_reference(q, k, v, masking, position)
        q_fused, scale = self.score.fused(q)
        dropout_p = self.dropout_p if self.training else 0.0
        if backend == "flex":
            return self._flex(q, q_fused, k, v, scale, masking, position), None
        bias = position.score_bias(q, masking.q_pos, masking.k_pos) if position is not None else None
        # Self-attention keys end at the last query, so equal lengths mean the plain lower triangle.
        causal_square = masking.causal and masking.key_padding_mask is None and q.shape[2] == k.shape[2]
        out = fused_attention(
            q_fused,
            k,
            v,
            allowed=None if causal_square and bias is None else masking.dense(),
            bias=bias,
            scale=scale,
            dropout_p=dropout_p,
            causal_square=causal_square,
            backend=backend,
        )
        return out, None

    def route(self, position: PositionEncoding | None, *, cuda: bool, need_weights: bool) -> tuple[str, str | None]:
        if self.backend == "math":
            return "math", None
        if not self.score.has_fused_form:
            return "math", f"the {type(self.score).__name__} score has no fused form"
        if need_weights:
            return "math", "the weights were asked for"
        if position is not None and position.needs_weights_for_values:
            return "math", f"{type(position).__name__} mixes the weights into the values"
        backend, _ = super().route(position, cuda=cuda, need_weights=need_weights)
        problem = self.flex_problem(position, cuda=cuda) if backend == "flex" else None
        if problem is not None:
            # SDPA's fused kernel with the dense bias: the fastest path left, T x T bias included.
            return "sdpa", problem
        return backend, None

    def _flex(
        self,
        q: Tensor,
        q_fused: Tensor,
        k: Tensor,
        v: Tensor,
        scale: float,
        masking: Masking,
        position: PositionEncoding | None,
    ) -> Tensor:
        """q, q_fused (B, H, Tq, D); k, v (B, H, Tk, D) -> (B, H, Tq, D) on FlexAttention.

        Lengths are padded to ``bucket_length`` so the compiled kernel sees a few shapes, not one per
        batch, evaluation length or decoding step; the padding is outside every mask and sliced off."""
        Tq, Tk = q.shape[2], k.shape[2]
        Tq_b, Tk_b = bucket_length(Tq), bucket_length(Tk)
        group = self.num_heads // self.num_kv_heads
        # The kernel shares each key/value head among its group itself (enable_gqa): hand it one copy.
        k, v = (k, v) if group == 1 else (k[:, ::group], v[:, ::group])  # (B, H_kv, Tk, D)
        q_fused, k, v = pad_rows(q_fused, Tq_b), pad_rows(k, Tk_b), pad_rows(v, Tk_b)  # (B, H|H_kv, T_b, D)
        # The layer's positions are consecutive: the padded ones continue them.
        q_pos = masking.q_pos[:1] + torch.arange(Tq_b, device=q.device)
        k_pos = masking.k_pos[:1] + torch.arange(Tk_b, device=q.device)
        pad = masking.key_padding_mask
        if pad is not None and Tk_b > Tk:
            pad = F.pad(pad, (0, Tk_b - Tk), value=True)  # (B, Tk_b)

        # Causal calls are self attention, whose keys end at the last query: (Tq, Tk) fixes the mask.
        def build() -> KeyIntervals:
            intervals = within(prefix_intervals(q_pos, k_pos, causal=masking.causal), Tq, Tk)
            return replace(intervals, rule=band_rule(Tq, Tk, causal=masking.causal, shift=Tk - Tq, device=q.device))

        block_mask = cached_block_mask(("prefix", Tq, Tk, Tq_b, Tk_b, masking.causal, str(q.device)), build, pad)
        # q itself stays unpadded: an encoding reads it for the real queries only (``score_mod``)
        score_mod = position.score_mod(q, q_pos, k_pos) if position is not None else None
        out = flex_attend(q_fused, k, v, block_mask=block_mask, score_mod=score_mod, scale=scale, enable_gqa=group > 1)
        return out[:, :, :Tq]


@ATTENTION.register("soft", references=("bahdanau2015neural", "luong2015effective", "vaswani2017attention"))
class SoftAttention(_GlobalSoft):
    """Global soft attention (Bahdanau / Luong global); one head unless asked otherwise."""

    default_heads = 1
    kind = "soft"

    def __init__(
        self,
        d_model: int,
        num_heads: int | None = None,
        *,
        dropout: float = 0.0,
        bias: bool = True,
        score: str = "scaled_dot",
        backend: str = "auto",
    ) -> None:
        super().__init__(d_model, num_heads, dropout=dropout, bias=bias, score=score, backend=backend)


# the last two papers: num_kv_heads (grouped and multi-query heads)
@ATTENTION.register("multihead", references=("vaswani2017attention", "ainslie2023gqa", "shazeer2019fast"))
class MultiHeadAttention(_GlobalSoft):
    """Vaswani et al. 2017: h heads of d/h, scaled dot-product, concatenated, W_o.

    ``num_kv_heads`` groups the key/value heads: None (or ``num_heads``) is the original,
    1 is multi-query attention (Shazeer 2019), anything between that divides ``num_heads``
    is grouped-query attention (Ainslie et al. 2023). The decoding cache holds only the
    KV heads, which is what these save.
    """

    default_heads = 8
    kind = "multihead"
    #: always scaled dot-product; multi-query is the grouped case the contract tests cover
    options: dict[str, tuple] = {"num_kv_heads": (None, 1)}

    def __init__(
        self,
        d_model: int,
        num_heads: int | None = None,
        *,
        dropout: float = 0.0,
        bias: bool = True,
        backend: str = "auto",
        num_kv_heads: int | None = None,
    ) -> None:
        super().__init__(
            d_model,
            num_heads,
            dropout=dropout,
            bias=bias,
            score="scaled_dot",
            backend=backend,
            num_kv_heads=num_kv_heads,
        )
