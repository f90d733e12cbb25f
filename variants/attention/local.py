"""Luong et al. 2015 local attention: soft attention inside a window [p_i - w, p_i + w].

``mode``:
- ``monotonic`` (local-m): in self attention p_i = i (causal looks back only); in
  cross attention p_i = round(ratio * i), clamped to the last real source position.
  The alignment uses the query position and the source length only, never the
  target length, so a query gets the same window in training and in step-by-step
  generation.
- ``predictive`` (local-p): p_i = S_i * sigmoid(v . tanh(W q_i)), with S_i the last
  visible source position; the window's softmax weights are multiplied by
  exp(-(j - p_i)^2 / (2 sigma^2)), sigma = w / 2 (so they no longer sum to 1, as in the paper).

``backend='banded'`` (what ``auto`` picks) runs blocks of ``block_size`` queries
against the slice of keys their windows reach, so memory grows as
T * (block + 2w), not T^2; ``backend='math'`` is the dense reference. With
``predictive`` the slice spans the block's spread of centres, so the saving
depends on what the predictor learned.

``backend='flex'`` (what ``auto`` picks on CUDA in monotonic mode) runs the window as a block-sparse
FlexAttention mask: each query's keys are one interval, so the mask is two (B|1, Tq) tensors and
the kernel visits only the blocks a window touches. Predictive local attention has no flex form
(its Gaussian multiplies the weights after the softmax) and keeps ``banded``; so do calls that flex
cannot take (an additive score, dropout in training, an encoding without a ``score_mod``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Hashable

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from variants.attention.layer import AttentionLayer
from variants.attention.scores import SCORES
from variants.checks import VariantConfigError, one_of, positive
from variants.flex import (
    KeyIntervals,
    band_rule,
    block_mask_from_intervals,
    bucket_length,
    cached_block_mask,
    flex_attend,
    pad_rows,
    padded_to,
    window_intervals,
    with_padding,
)
from variants.host_reads import reads_host
from variants.kernels import auto_backend
from variants.masking import Masking, masked_softmax
from variants.position.base import PositionEncoding
from variants.registries import ATTENTION

MODES = ("monotonic", "predictive")


@ATTENTION.register("local", references="luong2015effective")
class LocalAttention(AttentionLayer):
    default_heads = 1
    backends = ("auto", "math", "banded", "flex")
    kind = "local"
    options: dict[str, tuple] = {"score": SCORES, "mode": MODES}
    flex_family = "window"

    def __init__(
        self,
        d_model: int,
        num_heads: int | None = None,
        *,
        dropout: float = 0.0,
        bias: bool = True,
        score: str = "scaled_dot",
        backend: str = "auto",
        window: int = 8,
        mode: str = "monotonic",
        ratio: float = 1.0,
        block_size: int = 64,
    ) -> None:
        super().__init__(d_model, num_heads, dropout=dropout, bias=bias, score=score, backend=backend)
        self.window = positive("window", window, integer=True)
        self.mode = one_of("mode", mode, MODES)
        self.ratio = float(positive("ratio", ratio))
        self.block_size = positive("block_size", block_size, integer=True)
        if backend == "flex" and mode != "monotonic":
            raise VariantConfigError(
                f"backend='flex' needs mode='monotonic', not mode={mode!r}: the predictive "
                "window's Gaussian acts after the softmax; allowed backends for it: "
                f"{[b for b in self.backends if b != 'flex']}"
            )
        if backend == "auto":  # every call is windowed: on CUDA, monotonic windows go to flex
            self.backend = auto_backend(self.auto_choices, cuda=torch.cuda.is_available(), biased=True)
        if mode == "predictive":
            # p_i = S * sigmoid(v_p . tanh(W_p q_i)), one predictor per head.
            self.w_p = nn.Parameter(
                torch.randn(self.num_heads, self.head_dim, self.head_dim) / math.sqrt(self.head_dim)
            )
            self.v_p = nn.Parameter(torch.randn(self.num_heads, self.head_dim) / math.sqrt(self.head_dim))

    @property
    def auto_choices(self) -> tuple[str, ...]:
        return self.backends if self.mode == "monotonic" else tuple(b for b in self.backends if b != "flex")

    @property
    def rotary_relative(self) -> bool:
        # a predictive window's centre is read from the rotated query: an absolute position
        return super().rotary_relative and self.mode == "monotonic"

    # -- window centres -----------------------------------------------------------------------
    def centres(self, q: Tensor, masking: Masking) -> Tensor:
        """Window centre of every query, as an absolute key position: (B, H, Tq) float.

        Measured from the first key, so a sequence placed at an offset (a fresh
        ``KVCache(offset=c)``) gets the same windows, shifted by c.
        """
        B, H, Tq, _ = q.shape
        # Positions stay in (at least) fp32: half precision cannot count past 2048 exactly.
        dtype = torch.promote_types(q.dtype, torch.float32)
        first = masking.k_pos[:1].to(dtype)  # (1,)
        last = (masking.key_lengths(B) - 1).clamp(min=0).to(dtype)[:, None, None]  # (B, 1, 1) from first
        q_rel = (masking.q_pos.to(dtype) - first)[None, None, :]  # (1, 1, Tq)
        if self.mode == "monotonic":
            if masking.causal:
                return (first + q_rel).expand(B, H, Tq)
            return (first + torch.minimum(torch.round(q_rel * self.ratio), last)).expand(B, H, Tq)
        gate = _predictor(q, self.w_p, self.v_p).to(dtype)  # (B, H, Tq) in (0, 1)
        span = q_rel if masking.causal else last
        return first + span * gate  # (B, H, Tq)

    def _window(self, centre: Tensor, k_pos: Tensor) -> Tensor:
        """|j - p_i| <= w: (B, H, tq, tk) bool from centres (B, H, tq)."""
        return (k_pos.to(centre.dtype)[None, None, None, :] - centre[..., None]).abs() <= self.window

    # -- the two paths ---------------------------------------------------------------------------
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
        if backend == "flex":
            return self._flex(q, *self.score.fused(q), k, v, masking, position), None
        centre = self.centres(q, masking)  # (B, H, Tq)
        if backend == "banded":
            return self._banded(q, k, v, centre, masking, position), None
        return self._window_attention(q, k, v, centre, masking, position, slice(None), slice(None))

    def _window_attention(
        self,
        q: Tensor,
        k: Tensor,
        v: Tensor,
        centre: Tensor,
        masking: Masking,
        position: PositionEncoding | None,
        qs: slice,
        ks: slice,
    ) -> tuple[Tensor, Tensor]:
        """The reference computation for the queries ``qs`` against the keys ``ks``.

        ``q`` (B, H, tq, D) and ``centre`` (B, H, tq) hold those queries; ``k``, ``v`` (B, H, tk, D) those keys.
        """
        q_pos, k_pos = masking.q_pos[qs], masking.k_pos[ks]
        allowed = self._window(centre, k_pos)  # (B, H, tq, tk)
        base = masking.block(qs, ks)
        if base is not None:
            allowed = allowed & base
        scores = self.logits(q, k, q_pos, k_pos, position)
        weights = masked_softmax(scores, allowed)
        if self.mode == "predictive":
            sigma = self.window / 2
            distance = k_pos.to(centre.dtype)[None, None, None, :] - centre[..., None]  # (B, H, tq, tk)
            weights = weights * torch.exp(-(distance**2) / (2 * sigma**2)).to(weights.dtype)
        out = self.mix(self.weight_dropout(weights), v, q_pos, k_pos, position)
        return out, weights

    def route(self, position: PositionEncoding | None, *, cuda: bool, need_weights: bool) -> tuple[str, str | None]:
        backend = self.call_backend(cuda=cuda, biased=True)  # every call is windowed
        if backend == "math":
            return "math", None
        if need_weights:
            return "math", "the weights were asked for"
        if backend != "flex":
            return backend, None
        problem = self.flex_problem(position, cuda=cuda)
        if problem is None and not self.score.has_fused_form:
            problem = f"the {type(self.score).__name__} score has no fused form"
        # The banded kernel computes only the window's blocks: the fastest path left.
        return ("banded", problem) if problem is not None else ("flex", None)

    def _flex(
        self,
        q: Tensor,
        q_fused: Tensor,
        scale: float,
        k: Tensor,
        v: Tensor,
        masking: Masking,
        position: PositionEncoding | None,
    ) -> Tensor:
        """The window as a block-sparse mask: q, q_fused (B, H, Tq, D), k/v (B, H, Tk, D) -> (B, H, Tq, D).

        Lengths are padded to ``bucket_length``, as global attention's are, so the compiled kernel sees a
        few shapes; padded queries see no key and padded keys lie outside every window, then are sliced off."""
        Tq, Tk = q.shape[2], k.shape[2]
        Tq_b, Tk_b = bucket_length(Tq), bucket_length(Tk)
        pad = masking.key_padding_mask
        if pad is not None and Tk_b > Tk:
            pad = F.pad(pad, (0, Tk_b - Tk), value=True)  # (B, Tk_b)
        if masking.causal:
            # Self attention, whose keys end at the last query: the window around each query's own
            # position, a function of the shapes alone, so one cached mask serves every step, and its
            # mask_mod a formula of the indices (query i sits at key index i + Tk - Tq).
            key: tuple[Hashable, ...] = ("window", Tq, Tk, Tq_b, Tk_b, True, self.window, str(q.device))

            def build() -> KeyIntervals:
                intervals = window_intervals(
                    masking.q_pos[None], masking.k_pos, self.window, causal_q_pos=masking.q_pos
                )
                rule = band_rule(Tq, Tk, causal=True, shift=Tk - Tq, window=self.window, device=q.device)
                return replace(padded_to(intervals, Tq_b, Tk_b), rule=rule)

            block_mask = cached_block_mask(key, build, pad)
        else:
            block_mask = self._centred_block_mask(q, masking, Tq_b, Tk_b, pad)
        q_fused, k, v = pad_rows(q_fused, Tq_b), pad_rows(k, Tk_b), pad_rows(v, Tk_b)  # (B, H, T_b, D)
        # The layer's positions are consecutive: the padded ones continue them.
        q_pos = masking.q_pos[:1] + torch.arange(Tq_b, device=q.device)
        k_pos = masking.k_pos[:1] + torch.arange(Tk_b, device=q.device)
        # q itself stays unpadded: an encoding reads it for the real queries only (``score_mod``)
        score_mod = position.score_mod(q, q_pos, k_pos) if position is not None else None
        out = flex_attend(q_fused, k, v, block_mask=block_mask, score_mod=score_mod, scale=scale)
        return out[:, :, :Tq]

    @torch.compiler.disable  # built eagerly, like every block mask; a compiled model takes it as an input
    def _centred_block_mask(self, q: Tensor, masking: Masking, queries: int, keys: int, pad: Tensor | None):
        """The non-causal windows' mask, built on the device on every call, never cached.

        Centres round(ratio * i) are clamped to each element's last real key, so the mask follows
        the batch's lengths and the offset between query and key positions. A cache keyed by them
        would read both back to the host on every call (a GPU stall) and miss on almost every batch;
        built from the device tensors it costs O(Tq + blocks) small kernels and no read.
        """
        rows = q.shape[0] if pad is not None else 1
        intervals = window_intervals(
            self.centres(q[:rows], masking)[:, 0], masking.k_pos, self.window, causal_q_pos=None
        )  # (rows, Tq) over the real keys
        block_mask = block_mask_from_intervals(padded_to(intervals, queries, keys), full_blocks=pad is None)
        return with_padding(block_mask, pad) if pad is not None else block_mask

    def _banded(
        self, q: Tensor, k: Tensor, v: Tensor, centre: Tensor, masking: Masking, position: PositionEncoding | None
    ) -> Tensor:
        """Blocks of queries against the slice of keys their windows can reach: linear time and memory."""
        ranges = self._block_ranges(centre, masking, k.shape[2])
        key_slices = [ks for _, ks in ranges]
        blocks = zip(
            ranges,
            q.split(self.block_size, dim=2),
            centre.split(self.block_size, dim=-1),
            take_slices(k, key_slices),
            take_slices(v, key_slices),
        )
        outs = [
            self._window_attention(q_b, k_b, v_b, c_b, masking, position, qs, ks)[0]
            for (qs, ks), q_b, c_b, k_b, v_b in blocks
        ]  # each (B, H, tq, D)
        return torch.cat(outs, dim=2)  # (B, H, Tq, D)

    @reads_host("the banded kernel slices keys by where each block's windows reach: one read per call")
    def _block_ranges(self, centre: Tensor, masking: Masking, Tk: int) -> list[tuple[slice, slice]]:
        """(query slice, key slice) per block of queries; the key slice covers every window in the block.

        All bounds are computed as tensors and read back in one transfer, so a
        CUDA run synchronises once per call rather than once per block.
        """
        B, H, Tq = centre.shape
        size = self.block_size
        n = -(-Tq // size)
        pad = n * size - Tq
        first = masking.k_pos[:1].to(centre.dtype)
        c = centre - first  # (B, H, Tq) centres as key indices
        c = torch.cat((c, c[..., -1:].expand(B, H, pad)), dim=-1).view(B, H, n, size)
        lo = (c.amin(dim=(0, 1, 3)).floor() - self.window).clamp(min=0)  # (n,)
        hi = (c.amax(dim=(0, 1, 3)).ceil() + self.window + 1).clamp(max=Tk)  # (n,)
        if masking.causal:
            # No key after the last query of the block.
            ends = (torch.arange(1, n + 1, device=c.device) * size - 1).clamp(max=Tq - 1)  # (n,)
            hi = torch.minimum(hi, masking.q_pos[ends].to(c.dtype) - first + 1)
        hi = torch.maximum(hi, lo + 1)
        bounds = torch.stack((lo, hi)).long().tolist()
        return [
            (slice(i * size, min((i + 1) * size, Tq)), slice(lo_i, hi_i)) for i, (lo_i, hi_i) in enumerate(zip(*bounds))
        ]

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, window={self.window}, mode={self.mode}, ratio={self.ratio}"


def _predictor(q: Tensor, w_p: Tensor, v_p: Tensor) -> Tensor:
    """sigmoid(v_p . tanh(W_p q)) per head: (B, H, Tq)."""
    hidden = torch.tanh(torch.einsum("bhqd,hde->bhqe", q, w_p.to(q.dtype)))  # (B, H, Tq, D)
    return torch.sigmoid(torch.einsum("bhqe,he->bhq", hidden, v_p.to(q.dtype)))


class _Slices(torch.autograd.Function):
    """Views ``x[:, :, s]`` for each slice ``s``; the backward adds every block's gradient into one buffer.

    Slicing block by block instead gives each block a backward that allocates and
    adds a gradient as large as all of ``x``: quadratic work over a long sequence.
    """

    @staticmethod
    def forward(ctx, x: Tensor, slices: list[slice]) -> tuple[Tensor, ...]:
        ctx.shape, ctx.slices = x.shape, slices
        ctx.set_materialize_grads(False)
        return tuple(x[:, :, s] for s in slices)

    @staticmethod
    @once_differentiable
    def backward(ctx, *grads: Tensor | None) -> tuple[Tensor | None, None]:
        present = [g for g in grads if g is not None]
        if not present:
            return None, None
        total = present[0].new_zeros(ctx.shape)
        for s, g in zip(ctx.slices, grads):
            if g is not None:
                total[:, :, s] += g
        return total, None


def take_slices(x: Tensor, slices: list[slice]) -> tuple[Tensor, ...]:
    """``x[:, :, s]`` for each slice, with a backward linear in the total slice length."""
    if torch.is_grad_enabled() and x.requires_grad:
        return _Slices.apply(x, slices)
    return tuple(x[:, :, s] for s in slices)
