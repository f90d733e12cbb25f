"""Fused attention kernels behind one signature, each tested equal to the math path.

``fused_attention(q, k, v, *, allowed, bias, scale, dropout_p, causal_square, backend)``
computes softmax(scale * q k^T + bias, masked by ``allowed``) v.

- ``sdpa``: torch.nn.functional.scaled_dot_product_attention (flash / memory-efficient
  kernels on CUDA, a fused C++ kernel on CPU);
- ``xformers``: xformers.ops.memory_efficient_attention, CUDA only;
- ``banded``: local attention computed block by block (``variants.attention.local``);
- ``running_sum``: kernelised attention through sums over keys, prefix sums when causal
  (``variants.attention.kernelised``), linear in T; its cache holds the sums, not the keys;
- ``flex``: FlexAttention (``variants.flex``): score biases as ``score_mod`` functions of indices and
  causal, padding and sliding windows as a block-sparse ``mask_mod``, compiled into one kernel on
  CUDA; forward only on CPU. Predictive local attention (a Gaussian after the softmax) and the
  additive score have no flex form.

``auto`` picks the first fast backend a type lists (``sdpa``, ``banded``, ``running_sum``), else
``math``; on CUDA it picks ``flex`` instead for a call with a score bias or a window
(``auto_backend``), never on CPU, where flex has no backward; a layer's plan then keeps the kernel that
needs no compile where the call is too short for flex to pay (``variants.flex_cost``).
"""

from __future__ import annotations

import functools
import importlib.util

import torch
import torch.nn.functional as F
from torch import Tensor

from variants.checks import VariantConfigError, one_of

BACKENDS = ("auto", "math", "sdpa", "xformers", "banded", "running_sum", "flex")
_AUTO_ORDER = ("sdpa", "banded", "running_sum")


# Where the xformers probe runs (a test points it at the CPU to probe a mocked xformers).
_PROBE_DEVICE = "cuda"


@functools.lru_cache(maxsize=1)
def xformers_unavailable() -> str | None:
    """Why xformers cannot run here, in one line, or None when it can (probed once per process).

    Importing is not enough: an xformers built for another torch imports, then has no
    operator for any input (``NotImplementedError: No operator found for
    memory_efficient_attention_forward``). So the probe runs one tiny call.
    """
    if not torch.cuda.is_available():
        return "xformers needs a CUDA device and none is visible"
    if importlib.util.find_spec("xformers") is None:
        return "the xformers package is not installed (pip install 'attnlab[gpu]')"
    try:
        import xformers.ops as xops

        q = torch.zeros(1, 8, 1, 16, dtype=torch.float16, device=_PROBE_DEVICE)  # (B, T, H, D)
        xops.memory_efficient_attention(q, q, q)
    except Exception as err:  # noqa: BLE001 - whatever stops it, xformers is not usable here
        first = (str(err).strip().splitlines() or [""])[0]
        return f"xformers is installed but a memory_efficient_attention call fails: {type(err).__name__}: {first}"
    return None


def xformers_available() -> bool:
    return xformers_unavailable() is None


def check_backend(backend: str, supported: tuple[str, ...], attention: str) -> str:
    """Resolve ``auto`` once, at construction, and reject what cannot run here."""
    one_of("backend", backend, BACKENDS)
    if backend not in supported:
        raise VariantConfigError(
            f"backend={backend!r} is not supported by attention={attention!r}; allowed: {list(supported)}"
        )
    if backend == "xformers" and not xformers_available():
        here = [b for b in supported if b != "xformers"]
        raise VariantConfigError(f"backend='xformers' cannot run here: {xformers_unavailable()}; allowed here: {here}")
    if backend == "auto":
        return auto_backend(supported, cuda=torch.cuda.is_available(), biased=False)
    return backend


def auto_backend(supported: tuple[str, ...], *, cuda: bool, biased: bool) -> str:
    """What ``auto`` runs for a call: ``biased`` when a score bias or a window restricts the scores.

    On CUDA a biased call goes to ``flex`` (SDPA's flash kernel takes no bias; a dense bias is a
    T x T tensor); an unbiased one to SDPA (flash / memory-efficient). On CPU, where flex has no
    backward, the choices stay those of ``_AUTO_ORDER``.
    """
    if cuda and biased and "flex" in supported:
        return "flex"
    return next((b for b in _AUTO_ORDER if b in supported), "math")


def _float_mask(allowed: Tensor | None, bias: Tensor | None, dtype: torch.dtype) -> Tensor | None:
    if bias is None:
        return allowed
    bias = bias.to(dtype)
    if allowed is None:
        return bias
    return bias.masked_fill(~allowed, float("-inf"))


def fused_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    allowed: Tensor | None,
    bias: Tensor | None,
    scale: float,
    dropout_p: float,
    causal_square: bool,
    backend: str,
) -> Tensor:
    """q (B, H, Tq, D), k/v (B, H, Tk, D); ``allowed`` (B|1, 1, Tq, Tk) bool; ``bias`` (B|1, H, Tq, Tk).

    ``causal_square`` says the mask is exactly the lower triangle of a square
    matrix, which lets the kernel skip the mask tensor (and use flash on CUDA).
    """
    if backend == "xformers":
        return _xformers(
            q, k, v, allowed=allowed, bias=bias, scale=scale, dropout_p=dropout_p, causal_square=causal_square
        )
    if backend != "sdpa":
        raise VariantConfigError(f"backend={backend!r} has no fused kernel; allowed: ['sdpa', 'xformers']")
    if causal_square and bias is None:
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True, scale=scale)
        return out
    mask = _float_mask(allowed, bias, q.dtype)
    if mask is not None and mask.dtype == torch.bool:
        mask = mask.expand(q.shape[0], q.shape[1], -1, -1) if mask.shape[0] == 1 else mask
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=scale)
    if allowed is not None:
        # A query with no allowed key gets zeros, as in the math path (SDPA gives NaN).
        out = out.masked_fill(~allowed.any(-1, keepdim=True), 0.0)
    return out


def _xformers(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    allowed: Tensor | None,
    bias: Tensor | None,
    scale: float,
    dropout_p: float,
    causal_square: bool,
) -> Tensor:
    import xformers.ops as xops  # optional dependency, CUDA only

    B, H, Tq, D = q.shape
    Tk = k.shape[2]
    attn_bias = None
    if causal_square and bias is None:
        attn_bias = xops.LowerTriangularMask()
    else:
        mask = _float_mask(allowed, bias, q.dtype)
        if mask is not None:
            if mask.dtype == torch.bool:
                mask = torch.zeros(mask.shape, dtype=q.dtype, device=q.device).masked_fill(~mask, float("-inf"))
            # xformers wants a (B, H, Tq, Tk) bias whose last dim is 8-aligned in memory.
            pad = (-Tk) % 8
            storage = torch.zeros(B, H, Tq, Tk + pad, dtype=q.dtype, device=q.device)
            storage[..., :Tk] = mask.expand(B, H, Tq, Tk)
            attn_bias = storage[..., :Tk]
    out = xops.memory_efficient_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_bias=attn_bias, p=dropout_p, scale=scale
    )  # (B, Tq, H, D)
    out = out.transpose(1, 2)
    if allowed is not None:
        out = out.masked_fill(~allowed.any(-1, keepdim=True), 0.0)
    return out
