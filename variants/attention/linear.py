"""Linear attention (Katharopoulos et al. 2020): the feature map elu(x) + 1.

sim(q, k) = phi(q) . phi(k) with phi(x) = elu(x) + 1 > 0, a positive similarity in place of
exp(q . k / sqrt(D)); everything else (prefix sums, the running-state cache) is in
``variants.attention.kernelised``.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor

from variants.attention.kernelised import KernelisedAttention
from variants.registries import ATTENTION


@ATTENTION.register("linear", references=("katharopoulos2020transformers", "ainslie2023gqa", "shazeer2019fast"))
class LinearAttention(KernelisedAttention):
    """``num_heads`` heads of d/h, each phi(q)(sum phi(k) v^T) / phi(q) . sum phi(k); ``num_kv_heads`` groups
    the key/value heads as in ``multihead``, and the cache then holds sums for the KV heads only."""

    kind = "linear"

    @property
    def num_features(self) -> int:
        return self.head_dim

    def feature_map(self, x: Tensor) -> Tensor:
        return F.elu(x) + 1.0  # (B, H, T, D), > 0: every key adds to z, so z > 0 wherever a key is visible
