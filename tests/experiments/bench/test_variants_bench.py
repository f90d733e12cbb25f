"""The benchmark CLI: subcommand registration, the memory counter, and the JSON the report reads."""

from __future__ import annotations

import json

import pytest
import torch

from experiments import bench
from experiments.bench.measure import LiveTensorMemory, loglog_slope, peak_memory_mb
from experiments.bench.registry import BENCHMARKS
from experiments.bench.scaling import exponents
from tests.helpers.cases import one_thread  # noqa: F401 (one_thread is an autouse fixture)

MB = 2**20


def test_live_tensor_memory_counts_what_is_alive_at_the_peak():
    x = torch.randn(256, 256, requires_grad=True)  # made before: not counted
    with LiveTensorMemory() as tracker:
        a = x @ x  # 256 KB
        b = a.softmax(-1)  # 256 KB, saved for backward
        view = b.t()  # a view: no new bytes
        del a  # the matmul saved x, not its output, so this frees 256 KB
        assert tracker.current == 256 * 1024
        b.add_(1.0)  # in place: no new bytes
        assert tracker.current == 256 * 1024
        del b, view
        assert tracker.current == 0
    assert tracker.peak == 512 * 1024


def test_peak_memory_sees_the_backward_pass():
    x = torch.randn(512, 64, requires_grad=True)

    def step() -> None:
        scores = (x @ x.t()).softmax(-1)  # (512, 512) float32: 1 MB kept for backward
        (scores @ x).sum().backward()

    peak = peak_memory_mb(step, torch.device("cpu"))
    assert 2.0 <= peak < 6.0  # the scores, their gradient, and a few 128 KB tensors


def test_loglog_slope_recovers_a_power_law():
    lengths = [256, 512, 1024, 2048]
    assert loglog_slope(lengths, [3e-6 * t**2 for t in lengths]) == pytest.approx(2.0)
    assert loglog_slope(lengths, [0.5 * t for t in lengths]) == pytest.approx(1.0)


def test_exponents_use_the_largest_ok_points_of_each_series():
    records = [
        {"attention": "soft", "position": "none", "backend": "math", "T": t, "status": s, "ms": ms}
        for t, s, ms in [(64, "ok", 1.0), (128, "ok", 2.0), (256, "ok", 8.0), (512, "ok", 32.0), (1024, "oom", None)]
    ]
    (fit,) = exponents(records, fit_points=2)
    assert fit["T_range"] == [256, 512] and fit["exponent"] == pytest.approx(2.0)


def test_a_new_subcommand_is_one_registered_function(capsys):
    def arguments(parser):
        parser.add_argument("--times", type=int, default=1)

    @BENCHMARKS.register("echo_for_test", help="prints its argument", arguments=arguments)
    def echo(args) -> int:
        print("echo" * args.times)
        return 0

    try:
        with pytest.raises(ValueError, match="echo_for_test"):
            BENCHMARKS.register("echo_for_test", help="again", arguments=arguments)(echo)
        assert bench.main(["echo_for_test", "--times", "2"]) == 0
        assert capsys.readouterr().out == "echoecho\n"
    finally:
        BENCHMARKS.unregister("echo_for_test")


@pytest.mark.slow
def test_scaling_writes_the_json_the_report_reads(tmp_path):
    out, figure = tmp_path / "scaling.json", tmp_path / "scaling.png"
    status = bench.main(
        [
            "scaling",
            "--attention",
            "soft",
            "local",
            "--position",
            "none",
            "rope",
            "--lengths",
            "16",
            "32",
            "--attention-param",
            "window=4",
            "block_size=8",
            "--repeats",
            "1",
            "--warmup",
            "0",
            "--batch",
            "3",
            "--out",
            str(out),
            "--figure",
            str(figure),
        ]
    )
    assert status == 0 and figure.stat().st_size > 0
    data = json.loads(out.read_text())
    assert {"device", "torch", "records", "exponents"} <= set(data)
    assert data["settings"]["batch"] == 3
    series = {(r["attention"], r["position"], r["backend"]) for r in data["records"]}
    assert series == {("soft", p, b) for p in ("none", "rope") for b in ("math", "sdpa")} | {
        ("local", p, b) for p in ("none", "rope") for b in ("math", "banded")
    }
    for r in data["records"]:
        assert set(r) == {"attention", "position", "backend", "T", "status", "ms", "tokens_per_second", "peak_mb"}
        assert r["status"] == "ok" and r["ms"] > 0 and r["peak_mb"] > 0
        # every sequence of the batch counts: 3 x T tokens per step
        assert r["tokens_per_second"] == pytest.approx(3 * r["T"] / (r["ms"] / 1000), rel=1e-3)
    assert len(data["exponents"]) == len(series)
    assert all(e["T_range"] == [16, 32] and isinstance(e["exponent"], float) for e in data["exponents"])


@pytest.mark.slow
@pytest.mark.parametrize("causal", [False, True])
def test_targets_bound_the_fused_speedup_by_the_products_at_the_best_rate(tmp_path, causal):
    out = tmp_path / "targets.json"
    status = bench.main(
        [
            "targets",
            "--length",
            "64",
            "--long-lengths",
            "64",
            "128",
            "--batch",
            "2",
            "--d-model",
            "32",
            "--repeats",
            "2",
            "--warmup",
            "0",
            "--gemm-size",
            "128",
            "--window",
            "8",
            *(["--causal"] if causal else []),
            "--out",
            str(out),
        ]
    )
    assert status == 0
    data = json.loads(out.read_text())
    rate = data["gemm_flops_per_second"]
    assert rate > 0
    measured = {t["name"]: t["value"] for t in data["targets"]}
    assert [b["attention"] for b in data["speedup_bounds"]] == ["soft", "multihead"]
    for b in data["speedup_bounds"]:
        heads = 1 if b["attention"] == "soft" else 4
        flops = 6 * 2 * 2 * heads * 64 * 64 * (32 // heads)  # six (B*H, T, T) x D products
        assert b["floor_ms"] == pytest.approx(flops / rate * 1000 / (2 if causal else 1))
        assert b["largest_speedup"] == pytest.approx(b["math_ms"] / b["floor_ms"])
        assert b["measured_speedup"] == pytest.approx(measured[f"{b['attention']}: math / sdpa backend"])
        assert 0 < b["products_share_of_math"]


def test_scaling_skips_what_will_not_fit_the_time_budget(tmp_path):
    out = tmp_path / "scaling.json"
    bench.main(
        [
            "scaling",
            "--attention",
            "soft",
            "--backend",
            "math",
            "--lengths",
            "32",
            "64",
            "100000",
            "--repeats",
            "1",
            "--warmup",
            "0",
            "--max-seconds",
            "0.5",
            "--out",
            str(out),
        ]
    )
    statuses = {r["T"]: r["status"] for r in json.loads(out.read_text())["records"]}
    assert statuses == {32: "ok", 64: "ok", 100000: "skipped"}


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["scaling", "--attention", "sotf"], "did you mean 'soft'"),
        (["scaling", "--backend", "fast"], "--backend='fast'"),
        (["scaling", "--attention", "soft", "--attention-param", "windw=3"], "['windw']"),
        (["scaling", "--attention-param", "window"], "KEY=VALUE"),
        (["targets", "--gemm-size", "0"], "--gemm-size=0 is not allowed"),
        (["targets", "--length", "-1"], "--length=-1 is not allowed"),
        (["targets", "--gpu-dtype", "float32"], "--gpu-dtype=float32 is not allowed; choose one of bfloat16, float16"),
    ],
)
def test_bad_options_are_one_line_errors(argv, fragment, capsys):
    with pytest.raises(SystemExit) as info:
        bench.main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1


@pytest.fixture
def no_work(monkeypatch):
    """Any measurement fails the test: a refused command must stop before its first point."""
    from experiments.bench import decode, scaling

    def started(*args, **kwargs):
        raise AssertionError("the benchmark started measuring before refusing its options")

    monkeypatch.setattr(scaling, "run_series", started)
    monkeypatch.setattr(decode, "_measure", started)


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["scaling", "--lengths", "0"], "--lengths=0 is not allowed; it must be >= 1"),
        (["scaling", "--lengths", "64", "-64"], "--lengths=-64 is not allowed"),
        (["scaling", "--repeats", "0"], "--repeats=0 is not allowed"),
        (["decode", "--prompts", "0"], "--prompts=0 is not allowed"),
        (["loop", "--steps", "0"], "--steps=0 is not allowed; it must be >= 1"),
        (["loop", "--threads", "0"], "--threads=0 is not allowed; it must be >= 1"),
        (["ensemble", "--steps", "0"], "--steps=0 is not allowed; it must be >= 1"),
        (["nanogpt", "--runs", "0"], "--runs=0 is not allowed; it must be >= 1"),
        (["nanogpt", "--timeout", "nan"], "--timeout=nan is not allowed; it must be a number of seconds > 0"),
        (["scaling", "--out", "{file}/b.json"], "is a file, not a folder"),
        (["scaling", "--out", "/proc/x/b.json"], "cannot create the folder /proc/x"),
        (["scaling", "--out", "{tmp}"], "is a folder"),
        (["scaling", "--figure", "{file}/f.png"], "--figure"),
        (["decode", "--out", "{file}/d.json"], "is a file, not a folder"),
    ],
)
def test_bad_sizes_and_outputs_are_refused_before_any_work(argv, fragment, tmp_path, capsys, no_work):
    (tmp_path / "file").write_text("")
    argv = [a.format(file=tmp_path / "file", tmp=tmp_path) for a in argv]
    with pytest.raises(SystemExit) as info:
        bench.main([*argv, "--attention", "soft"] if argv[0] == "scaling" else argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1, err


def test_scaling_writes_its_results_as_it_goes(tmp_path, monkeypatch):
    """An interruption after the first series leaves that series in --out (complete: false)."""
    from experiments.bench import scaling

    real, calls = scaling.run_series, []

    def interrupted_second(*args, **kwargs):
        calls.append(args[0])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(scaling, "run_series", interrupted_second)
    out = tmp_path / "scaling.json"
    with pytest.raises(KeyboardInterrupt):
        bench.main(
            [
                "scaling",
                "--attention",
                "soft",
                "multihead",
                "--backend",
                "math",
                "--lengths",
                "16",
                "--repeats",
                "1",
                "--warmup",
                "0",
                "--out",
                str(out),
            ]
        )
    data = json.loads(out.read_text())
    assert data["complete"] is False
    assert [(r["attention"], r["T"], r["status"]) for r in data["records"]] == [("soft", 16, "ok")]


def test_a_bench_in_which_every_case_errored_exits_1_and_is_not_complete(tmp_path, capsys):
    """window=0 makes every point of the series fail to build: nothing was measured, so no success."""
    out = tmp_path / "scaling.json"
    argv = ["scaling", "--attention", "local", "--backend", "math", "--lengths", "8", "16"]
    code = bench.main([*argv, "--attention-param", "window=0", "--repeats", "1", "--warmup", "0", "--out", str(out)])
    data = json.loads(out.read_text())
    assert [r["status"] for r in data["records"]] == ["error", "skipped"]
    assert code == 1 and data["complete"] is False
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no case was measured (1 error, 1 skipped)" in err[0] and "window=0" in err[0]
    # the same series with a valid window measured something: a finished bench, exit 0
    assert (
        bench.main([*argv, "--attention-param", "window=4", "--repeats", "1", "--warmup", "0", "--out", str(out)]) == 0
    )
    assert json.loads(out.read_text())["complete"] is True


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_max_seconds_must_be_a_positive_budget(value, capsys, no_work):
    with pytest.raises(SystemExit) as info:
        bench.main(["scaling", "--attention", "soft", "--max-seconds", value])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"--max-seconds={value} is not allowed" in err and err.count("\n") == 1, err
