"""The CPU half of ``make gpu-check``: bf16 autocast training on CPU, the kernel comparison and its
tolerances, checks that skip or fail without stopping the others, and the JSON summary."""

from __future__ import annotations

import argparse
import json
import math
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

from experiments.config.spec import build_spec
from experiments.diagnostics import gpu_check
from experiments.diagnostics.gpu_check import CheckFailed, cli, kernel_cases, processes, registry, run_check, runs
from experiments.diagnostics.gpu_check import kernels as kernel_checks
from experiments.diagnostics.kernel_compare import FP32_TOL, LOW_PRECISION_FLOOR, LOW_PRECISION_FUDGE, within_tolerance
from tests.helpers.cases import one_thread  # noqa: F401 (one_thread is an autouse fixture)
from tests.helpers.config import TINY, compose


def test_bf16_mixed_training_on_cpu_runs_its_matmuls_in_bf16(tmp_path: Path) -> None:
    from experiments.training.build import assemble

    cfg = compose([*TINY, "trainer.precision=bf16-mixed", "trainer.max_steps=3"])
    parts = assemble(build_spec(cfg), tmp_path, run_id="bf16")
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
    cases = (
        len(ATTENTION.variations("multihead"))
        * sum(len(POSITION.variations(p)) for p in POSITION.names())
        * len(gpu_check.CALLS)
    )
    assert found["counts"] == {"pass": cases, "fail": 0, "not applicable": 0, "skipped": 0}, found["failures"][:3]


def test_a_kernel_off_by_five_percent_fails_the_bf16_comparison(monkeypatch) -> None:
    import variants.attention.soft as soft  # multihead's fused path goes through soft's

    exact = soft.fused_attention
    monkeypatch.setattr(soft, "fused_attention", lambda *a, **k: 1.05 * exact(*a, **k))
    found = kernel_cases(torch.device("cpu"), torch.bfloat16, attentions=["multihead"], d_model=32, heads=2)
    assert found["counts"]["fail"] > 0 and found["failures"]


def test_without_cuda_every_gpu_check_skips_with_its_reason_and_the_run_is_not_a_success(
    tmp_path, capsys, monkeypatch
) -> None:
    """Success is never reported over nothing: every check skipped exits 1, and the JSON says not complete."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(processes, "CHILD", ["false"])  # a check that needs CUDA never starts its process
    out = tmp_path / "summary.json"
    code = gpu_check.main(["--out", str(out), "--work", str(tmp_path / "work")])
    assert code == 1
    summary = json.loads(out.read_text())
    assert summary["complete"] is False and summary["ok"] is False and "no check passed" in summary["why_not_ok"]
    assert [c["name"] for c in summary["checks"]] == list(gpu_check.CHECKS)
    assert {c["status"] for c in summary["checks"]} == {"skipped"}
    assert all(c["detail"] == "no CUDA device here" for c in summary["checks"])
    assert summary["counts"] == {"pass": 0, "fail": 0, "timeout": 0, "skipped": len(gpu_check.CHECKS)}
    printed = capsys.readouterr().out
    for name in gpu_check.CHECKS:  # one table row per check
        assert any(line.startswith(name) and "skipped" in line for line in printed.splitlines())


def test_one_check_passing_beside_skipped_ones_is_a_success(tmp_path, monkeypatch) -> None:
    from tests.helpers.gpu_check_plants import PLANTED, plant

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    plant(monkeypatch, {"passes": PLANTED["passes"], "needs-gpu": PLANTED["hangs"]}, needs_cuda={"needs-gpu"})
    out = tmp_path / "summary.json"
    assert gpu_check.main(["--out", str(out), "--work", str(tmp_path / "work")]) == 0
    summary = json.loads(out.read_text())
    assert summary["complete"] is True and summary["ok"] is True and summary["why_not_ok"] is None
    checks = {c["name"]: c for c in summary["checks"]}
    assert checks["passes"] == {
        "name": "passes",
        "status": "pass",
        "detail": "all good",
        "seconds": checks["passes"]["seconds"],
        "data": {"value": 1.5},
    }
    assert checks["needs-gpu"]["status"] == "skipped" and checks["needs-gpu"]["detail"] == "no CUDA device here"


@pytest.mark.slow
def test_a_hanging_check_and_a_dying_one_end_alone_and_the_summary_is_whole(tmp_path, monkeypatch) -> None:
    """Each check in a process of its own: one that hangs is stopped at its cap (``--timeout``), one whose
    process dies (as a sticky CUDA error leaves it) fails alone, and the others are recorded."""
    import time

    from tests.helpers.gpu_check_plants import PLANTED, plant

    cap = 2.0  # the hanging check's own cap; the others have --timeout's
    plant(monkeypatch, {n: PLANTED[n] for n in ("passes", "hangs", "dies")}, caps={"hangs": cap})
    monkeypatch.setattr(processes, "STOP_WAIT", 1.0)
    out = tmp_path / "summary.json"
    began = time.monotonic()
    code = gpu_check.main(["--out", str(out), "--work", str(tmp_path / "work"), "--timeout", "120"])
    wall = time.monotonic() - began
    assert code == 1, "a failed or timed-out check fails the command"
    summary = json.loads(out.read_text())
    assert summary["complete"] is True and summary["ok"] is False
    assert summary["counts"] == {"pass": 1, "fail": 1, "timeout": 1, "skipped": 0}
    checks = {c["name"]: c for c in summary["checks"]}
    assert list(checks) == ["passes", "hangs", "dies"]
    assert checks["passes"]["status"] == "pass" and checks["passes"]["data"] == {"value": 1.5}
    assert checks["hangs"]["status"] == "timeout" and f"cap of {cap:.0f} s" in checks["hangs"]["detail"]
    assert cap <= checks["hangs"]["seconds"] <= cap + 2 * processes.STOP_WAIT
    assert checks["dies"]["status"] == "fail"
    assert checks["dies"]["detail"].startswith("its process ended (signal SIGABRT) without an outcome: ")
    assert checks["dies"]["detail"].endswith("RuntimeError: CUDA error: an illegal memory access was encountered")
    assert all(math.isfinite(c["seconds"]) and c["seconds"] >= 0 for c in checks.values())
    assert wall < sum(c["seconds"] for c in checks.values()) + 5, "nothing waits beyond the checks themselves"


def test_run_check_never_raises() -> None:
    outcome = run_check("x", lambda: 1 / 0)
    assert outcome.status == "fail" and outcome.detail == "ZeroDivisionError: division by zero"
    assert "Traceback" in outcome.data["traceback"]
    refused = run_check("y", lambda: (_ for _ in ()).throw(CheckFailed("3 cases differ", {"n": 3})))
    assert (refused.status, refused.detail, refused.data) == ("fail", "3 cases differ", {"n": 3})


# -- what a real machine throws at the check ----------------------------------------------------------------
def fake_xformers(monkeypatch, op) -> None:
    """An installed xformers whose ``memory_efficient_attention`` is ``op``; CUDA 'visible', probed on the CPU."""
    import importlib.machinery
    import sys
    import types

    import variants.kernels as kernels

    package = types.ModuleType("xformers")
    package.__spec__ = importlib.machinery.ModuleSpec("xformers", None)
    ops = types.ModuleType("xformers.ops")
    ops.memory_efficient_attention = op
    package.ops = ops
    monkeypatch.setitem(sys.modules, "xformers", package)
    monkeypatch.setitem(sys.modules, "xformers.ops", ops)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(kernels, "_PROBE_DEVICE", "cpu")
    kernels.xformers_unavailable.cache_clear()


@pytest.fixture
def fresh_probe():
    import variants.kernels as kernels

    kernels.xformers_unavailable.cache_clear()
    yield
    kernels.xformers_unavailable.cache_clear()  # the next test probes the real machine again


def test_an_xformers_that_imports_but_cannot_run_is_unavailable_and_refused_in_one_line(
    monkeypatch, fresh_probe
) -> None:
    from variants.checks import VariantConfigError
    from variants.kernels import check_backend, xformers_available, xformers_unavailable

    def broken(q, k, v, **kwargs):
        raise NotImplementedError(
            "No operator found for `memory_efficient_attention_forward` with inputs:\n"
            "     query       : shape=(1, 8, 1, 16) (torch.float16)\n`cutlassF` is not built"
        )

    fake_xformers(monkeypatch, broken)
    reason = xformers_unavailable()
    assert not xformers_available()
    assert "\n" not in reason and "NotImplementedError: No operator found" in reason
    assert "xformers" not in [label for label, _, _ in gpu_check.kernel_choices(torch.device("cuda"))]
    with pytest.raises(VariantConfigError) as err:
        check_backend("xformers", ("auto", "math", "sdpa", "xformers"), "multihead")
    assert "\n" not in str(err.value) and reason in str(err.value) and "['auto', 'math', 'sdpa']" in str(err.value)
    assert check_backend("auto", ("auto", "math", "sdpa", "xformers"), "multihead") == "sdpa"  # never chosen


def test_an_xformers_whose_call_runs_is_available(monkeypatch, fresh_probe) -> None:
    from variants.kernels import xformers_available

    fake_xformers(monkeypatch, lambda q, k, v, **kwargs: q)
    assert xformers_available()
    assert "xformers" in [label for label, _, _ in gpu_check.kernel_choices(torch.device("cuda"))]


def test_a_kernel_case_that_raises_fails_alone_by_name_and_the_others_are_judged(monkeypatch) -> None:
    import variants.attention.soft as soft  # multihead's fused path goes through soft's

    exact = soft.fused_attention

    def cross_breaks(q, k, v, **kwargs):
        if q.shape[2] != k.shape[2]:  # only the cross call has queries and keys of different lengths
            raise NotImplementedError("No operator found for this input\nsecond line")
        return exact(q, k, v, **kwargs)

    intact = kernel_cases(torch.device("cpu"), torch.float32, attentions=["multihead"], d_model=32, heads=2)
    monkeypatch.setattr(soft, "fused_attention", cross_breaks)
    found = kernel_cases(torch.device("cpu"), torch.float32, attentions=["multihead"], d_model=32, heads=2)
    assert found["counts"]["fail"] > 0 and found["counts"]["not applicable"] == 0
    # the other cases were all judged, and pass as before
    assert found["counts"]["pass"] + found["counts"]["fail"] == intact["counts"]["pass"]
    assert found["counts"]["pass"] >= 2 * intact["counts"]["pass"] // len(gpu_check.CALLS)
    assert all(
        "/cross/sdpa: raised NotImplementedError: No operator found for this input" in f for f in found["failures"]
    )
    with pytest.raises(CheckFailed) as err:
        monkeypatch.setattr(kernel_checks, "kernel_cases", lambda device, dtype: found)
        gpu_check.kernels_outcome(torch.device("cpu"), torch.float32)
    assert "/cross/sdpa" in str(err.value) and err.value.data["counts"] == found["counts"]


def test_ddp_is_skipped_with_its_reason_on_one_gpu(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)

    def no_run(*args, **kwargs):
        raise CheckFailed("trainer.strategy=ddp with trainer.devices=1: DDP needs more than one process")

    monkeypatch.setattr(runs, "training_run", no_run)
    args = argparse.Namespace(work=tmp_path, timeout=10)
    outcome = run_check("ddp", lambda: gpu_check.CHECKS["ddp"](args))
    assert outcome.status == "skipped" and outcome.detail == "DDP needs at least 2 GPUs; 1 visible"


@pytest.mark.parametrize("where", ["a folder", "in a missing folder", "under a file"])
def test_an_out_that_cannot_be_written_is_refused_in_one_line_before_any_check(
    tmp_path, monkeypatch, capsys, where
) -> None:
    ran = []
    monkeypatch.setattr(registry, "CHECKS", {"a": lambda args: ran.append("a") or {}})
    (tmp_path / "file").write_text("")
    out = {
        "a folder": tmp_path,
        "in a missing folder": tmp_path / "missing" / "s.json",
        "under a file": tmp_path / "file" / "s.json",
    }[where]
    assert gpu_check.main(["--out", str(out), "--work", str(tmp_path / "work")]) == 2
    printed = capsys.readouterr().err.strip()
    assert not ran and len(printed.splitlines()) == 1 and printed.startswith(f"gpu_check: --out={out} ")


def test_the_budget_stops_a_running_check_and_skips_the_rest_and_the_summary_is_always_whole(
    tmp_path, monkeypatch
) -> None:
    """``--budget`` bounds the whole run, the check running at it included; the JSON on disk is whole
    from before the first check to the end, never claiming completion early."""
    import threading
    import time

    from tests.helpers.gpu_check_plants import PLANTED, plant

    plant(monkeypatch, {"hangs": PLANTED["hangs"], "passes": PLANTED["passes"]})
    monkeypatch.setattr(processes, "STOP_WAIT", 1.0)
    out, budget = tmp_path / "summary.json", 3.0
    seen: list[dict] = []
    done = threading.Event()
    write = cli.write_json_atomic

    def recorded(path, data) -> None:  # every summary written, read back whole: none missed by a slow poll
        write(path, data)
        if Path(path) == out:
            seen.append(json.loads(out.read_text()))

    monkeypatch.setattr(cli, "write_json_atomic", recorded)

    def watch() -> None:  # what a reader, or a run killed at any moment, finds on disk
        while not done.is_set():
            if out.exists():
                json.loads(out.read_text())  # raises on a half-written file
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    began = time.monotonic()
    try:
        code = gpu_check.main(["--out", str(out), "--work", str(tmp_path / "work"), "--budget", str(budget)])
    finally:
        done.set()
        watcher.join()
    wall = time.monotonic() - began
    assert code == 1
    assert wall <= budget + 2 * processes.STOP_WAIT + 1, f"the run took {wall:.1f} s, budget {budget} s"
    checks = {c["name"]: c for c in json.loads(out.read_text())["checks"]}
    assert checks["hangs"]["status"] == "timeout" and f"cap of {budget:.0f} s" in checks["hangs"]["detail"]
    assert checks["passes"]["status"] == "skipped" and "budget" in checks["passes"]["detail"]
    assert seen and not any(s["complete"] for s in seen)
    assert {len(s["checks"]) for s in seen} >= {0, 1}, "written before the first check and after each"


def fake_commands(monkeypatch, write) -> list[list[str]]:
    """run_command that records each command and lets ``write`` leave its outputs; one 'GPU'."""
    import subprocess

    commands: list[list[str]] = []

    def run(command, out_dir, timeout):
        commands.append(command)
        write(command)
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(processes, "run_command", run)
    return commands


def test_peers_runs_on_a_gpu_shape_and_records_its_ratios(tmp_path, monkeypatch) -> None:
    def write(command):
        out = Path(command[command.index("--out") + 1])
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(
            json.dumps(
                {
                    "comparisons": {
                        "seq2seq": {"ratios": {"eager / torch.nn.Transformer": 1.14}},
                        "decoder": {"skipped": "x-transformers is not installed"},
                    },
                    "targets": [],
                }
            )
        )

    commands = fake_commands(monkeypatch, write)
    args = argparse.Namespace(work=tmp_path, timeout=10)
    outcome = run_check("peers", lambda: gpu_check.CHECKS["peers"](args))
    assert outcome.status == "pass", outcome.detail
    command = commands[0]  # not the CPU default shape (width 64, batch 64 x 16 tokens): launches, not kernels
    assert command[command.index("--device") + 1] == "cuda" and "--d-model" in command and "--length" in command
    assert int(command[command.index("--d-model") + 1]) >= 512 and int(command[command.index("--length") + 1]) >= 512
    assert outcome.data["ratios"] == {"seq2seq: eager / torch.nn.Transformer": 1.14}


def test_the_quick_grid_is_timed_one_and_k_cells_at_a_time(tmp_path, monkeypatch) -> None:
    def write(command):
        sweep = Path(next(a for a in command if a.startswith("hydra.sweep.dir=")).split("=", 1)[1])
        for cell in ("soft+learned", "local+rope"):
            attention, position = cell.split("+")
            (sweep / cell).mkdir(parents=True, exist_ok=True)
            (sweep / cell / "result.json").write_text(
                json.dumps(
                    {
                        "status": "completed",
                        "attention": attention,
                        "position": position,
                        "metrics": {"test/token_acc": 1.0},
                        "cost": {"step_ms": 5.0},
                    }
                )
            )

    commands = fake_commands(monkeypatch, write)
    out = tmp_path / "summary.json"
    args = argparse.Namespace(work=tmp_path, timeout=10, quick_steps=50, jobs_per_gpu=3, out=out)
    one = run_check("quick-grid", lambda: gpu_check.CHECKS["quick-grid"](args))
    # each check runs in its own process: the second reads the first's time from the summary on disk
    cli.write_json_atomic(out, cli.summary([one], 2, "cpu"))
    many = run_check("quick-grid-k", lambda: gpu_check.CHECKS["quick-grid-k"](args))
    assert one.status == many.status == "pass", (one.detail, many.detail)
    assert not any("launcher" in a for a in commands[0])  # one cell at a time: the basic launcher
    assert {"hydra/launcher=joblib", "hydra.launcher.n_jobs=3", "jobs_per_gpu=3"} <= set(commands[1])
    assert commands[0][-1] != commands[1][-1], "each grid in its own folder, or the second would skip its cells"
    assert many.data["speedup"] == pytest.approx(one.data["wall_seconds"] / many.data["wall_seconds"])


def test_a_quick_grid_cut_by_its_timeout_keeps_the_cells_that_finished(tmp_path, monkeypatch) -> None:
    def cut(command, out_dir, timeout):
        sweep = Path(next(a for a in command if a.startswith("hydra.sweep.dir=")).split("=", 1)[1])
        cells = {"soft+none": "completed", "local+rope": "completed", "soft+t5": None}  # the third was running
        for cell, status in cells.items():
            attention, position = cell.split("+")
            (sweep / cell).mkdir(parents=True, exist_ok=True)
            if status:
                result = {"status": status, "attention": attention, "position": position}
                (sweep / cell / "result.json").write_text(json.dumps({**result, "metrics": {"test/token_acc": 0.5}}))
            else:
                (sweep / cell / "result.json").write_text('{"status": "compl')  # cut while writing
        raise gpu_check.CommandTimedOut(f"did not finish in {timeout:.0f} s: {' '.join(command)}")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(processes, "run_command", cut)
    args = argparse.Namespace(work=tmp_path, timeout=10, quick_steps=50, jobs_per_gpu=3)
    outcome = run_check("quick-grid", lambda: gpu_check.CHECKS["quick-grid"](args))
    assert outcome.status == "fail" and outcome.detail.endswith("; 2 cells had completed")
    assert outcome.data["cut"] is True and outcome.data["cells"] == {"soft+none": 0.5, "local+rope": 0.5}


@pytest.mark.slow
def test_cpu_flex_forward_equals_the_math_path_for_every_flex_pair() -> None:
    """The flex check's CPU half: every pair on flex, 150 queries (two blocks), outputs only (no backward on CPU)."""
    import warnings

    from experiments.diagnostics.flex_check import flex_cases

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        found = flex_cases(torch.device("cpu"), torch.float32, d_model=16, heads=2)
    assert found["counts"]["pass"] > 0 and not found["failures"], found["failures"][:3]


def test_a_flex_case_that_raises_fails_alone_by_name(monkeypatch) -> None:
    import experiments.diagnostics.flex_check as flex_check

    exact = flex_check.flex_run
    calls = {"n": 0}

    def first_breaks(layer, pos, call, device, dtype, seed=1):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("out of resource: shared memory\nsecond line")
        return exact(layer, pos, call, device, dtype, seed)

    monkeypatch.setattr(flex_check, "flex_run", first_breaks)
    from variants import POSITION

    # two encodings are enough to see one case fail and the others judged (all of them take 12 s on CPU)
    monkeypatch.setattr(POSITION, "names", lambda: ["none", "alibi"])
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        found = flex_check.flex_cases(torch.device("cpu"), torch.float32, d_model=16, heads=2)
    assert found["counts"]["fail"] == 1 and found["counts"]["pass"] > 0
    assert found["failures"][0].endswith("raised RuntimeError: out of resource: shared memory")
