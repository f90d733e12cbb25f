"""``python -m experiments.gpu_check`` (``make gpu-check``): is this CUDA machine running attnlab right?

One command, sized for under eight minutes on one GPU, each check recorded as pass, fail, timeout or
skipped (with the reason) and none stopping the others. Each check runs in a process of its own
(``--timeout`` caps it, and the commands it starts; ``--budget`` caps the whole run, so a check
still running at the budget is stopped and the later ones are skipped): a hung kernel, a crash or a
sticky CUDA error (one that poisons every later CUDA call of its process) ends that check alone.

- ``kernels-fp32`` / ``kernels-bf16``: every attention type with a fused path, with every
  position encoding, equals its math path through SDPA's flash and memory-efficient
  kernels (each forced alone) and xformers where a call of it runs (otherwise every xformers
  case is skipped, with the first line of the reason); outputs and input gradients.
  fp32: |fused - math| <= 1e-4 + 1e-4 |math| (TF32 off). bf16: the fused kernel's largest
  error against the fp32 math path is at most 3x the math path's own error in bf16, plus
  1e-3: a kernel is as exact as the precision allows, not more (PyTorch's own flash tests
  judge kernels the same way). A kernel that does not take a case (flash with a mask or a
  score bias, flash in fp32) counts as not applicable, not as a failure; a case that raises
  fails alone, by name, and the others are still judged.
- ``flex-fp32`` / ``flex-bf16`` / ``flex-timing``: every pair on the FlexAttention backend
  against the math path under the same tolerances, and a timing row per encoding family
  (``experiments.flex_check``);
- ``train-bf16``: a short run under ``trainer=gpu`` (bf16 autocast); ``train-compile``: the
  same with ``model.compile=true``; ``train-cudagraphs``: with ``model.compile_mode=reduce-overhead``;
  each reports its steady step time and tokens/s beside the whole fit's;
- ``ddp``: ``trainer=ddp`` on every visible GPU (skipped on fewer than two);
- ``mfu``: ``python -m experiments.bench mfu --device cuda --bf16`` (goal: 40% on an H100);
- ``peers``: ``python -m experiments.bench peers`` on a GPU shape (B 32, T 512, d 512, 6+6 layers);
- ``quick-grid`` / ``quick-grid-k``: ``experiment=quick`` on the GPU (``--quick-steps`` per cell),
  one cell at a time, then ``--jobs-per-gpu`` cells at a time per GPU, side by side.

Writes the JSON summary (``--out``, refused in one line before any work when it cannot be
written) before the first check and after every check, each time whole (written and renamed), so
a run cut short keeps what finished, and prints a table. ``"complete": true`` only when every
check has its outcome and at least one passed; ``"ok": true`` when, besides, none failed or timed
out. The exit code is 0 only then: 1 when a check failed or timed out, or when nothing passed
(every check skipped, say without CUDA): success is never reported over nothing.
"""

from experiments.diagnostics.gpu_check.cli import main
from experiments.diagnostics.gpu_check.kernels import CALLS, kernel_cases, kernel_choices, kernels_outcome
from experiments.diagnostics.gpu_check.processes import stop_group
from experiments.diagnostics.gpu_check.registry import CHECKS, CheckFailed, CommandTimedOut, Skip, run_check

__all__ = [
    "CALLS",
    "CHECKS",
    "CheckFailed",
    "CommandTimedOut",
    "Skip",
    "kernel_cases",
    "kernel_choices",
    "kernels_outcome",
    "main",
    "run_check",
    "stop_group",
]
