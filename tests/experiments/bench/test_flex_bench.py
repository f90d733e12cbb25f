"""The flex benchmarks: the CPU memory probe reads what a step holds, and the GPU targets say why they
are skipped on CPU."""

from __future__ import annotations

import json
import sys

import pytest
import torch

from experiments import bench

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self")


PEAKS = """
import json, torch
from experiments.bench.flex_memory import _large_allocations_from_the_os, resident_peak_mb
_large_allocations_from_the_os()
big = torch.ones(16 * 2**20 // 4)  # freeing a 16 MB mapping would raise glibc's own threshold past 8 MB
del big
def step():
    held = torch.ones(8 * 2**20 // 4)  # 8 MB of float32, touched
    held += 1
step()  # the warm-up run
print(json.dumps([resident_peak_mb(step), resident_peak_mb(lambda: None)]))
"""


@linux
def test_resident_peak_counts_a_step_that_holds_then_frees_memory():
    """A step that holds 8 MB then frees it peaks at 8 MB when measured after a warm-up run, as the
    benchmark measures: not 0 (glibc would otherwise reuse the warm-up's freed heap, raising nothing).
    In a process of its own: a test worker's heap, shaped by the tests before, could already hold 8 MB free."""
    import subprocess

    proc = subprocess.run([sys.executable, "-c", PEAKS], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    held, nothing = json.loads(proc.stdout.strip().splitlines()[-1])
    assert held == pytest.approx(8, abs=1)
    assert nothing == pytest.approx(0, abs=1)


def test_gpu_targets_are_skipped_on_cpu_with_the_reason(tmp_path):
    out = tmp_path / "targets.json"
    status = bench.main(
        [
            "targets",
            "--device",
            "cpu",
            "--length",
            "32",
            "--long-lengths",
            "32",
            "64",
            "--batch",
            "1",
            "--d-model",
            "16",
            "--repeats",
            "1",
            "--warmup",
            "0",
            "--gemm-size",
            "64",
            "--window",
            "4",
            "--out",
            str(out),
        ]
    )
    assert status == 0
    data = json.loads(out.read_text())
    assert "needs a CUDA device (this run is on cpu)" in data["gpu_targets_skipped"]
    assert not any("flex" in t["name"] for t in data["targets"])  # the CPU targets stay as they were


@pytest.mark.parametrize("argv, expected", [([], torch.bfloat16), (["--gpu-dtype", "float16"], torch.float16)])
def test_gpu_targets_time_flash_in_a_dtype_it_runs_in_whatever_the_cpu_points_dtype(monkeypatch, argv, expected):
    """SDPA's flash kernel takes bfloat16 and float16 only: the targets' "against flash" must be timed in one of
    them, also when ``--dtype`` (the CPU points') is float32, its default."""
    import argparse

    from experiments.bench import gpu_targets as targets_module
    from experiments.bench.point import Shape

    seen = []

    def first_cases(cases, T, gpu, note, rounds):
        seen.append(gpu.dtype)
        raise StopIteration  # the shape is all this test needs; nothing is measured

    monkeypatch.setattr(targets_module, "_steps", first_cases)
    parser = argparse.ArgumentParser()
    targets_module.gpu_arguments(parser)
    args = parser.parse_args(argv)
    args.warmup, args.repeats = 0, 1
    shape = Shape(16, 2, 1, False, torch.device("cpu"), torch.float32, "wall")
    with pytest.raises(StopIteration):
        targets_module.gpu_targets(args, shape, note=lambda *a: None, target=lambda *a: None)
    assert seen == [expected]


@pytest.mark.parametrize("T, window", [(256, 16), (300, 40)])
def test_the_kernel_only_case_computes_the_causal_window(T: int, window: int) -> None:
    """What the attention-call-alone target times is local attention: query i over keys i - window .. i,
    against a dense reference written here (masked softmax over the scores)."""
    from experiments.bench.kernel_only import qkv, window_attention, window_block_mask

    q, k, v = qkv(2, 2, T, 16, torch.device("cpu"), torch.float32, grad=False)
    with torch.no_grad():
        got = window_attention(q, k, v, window_block_mask(T, window, q.device))  # (B, H, T, D)
    i, j = torch.arange(T)[:, None], torch.arange(T)[None]
    allowed = (j <= i) & (j >= i - window)  # (T, T)
    scores = (q @ k.transpose(-1, -2)) / 16**0.5
    want = scores.masked_fill(~allowed, float("-inf")).softmax(-1) @ v
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
