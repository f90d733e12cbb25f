"""Every report figure function draws into axes the caller gives (``ax=``) and returns their figure.

The figure functions are found by reading the report's modules: a public function that makes a figure or its
axes (``.subplots(``, ``panel_grid(``, ``Figure(figsize``, pyplot) is one. Each has a case below that checks
what it drew against values computed here; a new figure function fails ``test_every_figure_function_has_a_case``
until it takes ``ax`` and has one.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from statistics import mean
from typing import Any, Callable

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure

import analysis.report

DRAWS = re.compile(r"\.subplots\(|panel_grid\(|Figure\(figsize|\bplt\.")
# module.function -> why it takes no ax
NO_AX = {
    "study_plots.study_plots": "Optuna's matplotlib plots make their own figure; Optuna's functions take no ax",
}


def figure_functions() -> dict[str, Callable]:
    found = {}
    for info in pkgutil.walk_packages(analysis.report.__path__, "analysis.report."):
        short = info.name.rpartition(".")[2]
        if short.startswith("_") or short == "figure_canvas":  # __main__ runs; the canvas is the helpers
            continue
        module = importlib.import_module(info.name)
        for name, function in vars(module).items():
            if name.startswith("_") or not inspect.isfunction(function) or function.__module__ != module.__name__:
                continue
            if DRAWS.search(inspect.getsource(function)):
                found[f"{short}.{name}"] = function
    return found


def _lines(ax) -> dict[str, np.ndarray]:
    return {line.get_gid(): np.asarray(line.get_ydata(), float) for line in ax.get_lines() if line.get_gid()}


# ---------------------------------------------------------------- the cases: (call with ax, axes, check)

# two seeds at three lengths, unequal: the mean over seeds differs from either seed
LENGTHS = pd.DataFrame(
    [
        {"attention": "soft", "position": p, "seed": s, "length": n, "value": v}
        for p, rows in {"rope": [(8, 0.9, 0.8), (16, 0.5, 0.3), (32, 0.2, 0.1)],
                        "alibi": [(8, 0.7, 0.6), (16, 0.6, 0.4), (32, 0.5, 0.2)]}.items()
        for n, v0, v1 in rows
        for s, v in ((0, v0), (1, v1))
    ]
)  # fmt: skip
ROPE_MEANS = [mean([0.9, 0.8]), mean([0.5, 0.3]), mean([0.2, 0.1])]


def _length_generalisation(ax: Any) -> Any:
    from analysis.report.figures.plots import length_generalisation

    return length_generalisation(LENGTHS, "seq_acc", [8, 16], {"rope": "C0", "alibi": "C1"}, "t", ax=ax)


def _learning_curves(ax: Any) -> Any:
    from analysis.report.figures.plots import learning_curves

    curves = LENGTHS.rename(columns={"length": "step"})
    return learning_curves(curves, "val/loss", {"rope": "C0", "alibi": "C1"}, "t", ax=ax)


def _parameter_curve(ax: Any) -> Any:
    from analysis.report.figures.plots import parameter_curve

    summary = pd.DataFrame({"x": [1, 2, 4], "mean": [0.2, 0.5, 0.9], "ci_half": [0.1, 0.05, np.nan]})
    return parameter_curve(summary, "seq_acc", "window", {}, "t", ax=ax)


WEIGHTS = np.array(
    [[[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]], [[1.0, 0.0, 0.0], [0.9, 0.1, 0.0], [0.1, 0.1, 0.8]]]
)


def _attention_maps(ax: Any) -> Any:
    from analysis.report.figures.plots import attention_maps

    return attention_maps({"encoder_self/0": WEIGHTS}, {}, "t", ax=ax)  # one layer, two heads


BENCH = pd.DataFrame(
    {
        "variant": ["soft"] * 3,
        "T": [256, 64, 128],
        "ms": [9.0, 1.0, 3.0],
        "peak_mb": [40.0, 10.0, 20.0],
        "status": ["ok", "ok", "ok"],
    }
)


def _bench_scaling(ax: Any) -> Any:
    from analysis.report.figures.plots import bench_scaling

    return bench_scaling(BENCH, {"soft": "C0"}, ax=ax)


def _metric_vs_length(ax: Any) -> Any:
    from analysis.report.figures.summary_figure import metric_vs_length

    data = LENGTHS[LENGTHS["position"] == "rope"].assign(label="a")[["label", "length", "value"]]
    return metric_vs_length(data, ["a"], "seq_acc", None, "t", ax=ax)


POINTS = pd.DataFrame(
    {
        "row": ["soft", "local"],
        "column": ["rope", "rope"],
        "mean": [0.9, 0.7],
        "half": [0.05, np.nan],
        "cost": [12.0, 5.0],
        "cost_low": [11.0, np.nan],
        "cost_high": [13.0, np.nan],
        "memory": [300.0, 100.0],
        "pareto": [True, True],
    }
)


def _draw_frontier(ax: Any) -> Any:
    from analysis.report.figures.frontier_figure import draw_frontier
    from analysis.report.plan.frontier_data import CostSource, Panel

    panel = Panel("at length 16", "seq_acc", "higher", pd.Series(dtype=float))
    source = CostSource("runs", "ms per step", pd.DataFrame())
    return draw_frontier([[(panel, source, POINTS)]], {"rope": "C0"}, {"soft": "o", "local": "s"}, "t",
                         ("attention", "position"), ax=ax)  # fmt: skip


# entropy ratio of the encoder's self attention at two lengths, two seeds of one cell
STATS = pd.DataFrame(
    [
        {"run_id": f"r{s}", "task": "copy", "cell": "soft+rope", "seed": s, "layer": "encoder_self/0",
         "block": "encoder_self", "length": n, "stat": stat, "value": v * (1.0 if stat == "entropy_ratio" else 3.0)}
        for s, values in ((0, (0.9, 0.6)), (1, (0.7, 0.2)))
        for n, v in zip((8, 16), values)
        for stat in ("entropy_ratio", "distance")
    ]
)  # fmt: skip


def _curves_figure(ax: Any) -> Any:
    from analysis.report.sections.attention_section import curves_figure

    return curves_figure(STATS, "copy", None, ax=ax)  # panels: entropy ratio, distance (encoder_self)


TRIALS = [
    {"number": 0, "state": "complete", "params": {"optim.lr": 3e-3}, "value": 1.5},
    {"number": 1, "state": "complete", "params": {"optim.lr": 1e-3}, "value": 2.0},
]


def _sensitivity_figure(ax: Any) -> Any:
    from analysis.report.sections.tuned import CellResult, sensitivity_figure

    cell = CellResult("attention=soft", {"optim.lr": 3e-3}, TRIALS, [], [], [], [])
    return sensitivity_figure({"direction": "minimize", "objective": "val/loss"}, [cell], ax=ax)


def _check_length(axes: list) -> None:
    np.testing.assert_allclose(_lines(axes[0])["level:rope"], ROPE_MEANS)


def _check_curves(axes: list) -> None:
    np.testing.assert_allclose(_lines(axes[0])["level:rope"], ROPE_MEANS)  # the bold line: the mean over seeds


def _check_parameter(axes: list) -> None:
    np.testing.assert_allclose(axes[0].get_lines()[0].get_ydata(), [0.2, 0.5, 0.9])


def _check_maps(axes: list) -> None:
    for head, ax in enumerate(axes):
        np.testing.assert_allclose(np.asarray(ax.get_images()[0].get_array()), WEIGHTS[head])


def _check_bench(axes: list) -> None:
    time_line, memory_line = axes[0].get_lines()[0], axes[1].get_lines()[0]
    np.testing.assert_allclose(time_line.get_xdata(), [64, 128, 256])  # sorted by length
    np.testing.assert_allclose(time_line.get_ydata(), [1.0, 3.0, 9.0])
    np.testing.assert_allclose(memory_line.get_ydata(), [10.0, 20.0, 40.0])


def _check_summary(axes: list) -> None:
    np.testing.assert_allclose(_lines(axes[0])["cell:a"], ROPE_MEANS)


def _check_frontier(axes: list) -> None:
    points = {tuple(xy) for c in axes[0].collections if isinstance(c, PathCollection) for xy in c.get_offsets()}
    assert points == {(12.0, 0.9), (5.0, 0.7)}


def _check_attends(axes: list) -> None:
    entropy, distance = (_lines(ax)["cell:soft+rope"] for ax in axes)
    np.testing.assert_allclose(entropy, [mean([0.9, 0.7]), mean([0.6, 0.2])])
    np.testing.assert_allclose(distance, [3 * mean([0.9, 0.7]), 3 * mean([0.6, 0.2])])


def _check_sensitivity(axes: list) -> None:
    lr, expected = axes[0].get_lines()[0], axes[1].get_lines()[0]
    np.testing.assert_allclose(lr.get_xdata(), [1e-3, 3e-3])
    np.testing.assert_allclose(lr.get_ydata(), [2.0, 1.5])
    # the expected best of n draws with replacement from {1.5, 2.0}, minimised: n=1 the mean; n=2 the lower unless
    # both draws are 2.0 (probability 1/4)
    np.testing.assert_allclose(expected.get_ydata(), [1.75, 0.75 * 1.5 + 0.25 * 2.0])


CASES: dict[str, tuple[Callable, int, Callable]] = {
    "plots.length_generalisation": (_length_generalisation, 1, _check_length),
    "plots.learning_curves": (_learning_curves, 1, _check_curves),
    "plots.parameter_curve": (_parameter_curve, 1, _check_parameter),
    "plots.attention_maps": (_attention_maps, 2, _check_maps),
    "plots.bench_scaling": (_bench_scaling, 2, _check_bench),
    "summary_figure.metric_vs_length": (_metric_vs_length, 1, _check_summary),
    "frontier_figure.draw_frontier": (_draw_frontier, 1, _check_frontier),
    "attention_section.curves_figure": (_curves_figure, 2, _check_attends),
    "tuned.sensitivity_figure": (_sensitivity_figure, 2, _check_sensitivity),
}


def test_every_figure_function_has_a_case_and_takes_ax() -> None:
    found = figure_functions()
    assert set(found) - set(NO_AX) == set(CASES), "a figure function without a case here, or a case without one"
    for name, function in found.items():
        if name not in NO_AX:
            assert "ax" in inspect.signature(function).parameters, f"{name} takes no ax"


@pytest.mark.parametrize("name", sorted(CASES))
def test_draws_into_the_given_axes_and_returns_their_figure(name: str) -> None:
    draw, n, check = CASES[name]
    fig = Figure()
    axes = list(np.ravel(fig.subplots(1, n, squeeze=False)))
    assert draw(axes if n > 1 else axes[0]) is fig
    check(axes)
