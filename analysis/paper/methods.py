"""A "Methods" paragraph drafted from the runs, for the reader to edit: ``methods.md`` and ``methods.tex``.

Everything in it is read from the runs' result.json files (their resolved config,
cost and provenance) and from what the report computed; citation keys point into
the report's ``references.bib``. Where the runs differ in a setting the paragraph
gives every value found instead of one. The same sentences are rendered twice: to
Markdown with pandoc citations (``[@key]``) and to LaTeX with ``\\cite{key}``.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence, Union

import pandas as pd

from analysis.paper.bibliography import ARCHITECTURE, Bibliography, variant_origin
from analysis.paper.latex import tex_escape
from analysis.stats import inference
from attnlab.roles import ROLES


class Cite:
    """Citation keys inside a sentence."""

    def __init__(self, keys: Sequence[str]) -> None:
        self.keys = list(dict.fromkeys(keys))


Part = Union[str, Cite]


def _render(parts: Iterable[Part], tex: bool) -> str:
    out = []
    for part in parts:
        if isinstance(part, Cite):
            if part.keys:
                out.append(
                    f"~\\cite{{{','.join(part.keys)}}}" if tex else f" [{'; '.join('@' + k for k in part.keys)}]"
                )
        else:
            out.append(tex_escape(part) if tex else part)
    return "".join(out)


def _values(done: pd.DataFrame, key: str) -> list:
    """The distinct values of a config key among the runs, in order of frequency (missing left out)."""
    column = f"config.{key}" if f"config.{key}" in done.columns else key
    if column not in done.columns:
        return []
    found = Counter(
        json.dumps(v, default=str)
        for v in done[column]
        if v is not None and v is not pd.NA and not (isinstance(v, float) and math.isnan(v))  # pd.NA: an Int64 gap
    )
    return [json.loads(v) for v, _ in found.most_common()]


def _text(values: list, unit: str = "") -> str:
    if not values:
        return "unknown"
    shown = [f"{_plain(v)}{unit}" for v in values]
    return shown[0] if len(shown) == 1 else " or ".join([", ".join(shown[:-1]), shown[-1]])


def _plain(v) -> str:
    if isinstance(v, list):
        return "(" + ", ".join(map(_plain, v)) + ")"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _range(values: Iterable[float]) -> str:
    xs = sorted({int(v) for v in values if v is not None and math.isfinite(float(v))})
    if not xs:
        return "unknown"
    return f"{xs[0]:,}" if len(xs) == 1 else f"{xs[0]:,} to {xs[-1]:,}"


def _variants(done: pd.DataFrame, column: str, registry: str, bib: Bibliography, what: str) -> list[Part]:
    names = sorted(done[column].dropna().astype(str).unique())
    parts: list[Part] = [f"{what}: "]
    for i, name in enumerate(names):
        parts += [("" if i == 0 else ", ") + name, Cite(bib.keys_of(variant_origin(registry, name)))]
    return parts


def _package(done: pd.DataFrame, name: str) -> str:
    versions = Counter(
        str(p.get(name))
        for p in done.get("env.packages", pd.Series(dtype=object))
        if isinstance(p, dict) and p.get(name)
    )
    return ", ".join(v for v, _ in versions.most_common()) or "unknown"


def paragraphs(
    frame: pd.DataFrame, bib: Bibliography, statistics: Sequence[str], metrics: Sequence[str]
) -> list[list[Part]]:
    """The Methods text as paragraphs of parts (plain text and citations)."""
    done = frame[frame["status"] == "completed"]
    if done.empty:
        done = frame
    return [_setup(done, bib), _budget(done), _analysis(bib, statistics, metrics), _software(done)]


def _setup(done: pd.DataFrame, bib: Bibliography) -> list[Part]:
    """The model, the tasks with their lengths, and the variants compared."""
    tasks = sorted(done["task"].astype(str).unique())
    setup: list[Part] = ["We train "]
    setup += [f"a {_text(_values(done, 'model.arch'))} Transformer", Cite(bib.keys_of(ARCHITECTURE))]
    setup += [
        f" with d_model = {_text(_values(done, 'model.d_model'))}, "
        f"{_text(_values(done, 'model.encoder_layers'))} encoder and "
        f"{_text(_values(done, 'model.decoder_layers'))} decoder layers, feed-forward width "
        f"{_text(_values(done, 'model.ffn_dim'))}, {_text(_values(done, 'model.norm'))}-norm residual blocks, "
        f"dropout {_text(_values(done, 'model.dropout'))} "
        f"({_range(done.get('cost.params', pd.Series(dtype=float)))} parameters), on "
    ]
    for i, task in enumerate(tasks):
        runs = done[done["task"] == task]
        lengths = _values(runs, "task.train_lengths")
        evals = _values(runs, "task.eval_lengths")
        spans = " or ".join("–".join(map(str, v)) for v in lengths if isinstance(v, list) and len(v) == 2)
        shown = " or ".join(", ".join(map(str, v)) for v in evals if isinstance(v, list))
        detail = f" (training lengths {spans}, evaluated at lengths {shown or 'unknown'})" if spans else ""
        setup += [("" if i == 0 else "; ") + task, Cite(bib.keys_of(variant_origin("task", task))), detail]
    setup += [". We compare "]
    setup += _variants(done, "attention", "attention", bib, "attention types")
    roles = [r for r in ROLES if r in done.columns and done[r].notna().any()]
    if roles:
        setup += [f" (per role: {', '.join(f'{r} ' + _text(sorted(done[r].dropna().unique())) for r in roles)})"]
    setup += ["; and "]
    setup += _variants(done, "position", "position", bib, "position encodings")
    setup += ["."]
    return setup


def _budget(done: pd.DataFrame) -> list[Part]:
    """The training budget every cell shares, and how many seeds, runs and cells there are."""
    schedule = _text(_values(done, "optim.schedule"))
    floor = _values(done, "optim.min_lr_ratio")
    decay = f"{schedule} decay" + (f" to {_text(floor)} of the peak" if schedule == "cosine" else "")
    budget: list[Part] = [
        f"Every cell trains for {_text(_values(done, 'trainer.max_steps'))} steps with batch size "
        f"{_text(_values(done, 'task.batch_size'))} and AdamW (learning rate {_text(_values(done, 'optim.lr'))}, "
        f"betas {_text(_values(done, 'optim.betas'))}, weight decay {_text(_values(done, 'optim.weight_decay'))}, "
        f"gradient clipping at {_text(_values(done, 'optim.grad_clip'))}), with a linear warm-up over "
        f"{_text(_values(done, 'optim.warmup_steps'))} steps and {decay}. "
    ]
    seeds = done.groupby(["task", "cell"])["seed"].nunique() if "cell" in done.columns else pd.Series(dtype=int)
    seed_text = _range(seeds.tolist()) if len(seeds) else "unknown"
    budget += [
        f"A cell is one configuration; each is trained with {seed_text} seed(s), "
        f"{len(done)} completed runs in {len(seeds)} cells in all."
    ]
    return budget


def _analysis(bib: Bibliography, statistics: Sequence[str], metrics: Sequence[str]) -> list[Part]:
    """The statistics the report used, each with its citation, and the translation metrics when shown."""
    stat_keys = {name: bib.keys_of(f"statistics: {name}") for name in statistics}
    analysis: list[Part] = []
    if "t-interval" in statistics:
        analysis += [
            "We report the mean over seeds with the half-width of its 95% t-interval",
            Cite(stat_keys["t-interval"]),
            ". ",
        ]
    else:
        analysis += ["With one seed per cell we report single runs; no interval or test is possible. "]
    if "welch" in statistics:
        analysis += [
            "Cells are compared with Welch's t-test",
            Cite(stat_keys["welch"]),
            " (against the best cell of each column, and against the baseline), and the p-values of each "
            "family are corrected with Holm's procedure",
            Cite(stat_keys.get("holm", [])),
            f" at α = {inference.ALPHA}",
        ]
        analysis += (
            [", with Cohen's d as the effect size", Cite(stat_keys["cohen-d"])] if "cohen-d" in statistics else []
        )
        analysis += [". "]
    if "tost" in statistics:
        analysis += ["Equivalence claims use two one-sided tests", Cite(stat_keys["tost"]), ". "]
    shown = [m.rsplit("/", 1)[-1] for m in metrics]
    metric_cites = [k for m in ("bleu", "chrf") if m in shown for k in bib.keys_of(f"metric {m}")]
    if metric_cites:
        analysis += ["Translations are scored with sacreBLEU's BLEU and chrF", Cite(metric_cites), ". "]
    return analysis


def _software(done: pd.DataFrame) -> list[Part]:
    """The versions the runs recorded: attnlab, its git commit, PyTorch, Lightning, Python and the device."""
    software: list[Part] = [
        f"The runs used attnlab {_package(done, 'attnlab')} "
        f"(git {_text([str(s)[:10] for s in _values(done, 'env.git_sha')])}), "
        f"PyTorch {_package(done, 'torch')}, Lightning {_package(done, 'lightning')} and Python "
        f"{_text(_values(done, 'env.python'))} on {_text(_values(done, 'env.device'))}."
    ]
    return software


def write_methods(
    out: Path, frame: pd.DataFrame, bib: Bibliography, statistics: Sequence[str], metrics: Sequence[str]
) -> tuple[Path, Path]:
    """``methods.md`` and ``methods.tex`` in ``out``; their citations are keys of ``references.bib``."""
    paras = paragraphs(frame, bib, statistics, metrics)
    md = "## Methods\n\n" + "\n\n".join(_render(p, tex=False).strip() for p in paras if p) + "\n"
    tex = (
        "% Drafted from the runs by attnlab; citations are keys of references.bib. Edit freely.\n"
        "\\section*{Methods}\n\n" + "\n\n".join(_render(p, tex=True).strip() for p in paras if p) + "\n"
    )
    (out / "methods.md").write_text(md, encoding="utf-8")
    (out / "methods.tex").write_text(tex, encoding="utf-8")
    return out / "methods.md", out / "methods.tex"
