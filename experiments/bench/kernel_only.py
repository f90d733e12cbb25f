"""Local attention's window against full causal attention, the attention call alone.

The layer-level target (``gpu_targets``) times the whole layer, whose QKV and output projections
cost the same for local and soft attention: at d_model 1024 they set a floor under the ratio however
fast the window's kernel is. These closures time only the call that differs: flex over the causal
window's block mask against SDPA's causal flash kernel, on the same (B, H, T, D) tensors, forward
and backward.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from variants.flex import block_mask_from_intervals, flex_attend, window_intervals


def window_block_mask(T: int, window: int, device: torch.device):
    """The causal window's mask as local attention builds it: query i sees keys i - window .. i."""
    pos = torch.arange(T, device=device)
    return block_mask_from_intervals(window_intervals(pos[None], pos, window, causal_q_pos=pos))


def qkv(batch: int, heads: int, T: int, head_dim: int, device: torch.device, dtype: torch.dtype, *, grad: bool):
    torch.manual_seed(0)
    return [
        torch.randn(batch, heads, T, head_dim, device=device, dtype=dtype, requires_grad=grad) for _ in range(3)
    ]  # each (B, H, T, D)


def window_attention(q: Tensor, k: Tensor, v: Tensor, block_mask) -> Tensor:
    """(B, H, T, D) -> (B, H, T, D) over the window of ``block_mask``, on flex."""
    return flex_attend(q, k, v, block_mask=block_mask, score_mod=None, scale=1.0 / math.sqrt(q.shape[-1]))


def kernel_steps(
    batch: int, heads: int, T: int, head_dim: int, window: int, device: torch.device, dtype: torch.dtype
) -> dict[str, Callable[[], None]]:
    """Forward + backward of the two attention calls on the same tensors, named as the report shows them."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q, k, v = qkv(batch, heads, T, head_dim, device, dtype, grad=True)
    grad = torch.randn_like(q)
    mask = window_block_mask(T, window, device)

    def clear() -> None:
        for t in (q, k, v):
            t.grad = None

    def local() -> None:
        clear()
        window_attention(q, k, v, mask).backward(grad)

    def flash() -> None:
        clear()
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(grad)

    return {"local/flex kernel": local, "causal/flash kernel": flash}
