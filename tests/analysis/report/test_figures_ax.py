"""Figure helpers draw into a notebook's axes and return the figure; with a path they still save it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from analysis.report.figures import plots as figures

# two panels (attention), two lines (position), three seeds at three lengths: unequal values per seed
DATA = pd.DataFrame(
    [
        {"attention": a, "position": p, "seed": s, "length": n, "value": v}
        for (a, p, base) in [
            ("soft", "rope", 0.9),
            ("soft", "alibi", 0.5),
            ("local", "rope", 0.7),
            ("local", "alibi", 0.2),
        ]
        for s, jitter in [(0, 0.0), (1, 0.05), (2, -0.02)]
        for n, v in [(8, base + jitter), (16, base / 2 + jitter), (32, base / 4 + 3 * jitter)]
    ]
)
COLORS = {"rope": "C0", "alibi": "C1"}


def test_length_curves_draw_into_the_given_axes_and_return_their_figure() -> None:
    fig = Figure()
    axes = fig.subplots(1, 2)
    out = figures.length_generalisation(DATA, "seq_acc", [2, 12], COLORS, "t", ax=axes, panels=["soft", "local"])
    assert out is fig
    for ax, attention in zip(axes, ["soft", "local"]):
        drawn = {line.get_gid(): line.get_ydata() for line in ax.get_lines() if line.get_gid()}
        for position in ("rope", "alibi"):
            here = DATA[(DATA.attention == attention) & (DATA.position == position)]
            expected = here.groupby("length")["value"].mean().to_numpy()  # the mean over seeds per length
            np.testing.assert_allclose(drawn[f"level:{position}"], expected)


def test_too_few_axes_is_one_line() -> None:
    with pytest.raises(ValueError, match="draws 2 panels; give 2 axes"):
        figures.length_generalisation(DATA, "seq_acc", None, COLORS, "t", ax=Figure().subplots())


def test_parameter_curve_into_one_axes_and_to_a_file(tmp_path: Path) -> None:
    summary = pd.DataFrame({"x": [1, 2, 4], "mean": [0.2, 0.5, 0.9], "ci_half": [0.1, 0.05, np.nan]})
    fig = Figure()
    ax = fig.subplots()
    assert figures.parameter_curve(summary, "seq_acc", "window", {}, "t", ax=ax) is fig
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), [0.2, 0.5, 0.9])
    path = figures.parameter_curve(summary, "seq_acc", "window", {}, "t", tmp_path / "w.png")
    assert path == tmp_path / "w.png" and path.stat().st_size > 0
