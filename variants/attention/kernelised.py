"""Kernelised attention: softmax(q . k) replaced by a feature-map product phi(q) . phi(k).

With weights w_ij = phi(q_i) . phi(k_j) / sum_j' phi(q_i) . phi(k_j') the output is

    o_i = phi(q_i)^T S / phi(q_i)^T z,   S = sum_j phi(k_j) v_j^T (F, D),   z = sum_j phi(k_j) (F,)

so the (Tq, Tk) matrix is never formed. Causal attention keeps prefix sums S_i, z_i over
j <= i (Katharopoulos et al. 2020: a Transformer is then an RNN), and the decoding cache
keeps S and z alone, so one decoding step costs the same at any prefix length.

Two paths, chosen once at construction:
- ``math``: the quadratic reference, the weights formed and masked as above (and returned
  when asked); its cache keeps the keys, like any other type.
- ``running_sum`` (``auto``): the sums. Causal sums run chunk by chunk: within a chunk of C
  queries the masked C x C products, across chunks the prefix sums of the chunks' own sums,
  so time is O(T (C + F) D) and memory O(T C + (T / C) F D), linear in T.
A key padding mask zeroes the padded keys' features, so they add nothing to S or z. A query
with no key to read (z = 0) reads zero.

A subclass gives ``feature_map`` (and its size ``num_features``). Encodings that bias the
scores have nowhere to go: ``supports_score_bias = False`` (see ``variants.pairs``); rotary
encodings rotate q and k before the feature map.
"""

from __future__ import annotations

import torch
from torch import Tensor

from variants.attention.layer import AttentionLayer, KVCache, RunningState
from variants.checks import VariantConfigError, positive
from variants.masking import Masking
from variants.pairs import pair_problem
from variants.position.base import PositionEncoding


class KernelisedAttention(AttentionLayer):
    default_heads = 8
    backends = ("auto", "math", "running_sum")
    supports_score_bias = False
    #: grouped key/value heads are part of what the contract tests cover
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
        chunk_size: int = 64,
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
        if self.dropout_p > 0:
            raise VariantConfigError(
                f"dropout={dropout!r} is not allowed with attention={self.kind!r}: kernelised attention never "
                "forms the weights it would drop; use 0 (model.attention_dropout=0)"
            )
        self.chunk_size = positive("chunk_size", chunk_size, integer=True)
        self.recurrent = self.backend == "running_sum"

    @property
    def rotary_relative(self) -> bool:
        # phi(R_i q) . phi(R_j k) is not a function of j - i: the feature map sees absolute angles
        return False

    @property
    def num_features(self) -> int:
        raise NotImplementedError

    def feature_map(self, x: Tensor) -> Tensor:
        """(B, H, T, D) -> (B, H, T, F), every feature >= 0."""
        raise NotImplementedError

    def on_call(self) -> None:
        """Run once at the start of every call, before any feature is computed (a schedule's hook)."""

    # -- the reference path: the weights formed ---------------------------------------------------
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
        _refuse(self, position)
        weights = kernel_weights(self.feature_map(q), self.feature_map(k), masking.dense())  # (B, H, Tq, Tk)
        return (weights @ v.to(weights.dtype)).to(v.dtype), weights

    # -- the running sums ----------------------------------------------------------------------------
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
        """As ``AttentionLayer.forward``; on ``running_sum`` a self-attention cache keeps ``RunningState``."""
        self.on_call()
        if not self.recurrent:
            return super().forward(
                query,
                key_value,
                causal=causal,
                key_padding_mask=key_padding_mask,
                position=position,
                cache=cache,
                need_weights=need_weights,
            )
        _refuse(self, position)
        return self._running_sum(query, key_value, causal, key_padding_mask, position, cache, need_weights)

    def _running_sum(
        self,
        query: Tensor,
        key_value: Tensor | None,
        causal: bool,
        key_padding_mask: Tensor | None,
        position: PositionEncoding | None,
        cache: KVCache | None,
        need_weights: bool,
    ) -> tuple[Tensor, Tensor | None]:
        """The ``running_sum`` path of ``forward``: features, then sums instead of the (Tq, Tk) weights."""
        B, Tq, _ = query.shape
        offset = cache.offset if cache is not None else 0
        q = self._split(self.w_q(query))  # (B, H, Tq, D)
        q_pos = torch.arange(offset, offset + Tq, device=query.device)
        state = None
        if key_value is None:  # self attention: the new keys sit at the query positions
            q, k, v, state, key_padding_mask = self._self_keys(query, q, q_pos, key_padding_mask, position, cache)
            k_pos = q_pos
        else:  # cross attention: the memory is projected once per cache
            q, k, v, k_pos = self._memory(q, q_pos, key_value, position, cache)
        if cache is not None:
            cache.offset = offset + Tq
        if key_padding_mask is not None and key_padding_mask.shape != (B, k.shape[2]):
            raise ValueError(
                f"key_padding_mask has shape {tuple(key_padding_mask.shape)}; expected (B, Tk) = {(B, k.shape[2])}"
            )
        if need_weights and state is not None:
            raise ValueError(
                "need_weights=True cannot be answered once a running-state cache holds earlier keys; "
                "ask for weights on a full call (or use backend='math')"
            )

        phi_q = self.feature_map(q)  # (B, H, Tq, F)
        phi_k = self.feature_map(k)  # (B, H_kv, Tk, F)
        if key_padding_mask is not None:
            phi_k = phi_k.masked_fill(key_padding_mask[:, None, :, None], 0.0)
        causal = causal and key_value is None  # a memory is read whole
        out = self._read_sums(phi_q, phi_k, v, state, causal, cache if key_value is None else None)  # (B, H, Tq, D)
        weights = None
        if need_weights:
            masking = Masking(q_pos=q_pos, k_pos=k_pos, causal=causal, key_padding_mask=key_padding_mask)
            weights = kernel_weights(phi_q, self._share_kv(phi_k), masking.dense())
        return self.w_o(self._merge(out)), weights

    def _self_keys(
        self,
        query: Tensor,
        q: Tensor,
        q_pos: Tensor,
        key_padding_mask: Tensor | None,
        position: PositionEncoding | None,
        cache: KVCache | None,
    ) -> tuple[Tensor, Tensor, Tensor, RunningState | None, Tensor | None]:
        """Self attention's q, k, v (rotated), the cache's running state and the mask of these keys alone.

        q (B, H, Tq, D) in; returns q (B, H, Tq, D), k and v (B, H_kv, Tq, D), the state, the mask (B, Tq).
        """
        B, Tq = q.shape[0], q.shape[2]
        k = self._split(self.w_k(query))  # (B, H_kv, Tq, D)
        v = self._split(self.w_v(query))
        if position is not None:
            q, k = position.rotate(q, k, q_pos, q_pos)
        state = cache.state if cache is not None else None
        seen = state.keys if state is not None else 0
        if key_padding_mask is not None and key_padding_mask.shape == (B, seen + Tq):
            key_padding_mask = key_padding_mask[:, seen:]  # a cached call's mask covers every key so far
        return q, k, v, state, key_padding_mask

    def _read_sums(
        self,
        phi_q: Tensor,
        phi_k: Tensor,
        v: Tensor,
        state: RunningState | None,
        causal: bool,
        cache: KVCache | None,
    ) -> Tensor:
        """phi_q (B, H, Tq, F), phi_k (B, H_kv, Tk, F), v (B, H_kv, Tk, D) -> output (B, H, Tq, D).

        Causal self attention reads prefix sums chunk by chunk, anything else the full sums; a self-attention
        ``cache`` keeps the sums over every key so far for the next call.
        """
        group = self.num_heads // self.num_kv_heads
        grouped = phi_q.unflatten(1, (self.num_kv_heads, group))  # (B, H_kv, G, Tq, F): head h reads KV head h // G
        values = v.to(phi_k.dtype)
        if causal:
            num, den, kv, k_sum = causal_sums(grouped, phi_k, values, state, self.chunk_size)
        else:
            num, den, kv, k_sum = full_sums(grouped, phi_k, values, state)
        if cache is not None:
            keys = (state.keys if state is not None else 0) + phi_q.shape[2]
            cache.state = RunningState(kv=kv, k_sum=k_sum, keys=keys)
        # num is exactly 0 where den is (no key to read), so a query with no key reads zero
        out = num / torch.where(den > 0, den, torch.ones_like(den))  # (B, H_kv, G, Tq, D)
        return out.flatten(1, 2).to(v.dtype)  # (B, H, Tq, D)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, num_features={self.num_features}, chunk_size={self.chunk_size}"


def _refuse(layer: KernelisedAttention, position: PositionEncoding | None) -> None:
    """A call with an encoding the type cannot take would silently drop its term: refuse it."""
    problem = None if position is None else pair_problem(layer, position)
    if problem is not None:
        raise VariantConfigError(f"attention={layer.kind!r} cannot take position {type(position).__name__}: {problem}")


def kernel_weights(phi_q: Tensor, phi_k: Tensor, allowed: Tensor | None) -> Tensor:
    """phi_q (B, H, Tq, F), phi_k (B, H, Tk, F) -> weights (B, H, Tq, Tk), each row summing to 1 over
    its allowed keys (all zero when it has none)."""
    scores = phi_q @ phi_k.transpose(-2, -1)  # (B, H, Tq, Tk), >= 0
    if allowed is not None:
        scores = scores.masked_fill(~allowed, 0.0)
    total = scores.sum(-1, keepdim=True)
    return scores / torch.where(total > 0, total, torch.ones_like(total))


def full_sums(
    phi_q: Tensor, phi_k: Tensor, v: Tensor, state: RunningState | None
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Every query reads every key: phi_q (B, H_kv, G, Tq, F), phi_k (B, H_kv, Tk, F), v (B, H_kv, Tk, D).

    Returns the numerator (B, H_kv, G, Tq, D), the denominator (B, H_kv, G, Tq, 1) and the
    sums S (B, H_kv, F, D) and z (B, H_kv, F) over the state's keys and these.
    """
    kv = phi_k.transpose(-2, -1) @ v  # (B, H_kv, F, D)
    k_sum = phi_k.sum(-2)  # (B, H_kv, F)
    if state is not None:
        kv, k_sum = kv + state.kv, k_sum + state.k_sum
    num = phi_q @ kv[:, :, None]  # (B, H_kv, G, Tq, D)
    den = phi_q @ k_sum[:, :, None, :, None]  # (B, H_kv, G, Tq, 1)
    return num, den, kv, k_sum


def causal_sums(
    phi_q: Tensor, phi_k: Tensor, v: Tensor, state: RunningState | None, chunk: int
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Query i reads keys j <= i (and the state's): shapes as ``full_sums``, Tq = Tk = T."""
    B, Hkv, G, T, F = phi_q.shape
    D = v.shape[-1]
    pad = (-T) % chunk
    if pad:  # zero features add nothing to any sum
        phi_q = torch.nn.functional.pad(phi_q, (0, 0, 0, pad))
        phi_k = torch.nn.functional.pad(phi_k, (0, 0, 0, pad))
        v = torch.nn.functional.pad(v, (0, 0, 0, pad))
    n = (T + pad) // chunk
    qc = phi_q.unflatten(-2, (n, chunk))  # (B, H_kv, G, n, C, F)
    kc = phi_k.unflatten(-2, (n, chunk))  # (B, H_kv, n, C, F)
    vc = v.unflatten(-2, (n, chunk))  # (B, H_kv, n, C, D)

    # Across chunks: each chunk's own sums, then the sums of every chunk before it.
    kv_chunk = kc.transpose(-2, -1) @ vc  # (B, H_kv, n, F, D)
    k_sum_chunk = kc.sum(-2)  # (B, H_kv, n, F)
    kv_before = exclusive_cumsum(kv_chunk)  # (B, H_kv, n, F, D)
    k_sum_before = exclusive_cumsum(k_sum_chunk)  # (B, H_kv, n, F)
    if state is not None:
        kv_before = kv_before + state.kv[:, :, None]
        k_sum_before = k_sum_before + state.k_sum[:, :, None]
    num = qc @ kv_before[:, :, None]  # (B, H_kv, G, n, C, D)
    den = qc @ k_sum_before[:, :, None, :, :, None]  # (B, H_kv, G, n, C, 1)

    # Within a chunk: the masked C x C products, as in the quadratic form.
    within = qc @ kc[:, :, None].transpose(-2, -1)  # (B, H_kv, G, n, C, C)
    later = torch.ones(chunk, chunk, dtype=torch.bool, device=within.device).triu(1)
    within = within.masked_fill(later, 0.0)
    num = num + within @ vc[:, :, None]
    den = den + within.sum(-1, keepdim=True)

    kv = kv_chunk.sum(2)  # (B, H_kv, F, D)
    k_sum = k_sum_chunk.sum(2)  # (B, H_kv, F)
    if state is not None:
        kv, k_sum = kv + state.kv, k_sum + state.k_sum
    num = num.flatten(3, 4)[..., :T, :]  # (B, H_kv, G, T, D)
    den = den.flatten(3, 4)[..., :T, :]  # (B, H_kv, G, T, 1)
    return num, den, kv.reshape(B, Hkv, F, D), k_sum


def exclusive_cumsum(x: Tensor) -> Tensor:
    """Sums over the chunks strictly before each one, along dim 2.

    Shifted rather than ``cumsum - x``: (a + b) - b is not a in floating point, and a later
    key would then move an earlier query's output by an ulp.
    """
    summed = x.cumsum(2)
    return torch.cat((torch.zeros_like(summed[:, :, :1]), summed[:, :, :-1]), dim=2)
