"""Performer attention (Choromanski et al. 2021): FAVOR+, positive orthogonal random features.

With x = q / D^(1/4), y = k / D^(1/4) and w_1 .. w_m drawn from N(0, I_D),

    phi(x) = exp(W x - |x|^2 / 2) / sqrt(m),   E[phi(x) . phi(y)] = exp(x . y) = exp(q . k / sqrt(D)),

an unbiased estimate of the softmax kernel whose every feature is positive, so the estimated
weights never go negative and their normaliser never nears zero. The rows of W are orthogonal
within each block of D (Gram-Schmidt through QR), each scaled to the length of a Gaussian
vector, which lowers the estimate's variance further. As m grows the output converges to
exact softmax attention. The exponent never overflows: w . x - |x|^2 / 2 <= |w|^2 / 2.

``redraw_every`` = n > 0 draws new features every n training calls of the layer (one per
training batch in a model), as the paper does to keep one unlucky draw from steering
training; 0 keeps the features of initialisation. Draw r comes from a generator seeded with
the layer's ``feature_seed`` plus r, and the seed, the features and the call count are buffers,
so a resumed run and every DDP rank use the same features.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from variants.attention.kernelised import KernelisedAttention
from variants.checks import non_negative_int, positive
from variants.registries import ATTENTION


def orthogonal_gaussian(num_features: int, dim: int, generator: torch.Generator) -> Tensor:
    """(m, D): blocks of D orthonormal rows, each row rescaled to the norm of a N(0, I_D) vector."""
    blocks = []
    for _ in range(-(-num_features // dim)):
        square = torch.randn(dim, dim, generator=generator)
        q, r = torch.linalg.qr(square)
        q = q * torch.sign(torch.diagonal(r))[None, :]  # the sign fix makes q Haar-distributed
        blocks.append(q.t())  # rows orthonormal
    rows = torch.cat(blocks)[:num_features]  # (m, D)
    lengths = torch.randn(num_features, dim, generator=generator).norm(dim=1)  # (m,): chi with D degrees
    return rows * lengths[:, None]


@ATTENTION.register("performer", references=("choromanski2021rethinking", "ainslie2023gqa", "shazeer2019fast"))
class PerformerAttention(KernelisedAttention):
    """FAVOR+ with ``num_features`` random features shared by every head of the layer."""

    kind = "performer"
    # buffers: the seed, training calls and draws so far (0-d int64), the current features (m, D)
    feature_seed: Tensor
    calls: Tensor
    draws: Tensor
    projection: Tensor

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
        num_features: int = 64,
        redraw_every: int = 0,
    ) -> None:
        super().__init__(
            d_model,
            num_heads,
            dropout=dropout,
            bias=bias,
            backend=backend,
            num_kv_heads=num_kv_heads,
            chunk_size=chunk_size,
        )
        self.m = positive("num_features", num_features, integer=True)
        self.redraw_every = non_negative_int("redraw_every", redraw_every)
        # from the global generator, so a seeded model draws the same features every time
        seed = int(torch.randint(0, 2**62, (), dtype=torch.int64))
        self.register_buffer("feature_seed", torch.tensor(seed, dtype=torch.int64))
        self.register_buffer("calls", torch.zeros((), dtype=torch.int64))
        self.register_buffer("draws", torch.zeros((), dtype=torch.int64))
        self.register_buffer("projection", self.draw(0))  # (m, D)

    @property
    def num_features(self) -> int:
        return self.m

    def draw(self, index: int) -> Tensor:
        """The features of draw ``index``: (m, D), the same for the same seed and index."""
        generator = torch.Generator().manual_seed(int(self.feature_seed) + index)
        return orthogonal_gaussian(self.m, self.head_dim, generator)

    @torch.compiler.disable
    def on_call(self) -> None:
        """Count a training call and draw new features every ``redraw_every`` of them."""
        if not (self.training and self.redraw_every):
            return
        self.calls += 1
        if int(self.calls) % self.redraw_every == 0:
            self.draws += 1
            self.projection.copy_(self.draw(int(self.draws)))

    def batched_members_problem(self) -> str | None:
        """Why seeds of this layer cannot train as one batched model (``experiments.ensemble``), or None."""
        if self.redraw_every:
            return (
                f"redraw_every={self.redraw_every} redraws the random features inside the forward pass, "
                "a buffer update the batched step does not carry per member"
            )
        return None

    def feature_map(self, x: Tensor) -> Tensor:
        dtype = torch.promote_types(x.dtype, torch.float32)  # exp in half precision loses the small features
        x = x.to(dtype) * self.head_dim**-0.25  # (B, H, T, D): phi(x) . phi(y) estimates exp(q . k / sqrt(D))
        projected = x @ self.projection.to(dtype).t()  # (B, H, T, m)
        return torch.exp(projected - x.square().sum(-1, keepdim=True) / 2) / math.sqrt(self.m)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, redraw_every={self.redraw_every}"
