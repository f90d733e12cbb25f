"""How a fused kernel's tensors are judged against the fp32 math path's: the tolerances and the comparison
that ``gpu_check``'s kernel cases and ``flex_check``'s flex cases share."""

from __future__ import annotations

import contextlib
from typing import Any

import torch

FP32_TOL = {"atol": 1e-4, "rtol": 1e-4}
LOW_PRECISION_FUDGE, LOW_PRECISION_FLOOR = 3.0, 1e-3


def max_error(got: torch.Tensor, want: torch.Tensor) -> float:
    return (got.double() - want.double()).abs().max().item() if got.numel() else 0.0


def within_tolerance(
    fused: list[torch.Tensor],
    reference: list[torch.Tensor],
    dtype: torch.dtype,
    math_low: list[torch.Tensor] | None = None,
) -> tuple[bool, float, float]:
    """(ok, error, allowed) of a fused kernel's tensors against the fp32 math path's.

    fp32: elementwise ``|fused - ref| <= atol + rtol |ref|``. Lower precision: the largest
    error may be ``LOW_PRECISION_FUDGE`` times the math path's own error at that precision
    (``math_low``) plus ``LOW_PRECISION_FLOOR``.
    """
    error = max(max_error(f, r) for f, r in zip(fused, reference, strict=True))
    if dtype == torch.float32:
        ok = all(torch.allclose(f.double(), r.double(), **FP32_TOL) for f, r in zip(fused, reference, strict=True))
        scale = max(r.double().abs().max().item() for r in reference)
        return ok, error, FP32_TOL["atol"] + FP32_TOL["rtol"] * scale
    if math_low is None:
        raise ValueError("a lower-precision comparison needs the math path's own error at that precision")
    own = max(max_error(m, r) for m, r in zip(math_low, reference, strict=True))
    allowed = LOW_PRECISION_FUDGE * own + LOW_PRECISION_FLOOR
    return error <= allowed, error, allowed


def precision(device: torch.device, dtype: torch.dtype):
    """fp32 as is; a lower precision as training uses it: fp32 weights under autocast."""
    if dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


def _params(params: dict[str, Any]) -> str:
    return "(" + ",".join(f"{k}={v}" for k, v in params.items()) + ")" if params else ""


def first_line(err: BaseException) -> str:
    """``Type: the first line of the message``: how a case that raised is named in a one-line failure."""
    return f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0]}"


def judge(
    found: dict[str, Any],
    case: str,
    got: list[torch.Tensor],
    reference: list[torch.Tensor],
    dtype: torch.dtype,
    math_low: list[torch.Tensor] | None,
) -> None:
    """One case judged into ``found`` (``counts``, ``failures``, ``worst``: the largest error seen)."""
    ok, error, allowed = within_tolerance(got, reference, dtype, math_low)
    found["counts"]["pass" if ok else "fail"] += 1
    if error > found["worst"].get("error", -1):
        found["worst"] = {"case": case, "error": error, "allowed": allowed}
    if not ok:
        found["failures"].append(f"{case}: error {error:.2e} > {allowed:.2e}")
