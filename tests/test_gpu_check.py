"""The CPU half of ``make gpu-check``: bf16 autocast training on CPU, the kernel comparison and its
tolerances, checks that skip or fail without stopping the others, and the JSON summary."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from torch import nn

from experiments import gpu_check
from experiments.gpu_check import (FP32_TOL, LOW_PRECISION_FLOOR, LOW_PRECISION_FUDGE, CheckFailed, Skip,
                                   kernel_cases, run_check, within_tolerance)
from tests.cases import one_thread  # noqa: F401 (one_thread is an autouse fixture)
from tests.conftest import TINY, compose


def test_bf16_mixed_training_on_cpu_runs_its_matmuls_in_bf16(tmp_path: Path) -> None:
    from experiments.build import assemble

    cfg = compose([*TINY, "trainer.precision=bf16-mixed", "trainer.max_steps=3"])
    parts = assemble(cfg, tmp_path, run_id="bf16", flat_config={})
    seen = []
    linear = next(m for m in parts.module.modules() if isinstance(m, nn.Linear))
    linear.register_forward_hook(lambda mod, inputs, out: seen.append((out.dtype, mod.weight.dtype)))
    parts.trainer.fit(parts.module, datamodule=parts.datamodule)
    assert parts.trainer.global_step == 3
    assert seen and set(seen) == {(torch.bfloat16, torch.float32)}, "bf16 activations, fp32 master weights"
    assert all(p.dtype == torch.float32 and torch.isfinite(p).all() for p in parts.module.parameters())


def test_fp32_tolerance_is_elementwise_atol_plus_rtol() -> None:
    reference = [torch.tensor([1.0, 100.0])]
    bound = FP32_TOL["atol"] + FP32_TOL["rtol"] * 100.0  # the error allowed on the large element
    inside = [torch.tensor([1.0, 100.0 + 0.9 * bound])]
    outside = [torch.tensor([1.0 + 3 * FP32_TOL["atol"] + 3 * FP32_TOL["rtol"], 100.0])]  # small element off
    ok, error, _ = within_tolerance(inside, reference, torch.float32)
    assert ok and error == pytest.approx(0.9 * bound, rel=1e-3)
    assert not within_tolerance(outside, reference, torch.float32)[0]


def test_low_precision_tolerance_scales_with_the_math_paths_own_error() -> None:
    reference = [torch.zeros(4), torch.zeros(2)]
    math_low = [torch.tensor([0.0, 0.01, 0.0, 0.0]), torch.tensor([0.0, -0.02])]  # its own error: 0.02
    allowed = LOW_PRECISION_FUDGE * 0.02 + LOW_PRECISION_FLOOR
    just_in = [torch.zeros(4), torch.tensor([allowed * 0.99, 0.0])]
    just_out = [torch.tensor([0.0, 0.0, -allowed * 1.01, 0.0]), torch.zeros(2)]
    ok, error, got_allowed = within_tolerance(just_in, reference, torch.bfloat16, math_low)
    assert ok and got_allowed == pytest.approx(allowed) and error == pytest.approx(allowed * 0.99)
    assert not within_tolerance(just_out, reference, torch.bfloat16, math_low)[0]
    with pytest.raises(ValueError, match="math path"):
        within_tolerance(just_in, reference, torch.bfloat16)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_cpu_sdpa_equals_the_math_path_for_every_encoding(dtype) -> None:
    from variants import ATTENTION, POSITION

    found = kernel_cases(torch.device("cpu"), dtype, attentions=["multihead"], d_model=32, heads=2)
    # every variation of multihead (grouped KV heads among them) against every encoding variation
    cases = (len(ATTENTION.variations("multihead")) * sum(len(POSITION.variations(p)) for p in POSITION.names())
             * len(gpu_check.CALLS))
    assert found["counts"] == {"pass": cases, "fail": 0, "not applicable": 0}, found["failures"][:3]


def test_a_kernel_off_by_five_percent_fails_the_bf16_comparison(monkeypatch) -> None:
    import variants.attention.soft as soft  # multihead's fused path goes through soft's

    exact = soft.fused_attention
    monkeypatch.setattr(soft, "fused_attention", lambda *a, **k: 1.05 * exact(*a, **k))
    found = kernel_cases(torch.device("cpu"), torch.bfloat16, attentions=["multihead"], d_model=32, heads=2)
    assert found["counts"]["fail"] > 0 and found["failures"]


def test_without_cuda_every_gpu_check_skips_with_its_reason_and_the_summary_says_so(tmp_path, capsys,
                                                                                   monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    out = tmp_path / "summary.json"
    code = gpu_check.main(["--out", str(out), "--work", str(tmp_path / "work")])
    assert code == 0
    summary = json.loads(out.read_text())
    assert [c["name"] for c in summary["checks"]] == list(gpu_check.CHECKS)
    assert {c["status"] for c in summary["checks"]} == {"skipped"}
    assert all(c["detail"] == "no CUDA device here" for c in summary["checks"])
    assert summary["counts"] == {"pass": 0, "fail": 0, "skipped": len(gpu_check.CHECKS)}
    printed = capsys.readouterr().out
    for name in gpu_check.CHECKS:  # one table row per check
        assert any(line.startswith(name) and "skipped" in line for line in printed.splitlines())


def test_a_failing_check_is_recorded_and_the_others_still_run(tmp_path, monkeypatch) -> None:
    def broken(args):
        raise KeyError("no such metric")

    def refuses(args):
        raise CheckFailed("3 cases differ")

    def fine(args):
        return {"detail": "all good", "value": 1.5}

    monkeypatch.setattr(gpu_check, "CHECKS", {"a": broken, "b": refuses, "c": fine,
                                              "d": lambda args: (_ for _ in ()).throw(Skip("needs 2 GPUs"))})
    out = tmp_path / "summary.json"
    assert gpu_check.main(["--out", str(out), "--work", str(tmp_path)]) == 1, "a failed check fails the command"
    checks = {c["name"]: c for c in json.loads(out.read_text())["checks"]}
    assert checks["a"]["status"] == "fail" and checks["a"]["detail"] == "KeyError: 'no such metric'"
    assert "Traceback" in checks["a"]["data"]["traceback"]
    assert checks["b"]["status"] == "fail" and checks["b"]["detail"] == "3 cases differ"
    assert checks["c"] == {"name": "c", "status": "pass", "detail": "all good", "seconds": checks["c"]["seconds"],
                           "data": {"value": 1.5}}
    assert checks["d"]["status"] == "skipped" and checks["d"]["detail"] == "needs 2 GPUs"
    assert all(math.isfinite(c["seconds"]) and c["seconds"] >= 0 for c in checks.values())


def test_run_check_never_raises() -> None:
    outcome = run_check("x", lambda: 1 / 0)
    assert outcome.status == "fail" and outcome.detail == "ZeroDivisionError: division by zero"


def test_cpu_flex_forward_equals_the_math_path_for_every_flex_pair() -> None:
    """The flex check's CPU half: every pair on flex, 150 queries (two blocks), outputs only (no backward on CPU)."""
    import warnings

    from experiments.flex_check import flex_cases

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        found = flex_cases(torch.device("cpu"), torch.float32, d_model=16, heads=2)
    assert found["counts"]["pass"] > 0 and not found["failures"], found["failures"][:3]
