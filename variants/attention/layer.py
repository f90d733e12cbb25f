"""The attention layer: projections, head split, position hooks and the key/value cache.

A registered attention type subclasses ``AttentionLayer`` and implements
``attend``, which decides how scores become weights and outputs. Everything a
type needs arrives by name; no type ever asks which position encoding it got.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from variants.attention.scores import SCORES, Dot, ScaledDot, Score, build_score
from variants.checks import heads_divide, kv_heads_divide, probability
from variants.flex import head_dim_problem
from variants.flex_cost import FAMILIES, flex_loses
from variants.kernels import auto_backend, check_backend
from variants.masking import Masking, masked_softmax
from variants.position.base import PositionEncoding


@dataclass
class RunningState:
    """A recurrent type's sums over every key so far: what one more query needs, whatever T."""

    kv: Tensor  # (B, H_kv, F, D): sum_j phi(k_j) v_j^T
    k_sum: Tensor  # (B, H_kv, F): sum_j phi(k_j)
    keys: int  # how many keys (padded ones included) went into the sums


@dataclass
class KVCache:
    """Per-layer state for incremental decoding; one instance per layer and sequence batch.

    Self-attention appends the new keys (already rotated) and values; cross-attention
    projects the memory once and keeps the raw keys, since rotary encodings rotate
    them by key position on every call.
    """

    k: Tensor | None = None  # (B, H_kv, T_cached, D): only the key/value heads, not the query heads
    v: Tensor | None = None  # (B, H_kv, T_cached, D)
    #: a recurrent type's running sums over every key so far, in place of ``k`` and ``v``
    state: RunningState | None = None
    #: position of the next query; a fresh cache with ``offset=c`` places the sequence at c, c+1, ...
    offset: int = 0


class AttentionLayer(nn.Module):
    #: heads used when the caller does not name a number
    default_heads: int = 1
    #: kernels this type can run on; ``auto`` picks the first fused one it has (per call on CUDA:
    #: ``flex`` for a call with a score bias or a window, see ``call_backend``)
    backends: tuple[str, ...] = ("auto", "math")
    #: registry name, set for error messages
    kind: str = "attention"
    #: discrete constructor choices, for sweeps and tests (see ``Registry.variations``)
    options: dict[str, tuple] = {"score": SCORES}
    #: True when the type forms the (Tq, Tk) score matrix, so an encoding may add a bias to it
    #: or mix the weights into the values (see ``variants.pairs``); kernelised types do not
    supports_score_bias: bool = True
    #: True when the self-attention cache holds a fixed-size running state (``KVCache.state``)
    #: instead of every key and value
    recurrent: bool = False
    #: the row of ``variants.flex_cost.FLEX_PAYS`` that decides where ``auto``'s flex pays for this type
    flex_family: str = "score_mod"

    def __init__(
        self,
        d_model: int,
        num_heads: int | None = None,
        *,
        dropout: float = 0.0,
        bias: bool = True,
        score: str = "scaled_dot",
        backend: str = "auto",
        num_kv_heads: int | None = None,
    ) -> None:
        super().__init__()
        num_heads = self.default_heads if num_heads is None else num_heads
        heads_divide(d_model, num_heads)
        self.d_model, self.num_heads, self.head_dim = d_model, num_heads, d_model // num_heads
        # Grouped key/value heads (Ainslie et al. 2023): each KV head serves num_heads / num_kv_heads
        # query heads; 1 is multi-query attention (Shazeer 2019). The cache then holds only the KV heads.
        self.num_kv_heads = kv_heads_divide(num_heads, num_kv_heads)
        kv_dim = self.num_kv_heads * self.head_dim
        self.dropout_p = probability("dropout", dropout)
        self.backend = check_backend(backend, self.backends, self.kind)
        #: ``auto`` is settled per call by the tensors' device and the call's bias (``call_backend``)
        self.auto = backend == "auto"
        self.score: Score = build_score(score, num_heads, self.head_dim)
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, kv_dim, bias=bias)
        self.w_v = nn.Linear(d_model, kv_dim, bias=bias)
        self.w_o = nn.Linear(d_model, d_model, bias=bias)
        self.weight_dropout = nn.Dropout(dropout)

    @property
    def rotary_relative(self) -> bool:
        """Whether rotating q and k by their positions leaves the layer depending on positions
        only through j - i: true when the score is a dot product, R_i q . R_j k = q . R_(j-i) k,
        and nothing else reads the rotated vectors."""
        return isinstance(self.score, (ScaledDot, Dot))

    @property
    def auto_choices(self) -> tuple[str, ...]:
        """The backends ``auto`` may pick from for this layer."""
        return self.backends

    def call_backend(self, *, cuda: bool, biased: bool) -> str:
        """The backend of one call: the one asked for, or what ``auto`` picks on the call's device for a
        call with (``biased``) or without a score bias or window: flex only on CUDA, never on CPU."""
        if not self.auto:
            return self.backend
        return auto_backend(self.auto_choices, cuda=cuda, biased=biased)

    def plan(
        self,
        position: PositionEncoding | None,
        *,
        cuda: bool,
        need_weights: bool = False,
        keys: int | None = None,
        dtype: torch.dtype | None = None,
    ) -> str:
        """The path a call with ``position`` runs on (a backend name), before it runs; a type whose
        paths fall back (no fused form, dropout, a layer flex cannot run, a call too short for flex to
        pay, see ``variants.flex_cost``) says so here, and its ``attend`` follows this. ``keys`` is the
        longer of the call's query and key lengths and ``dtype`` its tensors' (None: a plan for a
        whole run, where only the head width and the table's planning dtype decide). ``explain`` gives
        the reason of a fallback."""
        return self.explain(position, cuda=cuda, need_weights=need_weights, keys=keys, dtype=dtype)[0]

    def explain(
        self,
        position: PositionEncoding | None,
        *,
        cuda: bool,
        need_weights: bool = False,
        keys: int | None = None,
        dtype: torch.dtype | None = None,
    ) -> tuple[str, str | None]:
        """(the path ``plan`` names, why it is not the one asked for or ``auto``'s first pick, or None)."""
        backend, why = self.route(position, cuda=cuda, need_weights=need_weights)
        if backend == "flex" and why is None and self.auto:
            # auto's flex only where it beats the kernel that needs no compile (variants.flex_cost)
            loses = flex_loses(self.flex_family, keys=keys, head_dim=self.head_dim, dtype=dtype)
            if loses is not None:
                return FAMILIES[self.flex_family], loses
        return backend, why

    def route(self, position: PositionEncoding | None, *, cuda: bool, need_weights: bool) -> tuple[str, str | None]:
        """``explain`` by capability alone, whatever a call's length: what a type with fallbacks overrides."""
        return self.call_backend(cuda=cuda, biased=position is not None and position.has_score_bias), None

    def flex_problem(self, position: PositionEncoding | None, *, cuda: bool) -> str | None:
        """Why this layer's call with ``position`` cannot run (or train) on flex on the device, or None.

        Checked from declarations when the plan is made, so a layer flex cannot run never reaches
        the kernel: the head width on CUDA, dropout in training (flex has none), an encoding whose
        terms flex does not carry, and one whose score_mod flex's backward cannot compile. The last
        follows grad mode, not ``self.training``: a layer in ``eval()`` whose call is differentiated
        (a probe, a gradient check) needs the backward all the same."""
        problem = head_dim_problem(self.head_dim, cuda=cuda)
        if problem is not None:
            return problem
        if self.training and self.dropout_p > 0:
            return "dropout in training, which flex does not apply"
        if position is not None and not position.flex_ready:
            return f"{type(position).__name__} adds a term flex does not carry"
        if position is not None and torch.is_grad_enabled() and position.has_score_mod and not position.flex_trains:
            return f"{type(position).__name__}'s score_mod has no flex backward"
        return None

    # -- head split -------------------------------------------------------------------------
    def _split(self, x: Tensor) -> Tensor:
        B, T, C = x.shape
        return x.view(B, T, C // self.head_dim, self.head_dim).transpose(1, 2)  # (B, H or H_kv, T, D)

    def _share_kv(self, x: Tensor) -> Tensor:
        """(B, H_kv, T, D) -> (B, H, T, D): query head h reads KV head h // (H / H_kv)."""
        group = self.num_heads // self.num_kv_heads
        return x if group == 1 else x.repeat_interleave(group, dim=1)

    def _merge(self, x: Tensor) -> Tensor:
        B, H, T, D = x.shape
        return x.transpose(1, 2).reshape(B, T, H * D)  # (B, T, d_model)

    # -- the call ---------------------------------------------------------------------------
    def _memory(
        self, q: Tensor, q_pos: Tensor, key_value: Tensor, position: PositionEncoding | None, cache: KVCache | None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Cross attention's keys and values: the memory projected once per cache, then rotated with q.

        Returns (q, k, v, k_pos): q (B, H, Tq, D); k, v (B, H_kv, Tk, D); k_pos (Tk,).
        """
        if cache is not None and cache.k is not None and cache.v is not None:
            k, v = cache.k, cache.v
        else:
            k = self._split(self.w_k(key_value))
            v = self._split(self.w_v(key_value))
            if cache is not None:
                cache.k, cache.v = k, v
        k_pos = torch.arange(k.shape[2], device=q.device)
        if position is not None:
            q, k = position.rotate(q, k, q_pos, k_pos)
        return q, k, v, k_pos

    def forward(
        self,
        query: Tensor,
        key_value: Tensor | None = None,
        *,
        causal: bool = False,
        key_padding_mask: Tensor | None = None,
        position: PositionEncoding | None = None,
        cache: KVCache | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """query (B, Tq, d_model); key_value (B, Tk, d_model) for cross attention.

        ``key_padding_mask`` (B, Tk) is True at padded keys; with a self-attention
        cache it covers every key so far. Returns the output (B, Tq, d_model) and,
        when asked, the weights (B, H, Tq, Tk).
        """
        B, Tq, _ = query.shape
        offset = cache.offset if cache is not None else 0
        q = self._split(self.w_q(query))  # (B, H, Tq, D)
        q_pos = torch.arange(offset, offset + Tq, device=query.device)

        if key_value is None:  # self attention: new keys sit at the query positions
            k = self._split(self.w_k(query))
            v = self._split(self.w_v(query))
            if position is not None:
                q, k = position.rotate(q, k, q_pos, q_pos)
            if cache is not None:
                if cache.k is not None and cache.v is not None:
                    k = torch.cat((cache.k, k), dim=2)
                    v = torch.cat((cache.v, v), dim=2)
                cache.k, cache.v = k, v
            # The newest key sits at the newest query position, whatever the cache held.
            k_pos = torch.arange(offset + Tq - k.shape[2], offset + Tq, device=query.device)
        else:  # cross attention: the memory is projected once per cache
            q, k, v, k_pos = self._memory(q, q_pos, key_value, position, cache)
        if cache is not None:
            cache.offset = offset + Tq

        if key_padding_mask is not None and key_padding_mask.shape != (B, k.shape[2]):
            raise ValueError(
                f"key_padding_mask has shape {tuple(key_padding_mask.shape)}; expected (B, Tk) = {(B, k.shape[2])}"
            )
        masking = Masking(
            q_pos=q_pos, k_pos=k_pos, causal=causal and key_value is None, key_padding_mask=key_padding_mask
        )
        k, v = self._share_kv(k), self._share_kv(v)  # (B, H, Tk, D), after the cache kept only H_kv
        out, weights = self.attend(q, k, v, masking=masking, position=position, need_weights=need_weights)
        return self.w_o(self._merge(out)), (weights if need_weights else None)

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
        """q (B, H, Tq, D), k/v (B, H, Tk, D) -> output (B, H, Tq, D), weights (B, H, Tq, Tk) or None."""
        raise NotImplementedError

    # -- shared pieces of the reference path --------------------------------------------------
    def logits(self, q: Tensor, k: Tensor, q_pos: Tensor, k_pos: Tensor, position: PositionEncoding | None) -> Tensor:
        """Scores plus any relative bias: (B, H, Tq, Tk)."""
        scores = self.score(q, k)
        if position is not None:
            bias = position.score_bias(q, q_pos, k_pos)
            if bias is not None:
                scores = scores + bias
        return scores

    def mix(
        self, weights: Tensor, v: Tensor, q_pos: Tensor, k_pos: Tensor, position: PositionEncoding | None
    ) -> Tensor:
        """Weighted values plus any relative value term: (B, H, Tq, D)."""
        out = weights @ v
        if position is not None:
            extra = position.value_term(weights, q_pos, k_pos)
            if extra is not None:
                out = out + extra
        return out

    def soft_reference(
        self, q: Tensor, k: Tensor, v: Tensor, masking: Masking, position: PositionEncoding | None
    ) -> tuple[Tensor, Tensor]:
        """The readable path: logits, mask, softmax, dropout, weighted sum."""
        scores = self.logits(q, k, masking.q_pos, masking.k_pos, position)
        weights = masked_softmax(scores, masking.dense())
        dropped = self.weight_dropout(weights)
        return self.mix(dropped, v, masking.q_pos, masking.k_pos, position), weights

    def extra_repr(self) -> str:
        return (
            f"d_model={self.d_model}, num_heads={self.num_heads}, num_kv_heads={self.num_kv_heads}, "
            f"score={type(self.score).__name__}, backend={self.backend}, dropout={self.dropout_p}"
        )
