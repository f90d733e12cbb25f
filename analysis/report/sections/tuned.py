"""The tuned comparison of a ``hparams_search=tuned`` sweep: each cell at its own best configuration.

Reads the sweep's ``tuned.json`` (each cell's study: trials, best parameters) and the ``result.json`` of the
runs on fresh seeds (``trial.role``: ``tuned`` at the cell's best configuration, ``default`` at the shared
defaults). Shows the cells compared at their tuned settings, each cell's learning-rate sensitivity, its
expected best validation score against the number of trials (Dodge et al. 2019, with its spread), and says
where the ranking at the shared defaults differs from the tuned ranking; then each cell's study as Optuna
plots it (``analysis.report.figures.study_plots``) and the optuna-dashboard command that opens the studies. A test seed
used in tuning (a leak) is refused. ``python -m analysis.report.tuned`` writes this section alone.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from statistics import mean, stdev
from typing import Any, Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure as MplFigure

from analysis.command.errors import ReportError
from analysis.report.document.model import Cell, Code, Figure, Paragraph, Section, Table, fmt
from analysis.report.figures.figure_canvas import DPI, finish, given_axes
from analysis.report.figures.report_figures import safe_name
from analysis.report.figures.study_plots import dashboard_command, load_study, storage_of, study_plots
from analysis.report.plan.summary import ALPHA, welch_p
from analysis.report.sections.registry import SECTIONS
from analysis.stats.expected_max import expected_best, expected_best_curve
from analysis.stats.inference import holm

RECORD = "tuned.json"


class TunedError(ReportError):
    """A tuned sweep whose records cannot be compared; one line naming what is wrong."""


@dataclass
class CellResult:
    cell: str
    best_params: dict[str, Any]
    trials: list[dict[str, Any]]  # number, state, params, value
    tuned: list[float]  # the comparison metric of each final seed at the best configuration
    default: list[float]  # ... at the shared defaults
    tuned_seeds: list[int]
    default_seeds: list[int]


def _runs(sweep_dir: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted(sweep_dir.rglob("result.json")):
        try:
            out.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue  # an unreadable result is the collector's to report; here it is a missing seed
    return out


def check_no_leak(record: dict[str, Any], runs: list[dict[str, Any]]) -> None:
    """Raise TunedError when a seed that tested a cell also tuned it: its test score would be selected on."""
    for cell in record["cells"]:
        study = cell["study"]
        own = [r for r in runs if (r.get("config") or {}).get("trial.study") == study]
        tuning = {r["seed"] for r in own if (r.get("config") or {}).get("trial.role") == "tuning"}
        final = {r["seed"] for r in own if (r.get("config") or {}).get("trial.role") in ("tuned", "default")}
        if tuning & final:
            raise TunedError(
                f"cell {cell['cell']}: seed(s) {sorted(tuning & final)} both tuned and tested it; "
                "hydra.sweeper.final_seeds must be disjoint from hydra.sweeper.tuning_seeds"
            )


def at_best(config: dict[str, Any], best: dict[str, Any]) -> bool:
    """Whether a final run was trained at the cell's recorded best configuration: a rerun with more trials can
    find another best, and the old best's final seeds, still in the sweep folder, are another cell."""
    for key, value in best.items():
        got = config.get(key)
        if isinstance(value, float) and isinstance(got, (int, float)):
            if not math.isclose(got, value, rel_tol=1e-9):
                return False
        elif got != value:
            return False
    return True


def load(sweep_dir: str | Path) -> tuple[dict[str, Any], list[CellResult]]:
    """The sweep's record and each cell's tuning trials and final scores; refuses a leak."""
    sweep_dir = Path(sweep_dir)
    try:
        record = json.loads((sweep_dir / RECORD).read_text())
    except (OSError, ValueError) as err:
        raise TunedError(f"{sweep_dir / RECORD}: not a tuned sweep's record ({err})") from None
    runs = _runs(sweep_dir)
    check_no_leak(record, runs)
    metric = record["compare_on"]
    cells = []
    for cell in record["cells"]:
        own = [r for r in runs if (r.get("config") or {}).get("trial.study") == cell["study"]]

        best = cell.get("best_params") or {}

        def scores(
            role: str, own: list[dict[str, Any]] = own, best: dict[str, Any] = best
        ) -> tuple[list[float], list[int]]:
            done = [
                r
                for r in own
                if r["config"].get("trial.role") == role
                and r.get("status") == "completed"
                and metric in (r.get("metrics") or {})
                and (role != "tuned" or at_best(r["config"], best))
            ]
            done.sort(key=lambda r: r["seed"])
            return [float(r["metrics"][metric]) for r in done], [int(r["seed"]) for r in done]

        tuned, tuned_seeds = scores("tuned")
        default, default_seeds = scores("default")
        cells.append(
            CellResult(cell["cell"], cell.get("best_params") or {}, cell["trials"], tuned, default, tuned_seeds,
                       default_seeds)
        )  # fmt: skip
    return record, cells


def ranking(cells: list[CellResult], which: str, maximize: bool) -> list[str]:
    """The cells ordered best first by their mean final score at ``which`` (tuned | default) settings."""
    scored = [(mean(getattr(c, which)), c.cell) for c in cells if getattr(c, which)]
    return [cell for _, cell in sorted(scored, reverse=maximize)]


def ranking_sentence(default: list[str], tuned: list[str]) -> str:
    """Where the ranking at the shared defaults differs from the tuned one, in one sentence."""
    if not default or not tuned:
        return "No ranking to compare: a cell has no completed final seed at one of the two settings."
    if default == tuned:
        return f"Tuning each cell leaves the ranking as at the shared defaults: {' ≻ '.join(tuned)}."
    moved = [f"{c} {default.index(c) + 1} → {tuned.index(c) + 1}" for c in tuned if c in default
             and default.index(c) != tuned.index(c)]  # fmt: skip
    return (
        f"Tuning each cell changes the ranking: at the shared defaults {' ≻ '.join(default)}, tuned "
        f"{' ≻ '.join(tuned)} (rank at defaults → tuned: {'; '.join(moved)})."
    )


def swapped_pairs(default: list[str], tuned: list[str]) -> list[tuple[str, str]]:
    """The pairs (a, b) ranked a above b at the shared defaults and b above a when tuned."""
    both = [c for c in default if c in tuned]
    return [(a, b) for i, a in enumerate(both) for b in both[i + 1 :] if tuned.index(b) < tuned.index(a)]


def flip_noise(cells: list[CellResult], pairs: list[tuple[str, str]], alpha: float = ALPHA) -> str:
    """Whether the swapped pairs' order is beyond noise: the report's own test (Welch, Holm over the pairs).

    A swap is real only when the pair differs significantly at both settings: at the defaults one way and
    tuned the other. With no such pair the change is within noise; with fewer than two seeds a side it is
    untested.
    """
    by_name = {c.cell: c for c in cells}
    tests = [(pair, welch_p(by_name[pair[0]].default, by_name[pair[1]].default),
              welch_p(by_name[pair[0]].tuned, by_name[pair[1]].tuned)) for pair in pairs]  # fmt: skip
    if not tests or any(math.isnan(p) for _, *ps in tests for p in ps):
        return "untested: a swapped cell has fewer than two final seeds at one setting"
    holm_default = holm([t[1] for t in tests])
    holm_tuned = holm([t[2] for t in tests])
    real = [f"{a} vs {b}" for ((a, b), _, _), pd, pt in zip(tests, holm_default, holm_tuned)
            if pd < alpha and pt < alpha]  # fmt: skip
    test = f"Welch, Holm-corrected over the {len(tests)} swapped pair(s), α = {alpha}"
    if real:
        return f"beyond noise for {', '.join(real)} (significant at both settings; {test})"
    return f"within noise (no swapped pair differs significantly at both settings; {test})"


def lead_sentence(cells: list[CellResult], maximize: bool, metric: str) -> str:
    """The report's summary line for a tuned sweep: which cells' rank changed (defaults → tuned) and whether
    that change is within noise, or that the ranking is the same at tuned settings."""
    default, tuned = ranking(cells, "default", maximize), ranking(cells, "tuned", maximize)
    if not default or not tuned or set(default) != set(tuned):
        return f"Tuned comparison on {metric}: no ranking to compare (a cell lacks completed final seeds)."
    if default == tuned:
        return f"Tuned comparison on {metric}: the ranking is the same at tuned settings ({' ≻ '.join(tuned)})."
    moved = [f"{c} {default.index(c) + 1} → {tuned.index(c) + 1}" for c in tuned
             if default.index(c) != tuned.index(c)]  # fmt: skip
    pairs = swapped_pairs(default, tuned)
    return (
        f"Tuned comparison on {metric}: the ranking at tuned settings differs from the shared defaults "
        f"(rank at defaults → tuned: {'; '.join(moved)}); the change is {flip_noise(cells, pairs)}."
    )


def lead_section(sweep_dir: str | Path) -> Section:
    """The tuned sweep's line in the report's lead summary (``lead_sentence``)."""
    record, cells = load(sweep_dir)
    sentence = lead_sentence(cells, record["compare_direction"] == "maximize", record["compare_on"])
    return Section(f"Summary — tuned comparison ({Path(sweep_dir).name})", [Paragraph(sentence)])


def drawn_scores(trials: list[dict[str, Any]], maximize: bool) -> list[float]:
    """The scores of every trial the search drew, for the expected best of n trials (Dodge et al. 2019).

    A pruned trial was drawn and spent budget: it scores its last reported value (Optuna records it as the
    trial's value), or the worst drawn score where it reported none; leaving it out would shrink the budget
    and lift the curve. A failed trial (a crash, not an outcome of the configuration) is left out and counted
    in the table's trials column.
    """
    complete = [float(t["value"]) for t in trials if t["state"] == "complete" and t.get("value") is not None]
    pruned = [t.get("value") for t in trials if t["state"] == "pruned"]
    reported = complete + [float(v) for v in pruned if v is not None]
    if not reported:
        return []
    worst = min(reported) if maximize else max(reported)
    return reported + [worst] * sum(v is None for v in pruned)


def _spread(values: list[float]) -> str:
    if not values:
        return "–"
    return f"{fmt(mean(values))} ± {fmt(stdev(values))}" if len(values) > 1 else f"{fmt(values[0])} (1 seed)"


def sensitivity_figure(
    record: dict[str, Any], cells: list[CellResult], path: Path | None = None, ax=None
) -> Path | MplFigure:
    """Each cell's objective at the learning rates its study tried, and its expected best validation score after
    n trials (Dodge et al. 2019, ±1 sd). Saved to ``path`` (returns the path), or the figure (into ``ax``: two
    axes, sensitivity then expected best) without one."""
    given = given_axes(ax, 2)
    if given is None:
        fig = MplFigure(figsize=(10, 3.6), dpi=DPI, layout="constrained")
        FigureCanvasAgg(fig)
        lr_ax, ev_ax = fig.subplots(1, 2)
    else:
        fig, (lr_ax, ev_ax) = given
    maximize = record["direction"] == "maximize"
    for cell in cells:
        done = sorted(
            (t["params"]["optim.lr"], t["value"]) for t in cell.trials
            if t["state"] == "complete" and "optim.lr" in t["params"]
        )  # fmt: skip
        if done:
            lr_ax.plot([x for x, _ in done], [y for _, y in done], "o-", label=cell.cell, alpha=0.8)
        values = drawn_scores(cell.trials, maximize)
        if values:
            curve = expected_best_curve(values, maximize=maximize)
            n = [c[0] for c in curve]
            m = [c[1] for c in curve]
            sd = [c[2] for c in curve]
            ev_ax.plot(n, m, label=cell.cell)
            ev_ax.fill_between(n, [a - b for a, b in zip(m, sd)], [a + b for a, b in zip(m, sd)], alpha=0.2)
    lr_ax.set_xscale("log")
    lr_ax.set_xlabel("learning rate (optim.lr)")
    lr_ax.set_ylabel(f"{record['objective']} (tuning seeds)")
    lr_ax.set_title("learning-rate sensitivity")
    ev_ax.set_xlabel("trials")
    ev_ax.set_ylabel(f"expected best {record['objective']}")
    ev_ax.set_title("expected best vs budget (±1 sd)")
    for each in (lr_ax, ev_ax):
        each.legend(fontsize=7)
    return finish(fig, path, None)


def figures(record: dict[str, Any], cells: list[CellResult], out: Path) -> list[Figure]:
    """The learning-rate sensitivity of each cell and its expected best validation score against trials."""
    path = sensitivity_figure(record, cells, out / "tuned_sensitivity.png")
    assert isinstance(path, Path)
    return [
        Figure(
            path,
            "Left: each cell's validation objective at the learning rates its study tried (tuning seeds). "
            "Right: the expected best validation score after n trials (Dodge et al. 2019), ±1 standard deviation; "
            "pruned trials count as drawn, at their last reported score.",
        )
    ]


def studies_section(sweep_dir: Path, record: dict[str, Any], out: Path) -> Section:
    """Each cell's study as Optuna plots it (history, importance, parallel coordinates) and the optuna-dashboard
    command that opens the studies live; a note instead when the study storage is gone."""
    storage = storage_of(sweep_dir, record.get("storage"))
    section = Section("Studies", level=3)
    blocks: list[Any] = []
    for cell in record["cells"]:
        try:
            study = load_study(storage, cell["study"])
        except FileNotFoundError as err:  # no journal: nothing to plot, nothing for the dashboard to open
            return section.add(Paragraph(f"{err}: Optuna's plots and dashboard are left out.", kind="note"))
        except KeyError:  # Optuna's word for a study name the storage does not hold
            blocks.append(Paragraph(f"{cell['cell']}: no study {cell['study']!r} in {storage}.", kind="note"))
            continue
        stem = Path(safe_name("study", cell["study"])).stem
        drawn = study_plots(study, out, stem)
        blocks += [Figure(path, f"{cell['cell']}: {what}") for path, what in drawn]
        if not drawn:
            blocks.append(Paragraph(f"{cell['cell']}: fewer than two completed trials, nothing to plot.", kind="note"))
    section.add(
        Paragraph("Open the studies live (pip install optuna-dashboard), every trial with its parameters:"),
        Code(dashboard_command(storage)),
        *blocks,
    )
    return section


def tuned_section(sweep_dir: str | Path, out: str | Path) -> Section:
    """The section of the report for a tuned sweep (``tuned.json`` in ``sweep_dir``)."""
    record, cells = load(sweep_dir)
    metric = record["compare_on"]
    maximize_final = record["compare_direction"] == "maximize"
    default_rank = ranking(cells, "default", maximize_final)
    tuned_rank = ranking(cells, "tuned", maximize_final)
    maximize = record["direction"] == "maximize"
    rows: list[list[Cell | str]] = []
    for cell in cells:
        values = drawn_scores(cell.trials, maximize)
        ev = expected_best(values, len(values), maximize=maximize) if values else None
        states = {s: sum(t["state"] == s for t in cell.trials) for s in ("complete", "pruned", "fail")}
        rows.append(
            [
                cell.cell,
                ", ".join(f"{k}={fmt(v) if isinstance(v, float) else v}" for k, v in cell.best_params.items()) or "–",
                _spread(cell.tuned),
                _spread(cell.default),
                str(tuned_rank.index(cell.cell) + 1) if cell.cell in tuned_rank else "–",
                str(default_rank.index(cell.cell) + 1) if cell.cell in default_rank else "–",
                ", ".join(f"{n} {s}" for s, n in states.items() if n),
                f"{fmt(ev[0])} ± {fmt(ev[1])}" if ev else "–",
            ]
        )
    table = Table(
        ["cell", "best configuration", f"{metric} tuned", f"{metric} defaults", "rank tuned", "rank defaults",
         "trials", f"expected best {record['objective']}"],
        rows,
        caption=(
            f"Each cell tuned with the same budget ({record['n_trials']} trials on tuning seeds "
            f"{record['tuning_seeds']}, {record['objective']}), then its best configuration and the shared "
            f"defaults trained on fresh seeds {record['final_seeds']} and tested; mean ± sd over those seeds."
        ),
    )  # fmt: skip
    return Section(
        "Tuned comparison",
        [
            Paragraph(ranking_sentence(default_rank, tuned_rank)),
            table,
            *figures(record, cells, Path(out)),
            studies_section(Path(sweep_dir), record, Path(out)),
        ],
    )


@SECTIONS.register("tuned", order=80, inputs=("paths", "figures_dir"))
def tuned_sections(paths: Sequence[str | Path], figures_dir: Path) -> list[Section]:
    """A tuned sweep's cells at their own best settings against the shared defaults (hparams_search=tuned)."""
    return [tuned_section(path, figures_dir) for path in paths if (Path(path) / RECORD).is_file()]
