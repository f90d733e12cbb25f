"""The tuned section shows each cell's study as Optuna plots it (history, importance, parallel coordinates) as
static images, and the optuna-dashboard command that opens the studies' journal."""

from __future__ import annotations

import shlex
import warnings
from pathlib import Path

import pytest

from analysis.report.document.model import Code, Document, Figure, Paragraph, Section, to_html
from analysis.report.sections.tuned import tuned_section
from tests.helpers.studies import tuned_sweep

optuna = pytest.importorskip("optuna")

SCORES = {"soft": {"default": [2.0, 2.1], "tuned": [1.9, 1.8]}, "local": {"default": [2.5, 2.4], "tuned": [1.5, 1.6]}}
PNG = b"\x89PNG\r\n\x1a\n"


def _studies(sweep: Path, trials: int = 4, cells: tuple[str, ...] = tuple(SCORES)) -> Path:
    """Each cell's study written by Optuna itself into the sweep's journal, as the tuned sweeper leaves it."""
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    journal = sweep / "optuna.journal"
    storage = JournalStorage(JournalFileBackend(str(journal)))
    for attention in cells:
        study = optuna.create_study(study_name=f"s__attention_{attention}", storage=storage,
                                    sampler=optuna.samplers.RandomSampler(seed=1))  # fmt: skip
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            study.optimize(
                lambda t: (
                    abs(t.suggest_float("optim.lr", 1e-4, 1e-2, log=True) - 3e-3) * 100
                    + t.suggest_int("optim.warmup_steps", 0, 350, step=50) / 350
                ),
                n_trials=trials,
            )
    return journal


def _blocks(section: Section) -> list:
    found = []
    for block in section.blocks:
        found += _blocks(block) if isinstance(block, Section) else [block]
    return found


def test_the_tuned_section_has_each_studys_three_plots_and_the_dashboard_command(tmp_path: Path) -> None:
    sweep = tuned_sweep(tmp_path, SCORES)
    journal = _studies(sweep)
    section = tuned_section(sweep, tmp_path / "out")
    blocks = _blocks(section)

    plots = [b for b in blocks if isinstance(b, Figure) and "tuned_sensitivity" not in b.path.name]
    for attention in SCORES:
        captions = [b.caption for b in plots if b.caption.startswith(f"attention={attention}:")]
        assert len(captions) == 3, captions
        assert any("history" in c for c in captions) and any("importance (PED-ANOVA)" in c for c in captions)
        assert any("parallel coordinates" in c for c in captions)
    for plot in plots:
        assert plot.path.read_bytes().startswith(PNG) and plot.path.with_suffix(".svg").is_file()

    (command,) = [b.text for b in blocks if isinstance(b, Code)]
    assert shlex.split(command) == ["optuna-dashboard", str(journal.resolve())]
    html = to_html(Document("r", [section]))
    assert html.count("data:image/png") == len(plots) + 1 and "optuna-dashboard" in html  # + the sensitivity figure


def test_without_the_journal_the_plots_are_left_out_with_a_note(tmp_path: Path) -> None:
    sweep = tuned_sweep(tmp_path, SCORES)
    blocks = _blocks(tuned_section(sweep, tmp_path / "out"))
    assert [b.path.name for b in blocks if isinstance(b, Figure)] == ["tuned_sensitivity.png"]
    notes = [b.text for b in blocks if isinstance(b, Paragraph) and b.kind == "note"]
    assert any("optuna.journal" in n and "left out" in n for n in notes), notes


def test_a_cell_whose_study_is_not_in_the_journal_is_named(tmp_path: Path) -> None:
    sweep = tuned_sweep(tmp_path, SCORES)
    _studies(sweep, cells=("soft",))
    blocks = _blocks(tuned_section(sweep, tmp_path / "out"))
    captions = [b.caption for b in blocks if isinstance(b, Figure) and "tuned_sensitivity" not in b.path.name]
    assert len(captions) == 3 and all(c.startswith("attention=soft:") for c in captions)
    notes = [b.text for b in blocks if isinstance(b, Paragraph) and b.kind == "note"]
    assert notes == [f"attention=local: no study 's__attention_local' in {(sweep / 'optuna.journal').resolve()}."]
