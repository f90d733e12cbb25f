"""The kernel checks: every fused attention path and every FlexAttention pair against the math path."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator
from typing import Any

import torch

from experiments.diagnostics.gpu_check.registry import CheckFailed, Skip, check, need_cuda
from experiments.diagnostics.kernel_compare import _params, first_line, judge, precision


def kernel_choices(device: torch.device) -> list[tuple[str, str, Any]]:
    """(label, backend, SDPA kernel to force or None) for what this device offers; xformers only
    where a call of it runs (``variants.kernels.xformers_unavailable``)."""
    from variants.kernels import xformers_available

    if device.type != "cuda":
        return [("sdpa", "sdpa", None)]
    from torch.nn.attention import SDPBackend

    choices = [
        ("sdpa-flash", "sdpa", SDPBackend.FLASH_ATTENTION),
        ("sdpa-efficient", "sdpa", SDPBackend.EFFICIENT_ATTENTION),
    ]
    if xformers_available():
        choices.append(("xformers", "xformers", None))
    return choices


@contextlib.contextmanager
def forced(kernel: Any) -> Iterator[None]:
    if kernel is None:
        yield
        return
    from torch.nn.attention import sdpa_kernel

    with sdpa_kernel([kernel]):
        yield


CALLS = ("self", "causal", "cross")


def layer_run(layer, pos, call: str, device: torch.device, dtype: torch.dtype, seed: int = 1) -> list[torch.Tensor]:
    """One call pattern (keys padded in element 1, except the causal call): the output and the
    input's gradient, as fp32 for comparing."""
    gen = torch.Generator().manual_seed(seed)
    B, T, S, D = 2, 33, 21, layer.w_q.in_features
    x = torch.randn(B, T, D, generator=gen).to(device).requires_grad_(True)
    memory = torch.randn(B, S, D, generator=gen).to(device)
    pad = torch.zeros(B, S if call == "cross" else T, dtype=torch.bool, device=device)
    if call != "causal":  # the causal call stays unpadded: the case flash takes without a mask tensor
        pad[1, -5:] = True
    with precision(device, dtype):
        if call == "cross":
            out, _ = layer(x, memory, key_padding_mask=pad, position=pos)
        else:
            out, _ = layer(x, causal=call == "causal", key_padding_mask=pad if pad.any() else None, position=pos)
    weights = torch.randn(out.shape, generator=gen).to(device)
    (out.float() * weights).sum().backward()
    return [out.detach().float(), x.grad.float()]


def kernel_cases(
    device: torch.device, dtype: torch.dtype, attentions: list[str] | None = None, d_model: int = 64, heads: int = 4
) -> dict[str, Any]:
    """Every fused attention type x position encoding x call x kernel against the fp32 math path."""
    from variants import ATTENTION, POSITION
    from variants.kernels import xformers_unavailable

    fused_types = [n for n in ATTENTION.names() if {"sdpa", "xformers"} & set(ATTENTION.get(n).backends)]
    counts = {"pass": 0, "fail": 0, "not applicable": 0, "skipped": 0}
    failures: list[str] = []
    found: dict[str, Any] = {"counts": counts, "failures": failures, "worst": {}}
    # every xformers case is skipped, with the reason, where xformers cannot run
    xformers_skip = xformers_unavailable() if device.type == "cuda" else None
    previous_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # the fp32 reference must be fp32
    try:
        for attention in attentions or fused_types:
            for a_params in ATTENTION.variations(attention):
                torch.manual_seed(0)
                math = ATTENTION.build(attention, d_model=d_model, num_heads=heads, backend="math", **a_params)
                math = math.to(device).eval()
                kernels = []
                for label, backend, kernel in kernel_choices(device):
                    if backend in ATTENTION.get(attention).backends:
                        fast = ATTENTION.build(attention, d_model=d_model, num_heads=heads, backend=backend, **a_params)
                        fast.load_state_dict(math.state_dict())
                        kernels.append((label, fast.to(device).eval(), kernel))
                skipped_kernels = int(xformers_skip is not None and "xformers" in ATTENTION.get(attention).backends)
                for position in POSITION.names():
                    for p_params in POSITION.variations(position):
                        torch.manual_seed(0)
                        pos = POSITION.build(position, d_model=d_model, num_heads=heads, **p_params).to(device)
                        for call in CALLS:
                            counts["skipped"] += skipped_kernels
                            name = f"{attention}{_params(a_params)}+{position}{_params(p_params)}/{call}"
                            try:
                                reference = layer_run(math, pos, call, device, torch.float32)
                                math_low = None if dtype == torch.float32 else layer_run(math, pos, call, device, dtype)
                            except Exception as err:  # noqa: BLE001 - the case fails alone, for every kernel
                                counts["fail"] += len(kernels)
                                failures += [
                                    f"{name}/{label}: the math path raised {first_line(err)}" for label, _, _ in kernels
                                ]
                                continue
                            for label, fast, kernel in kernels:
                                case = f"{name}/{label}"
                                try:
                                    with forced(kernel):
                                        got = layer_run(fast, pos, call, device, dtype)
                                except Exception as err:  # noqa: BLE001 - one case that raises fails alone
                                    if "No available kernel" in str(err):  # e.g. flash with a mask, or in fp32
                                        counts["not applicable"] += 1
                                    else:
                                        counts["fail"] += 1
                                        failures.append(f"{case}: raised {first_line(err)}")
                                    continue
                                judge(found, case, got, reference, dtype, math_low)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous_tf32
    return {**found, "skipped_because": xformers_skip}


def kernels_outcome(device: torch.device, dtype: torch.dtype) -> dict[str, Any]:
    found = kernel_cases(device, dtype)
    counts = found["counts"]
    if not counts["pass"] and not counts["fail"]:
        raise CheckFailed("no fused kernel took any case")
    detail = (
        f"{counts['pass']} cases equal the math path, {counts['not applicable']} not applicable; "
        f"largest error {found['worst'].get('error', 0):.2e} ({found['worst'].get('case')})"
    )
    if counts["skipped"]:
        detail += f"; {counts['skipped']} xformers cases skipped: {found['skipped_because']}"
    if found["failures"]:
        raise CheckFailed(
            f"{counts['fail']} of {counts['fail'] + counts['pass']} cases fail "
            f"({'; '.join(found['failures'][:3])}); {counts['pass']} equal the math path",
            found,
        )
    return {"detail": detail, **found}


@check("kernels-fp32")
def _kernels_fp32(args: argparse.Namespace) -> dict[str, Any]:
    need_cuda()
    return kernels_outcome(torch.device("cuda"), torch.float32)


@check("kernels-bf16")
def _kernels_bf16(args: argparse.Namespace) -> dict[str, Any]:
    need_cuda()
    if not torch.cuda.is_bf16_supported():
        raise Skip(f"{torch.cuda.get_device_name()} has no bf16")
    return kernels_outcome(torch.device("cuda"), torch.bfloat16)


def flex_outcome(device: torch.device, dtype: torch.dtype) -> dict[str, Any]:
    from experiments.diagnostics.flex_check import flex_cases

    found = flex_cases(device, dtype)
    counts = found["counts"]
    if found["failures"]:
        raise CheckFailed(f"{counts['fail']} flex cases differ from the math path, e.g. {found['failures'][0]}")
    return {
        "detail": f"{counts['pass']} flex cases equal the math path; largest error "
        f"{found['worst'].get('error', 0):.2e} ({found['worst'].get('case')})",
        **found,
    }


@check("flex-fp32")
def _flex_fp32(args: argparse.Namespace) -> dict[str, Any]:
    need_cuda()
    return flex_outcome(torch.device("cuda"), torch.float32)


@check("flex-bf16")
def _flex_bf16(args: argparse.Namespace) -> dict[str, Any]:
    need_cuda()
    return flex_outcome(torch.device("cuda"), torch.bfloat16)


@check("flex-timing")
def _flex_timing(args: argparse.Namespace) -> dict[str, Any]:
    need_cuda()
    from experiments.diagnostics.flex_check import flex_timings

    rows = flex_timings(torch.device("cuda"), torch.bfloat16)
    shown = ", ".join(
        f"{r['family']} {r['flex_ms']:.2f} ms ({r['speedup']:.2f}x {r['baseline']})"
        if r["speedup"]
        else f"{r['family']} {r['status']}"
        for r in rows
    )
    return {"detail": f"bf16, T={rows[0]['T']}: {shown}", "rows": rows}
