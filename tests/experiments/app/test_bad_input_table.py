"""Bad input to every sweeper and every place a run writes: one line, exit code 2, before any work.

Each row is a command line (``python -m experiments.train ...`` or ``python -m analysis.report ...``), the exit
code it must end with and a fragment of its first line on stderr. Placeholders: ``{d}`` is the row's scratch
folder, holding the files ``make_inputs`` writes (a broken claims file, a preset with a ``!!python`` tag, a plain
file to put a path under). A row with ``ro`` runs with ``{ro}`` a read-only bind mount of a folder (a user
namespace, skipped where the kernel does not allow one); a row with ``fsize`` runs under that ``ulimit -f``.
"""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.cell_fixtures import flat_config, result, write
from tests.helpers.config import TINY
from tests.helpers.env import ENV, LIMITED_FILES_ENV

TRAIN = [sys.executable, "-m", "experiments.train"]
REPORT = [sys.executable, "-m", "analysis.report"]

# a claim on a metric the reverse task never logs (it has no BLEU)
BLEU_CLAIM = """claims:
  - name: learned positions match sinusoids on BLEU
    metric: test/bleu
    a: {position: learned}
    b: {position: sinusoidal}
    expect: equivalent
    margin: 1.0
"""
GOOD_CLAIM = BLEU_CLAIM.replace("test/bleu", "val/loss")


def make_inputs(d: Path) -> None:
    """The files the rows point at, in the scratch folder ``d``."""
    (d / "broken.yaml").write_text("claims:\n  - name: x\n    metric: [val/loss\n")
    # never executed: the safe loader refuses the tag; the file it would touch must stay absent
    (d / "tag.yaml").write_text(f"claims: !!python/object/apply:os.system ['touch {d / 'pwned'}']\n")
    (d / "bleu.yaml").write_text(BLEU_CLAIM)
    (d / "a_file").write_text("a file, not a folder\n")
    presets = d / "cd" / "experiment"
    presets.mkdir(parents=True)
    (presets / "good.yaml").write_text("# @package _global_\ntrainer:\n  max_steps: 2\n")
    (presets / "broken.yaml").write_text("# @package _global_\ntrainer:\n  max_steps: [2\n")
    (presets / "tagged.yaml").write_text(
        f"# @package _global_\ntrainer:\n  max_steps: !!python/object/apply:os.system ['touch {d / 'pwned'}']\n"
    )
    (d / "ro").mkdir()
    for position, loss in (("sinusoidal", 1.0), ("rope", 0.8)):
        for seed in range(3):
            config = flat_config("copy", "multihead", position, seed)
            metrics = {"val/loss": loss + 0.01 * seed, "test/token_acc": 0.5 + 0.1 * seed - loss / 10}
            res = result(f"{position}{seed}", config, metrics)
            res["cost"]["step_ms"] = 10.0 + seed  # a run of today records its step time
            write(d / "results" / f"{position}_{seed}", res)


@dataclass(frozen=True)
class Row:
    name: str
    argv: tuple[str, ...]
    code: int
    says: str
    ro: bool = False  # {ro} is a read-only mount
    fsize: int | None = None  # the file size limit (ulimit -f), in KB
    completed_run: bool = False  # {ro} holds a completed run of argv first
    heavy: bool = False  # its check names the task, which imports Lightning: seconds even in-process


ADAPTIVE = ("-m", "task=reverse", "position=sinusoidal,learned", "hydra/sweeper=adaptive", *TINY)
# one trial and one final seed: a row that is not refused trains little
TUNED = ("-m", "hparams_search=tuned", "hydra.sweeper.n_trials=1", "hydra.sweeper.final_seeds=[1]", *TINY)
OPTUNA = ("-m", "hparams_search=optuna", "hydra.sweeper.n_trials=1", *TINY)

ROWS = [
    Row(
        "claims file with a YAML error",
        (*ADAPTIVE, "hydra.sweeper.claims_file={d}/broken.yaml"),
        2,
        "hydra.sweeper.claims_file={d}/broken.yaml: not valid YAML",
    ),
    Row(
        "claims file with a python tag",
        (*ADAPTIVE, "hydra.sweeper.claims_file={d}/tag.yaml"),
        2,
        "hydra.sweeper.claims_file={d}/tag.yaml: not valid YAML",
    ),
    Row(
        "claims file that is not there",
        (*ADAPTIVE, "hydra.sweeper.claims_file={d}/absent.yaml"),
        2,
        "hydra.sweeper.claims_file={d}/absent.yaml",
    ),
    Row(
        "claim on a metric the task never logs",
        (*ADAPTIVE, "hydra.sweeper.claims_file={d}/bleu.yaml"),
        2,
        "claims[0].metric='test/bleu': the task never logs it; choose one of",
        heavy=True,
    ),
    Row(
        "--config-dir preset with a YAML error",
        ("--config-dir", "{d}/cd", "experiment=broken", *TINY),
        2,
        "{d}/cd/experiment/broken.yaml: not valid YAML",
    ),
    Row(
        "--config-dir preset with a python tag",
        ("--config-dir", "{d}/cd", "experiment=tagged", *TINY),
        2,
        "{d}/cd/experiment/tagged.yaml: not valid YAML",
    ),
    Row(
        "--config-dir that is not a folder",
        ("--config-dir", "{d}/absent", "experiment=good", *TINY),
        2,
        "--config-dir {d}/absent: not a folder",
    ),
    Row(
        "log-scale interval from 0 (optuna)",
        (*OPTUNA, "optim.lr=tag(log,interval(0,0.01))"),
        2,
        "optim.lr=tag(log,interval(0,0.01)): a log-scale interval must start above 0",
    ),
    Row(
        "log-scale interval from 0 (tuned space)",
        (*TUNED, "optim.lr=tag(log,interval(0,0.01))"),
        2,
        "optim.lr=tag(log,interval(0,0.01)): a log-scale interval must start above 0",
    ),
    Row(
        "log-scale integer interval from 0",
        (*OPTUNA, "optim.warmup_steps=tag(log,interval(0,100))"),
        2,
        "optim.warmup_steps=tag(log,interval(0,100)): a log-scale interval must start above 0",
    ),
    Row(
        "a search space set under hydra.* without quotes",
        (*OPTUNA, "hydra.sweeper.params.optim.lr=tag(log,interval(1e-4,1e-2))"),
        2,
        "hydra.sweeper.params.optim.lr=tag(log,interval(1e-4,1e-2)): Hydra sweeps no key under hydra.*; quote it",
    ),
    Row(
        "storage under a file",
        (*OPTUNA, "hydra.sweeper.storage={d}/a_file/optuna.journal"),
        2,
        "hydra.sweeper.storage={d}/a_file/optuna.journal: {d}/a_file is a file, not a folder",
    ),
    Row(
        "sqlite storage under a file",
        (*OPTUNA, "hydra.sweeper.storage=sqlite:///{d}/a_file/study.db"),
        2,
        "hydra.sweeper.storage=sqlite:///{d}/a_file/study.db: {d}/a_file is a file, not a folder",
    ),
    Row(
        "storage with an unknown URL scheme",
        (*OPTUNA, "hydra.sweeper.storage=postgress://localhost/study"),
        2,
        "hydra.sweeper.storage=postgress://localhost/study: no database driver for 'postgress'",
    ),
    Row(
        "storage that is a folder",
        (*OPTUNA, "hydra.sweeper.storage={d}/cd"),
        2,
        "hydra.sweeper.storage={d}/cd is a folder; give a file",
    ),
    Row(
        "storage in a read-only folder",
        (*OPTUNA, "hydra.sweeper.storage={ro}/optuna.journal"),
        2,
        "hydra.sweeper.storage={ro}/optuna.journal: cannot write in {ro} (read-only file system)",
        ro=True,
    ),
    Row(
        "tuning_seeds=0",
        (*TUNED, "hydra.sweeper.tuning_seeds=0"),
        2,
        "hydra.sweeper.tuning_seeds=0: give a non-empty list of integer seeds",
    ),
    Row(
        "final_seeds=5",
        (*TUNED, "hydra.sweeper.final_seeds=5"),
        2,
        "hydra.sweeper.final_seeds=5: give a non-empty list of integer seeds",
    ),
    Row(
        "maximize a loss (optuna)",
        (*OPTUNA, "hydra.sweeper.direction=maximize"),
        2,
        "hydra.sweeper.direction=maximize on objective=val/loss, where lower is better",
        heavy=True,
    ),
    Row(
        "an objective never logged, whose name wants the other direction",
        (*OPTUNA, "objective=val/bleu"),
        2,
        "objective='val/bleu': the task never logs it",
        heavy=True,
    ),
    Row(
        "minimize an accuracy (tuned comparison)",
        (*TUNED, "hydra.sweeper.compare_on=test/token_acc"),
        2,
        "hydra.sweeper.compare_direction=minimize on hydra.sweeper.compare_on=test/token_acc, where higher",
        heavy=True,
    ),
    Row(
        "ulimit -f below Hydra's config files",
        (*TINY, "hydra.run.dir={d}/run"),
        2,
        "file size limit (ulimit -f) is 2 KB",
        fsize=2,
    ),
    Row(
        "ulimit -f below a report's figure",
        ("report", "{d}/results", "--out", "{d}/out"),
        2,
        "error: file too large writing {d}/out",
        fsize=8,
    ),
    Row(
        "completed run on a read-only file system",
        (*TINY, "hydra.run.dir={ro}/run"),
        0,
        "already completed",
        ro=True,
        completed_run=True,
    ),
]


def _fill(text: str, d: Path, ro: Path) -> str:
    return text.replace("{d}", str(d)).replace("{ro}", str(ro))


def _read_only_prefix(folder: Path) -> list[str]:
    """A user namespace in which ``folder`` is a read-only bind mount of itself."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare is absent: no read-only mount")
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("this kernel allows no user namespace: no read-only mount")
    mount = f'mount --bind {folder} {folder} && mount -o remount,ro,bind {folder} && exec "$@"'
    return ["unshare", "-rm", "sh", "-c", mount, "sh"]


def run_row(row: Row, d: Path) -> subprocess.CompletedProcess:
    """Run ``row`` in the scratch folder ``d`` (already holding ``make_inputs``'s files)."""
    ro = d / "ro"
    argv = [_fill(a, d, ro) for a in row.argv]
    command = [*REPORT, *argv[1:]] if row.argv[0] == "report" else [*TRAIN, *argv]
    if row.completed_run:
        first = subprocess.run(command, cwd=d, env=ENV, text=True, capture_output=True, timeout=600)
        assert first.returncode == 0, first.stderr
    prefix = _read_only_prefix(ro) if row.ro else []
    limit = None if row.fsize is None else row.fsize * 1024

    def file_size_limit() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [*prefix, *command],
        cwd=d,
        env=ENV if limit is None else LIMITED_FILES_ENV,
        text=True,
        capture_output=True,
        timeout=600,
        preexec_fn=file_size_limit,
    )


def first_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    return lines[0] if lines else ""


def _command_family(row: Row) -> tuple[str, ...]:
    """What a row's overrides go to: a multirun's sweeper (its first arguments name it), else the command."""
    return row.argv[:4] if row.argv[0] == "-m" else row.argv[:1]


# the rows refused by the command line's preflight, run in this process: the fast tier's share of the table
PREFLIGHT_ROWS = [r for r in ROWS if r.code == 2 and not r.ro and r.fsize is None and r.argv[0] != "report"]
# As a process of its own: every row the preflight does not refuse (a mount, a file size limit, the report, a
# completed run), and the first preflight row of each command family, which shows that the command line turns
# the preflight's refusal into exit 2 and one line for that sweeper; every preflight row's line is checked in
# this process (test_bad_input_is_refused_by_the_preflight), without a process start (about 7 s) per row.
COMMAND_LINE_ROWS = [r for r in ROWS if r not in PREFLIGHT_ROWS] + [
    next(r for r in PREFLIGHT_ROWS if _command_family(r) == family and not r.heavy)
    for family in dict.fromkeys(_command_family(r) for r in PREFLIGHT_ROWS)
]


@pytest.mark.slow
@pytest.mark.parametrize("row", COMMAND_LINE_ROWS, ids=[r.name for r in COMMAND_LINE_ROWS])
def test_bad_input_is_one_line_before_any_work(row: Row, tmp_path: Path) -> None:
    make_inputs(tmp_path)
    proc = run_row(row, tmp_path)
    said = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == row.code, proc.stderr[-3000:]
    assert len(said) == 1, proc.stderr[-3000:]
    assert _fill(row.says, tmp_path, tmp_path / "ro") in said[0]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "pwned").exists()  # a !!python tag is never executed
    if row.code == 2:  # refused before any work: no run folder, no study, no sweep folder
        assert not (tmp_path / "multirun").exists() and not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "row", [pytest.param(r, id=r.name, marks=[pytest.mark.slow] if r.heavy else []) for r in PREFLIGHT_ROWS]
)
def test_bad_input_is_refused_by_the_preflight(row: Row, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from experiments.app.preflight import PreflightError, preflight

    make_inputs(tmp_path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PreflightError) as refused:
        preflight([_fill(a, tmp_path, tmp_path / "ro") for a in row.argv])
    said = str(refused.value)
    assert "\n" not in said and _fill(row.says, tmp_path, tmp_path / "ro") in said
    assert not (tmp_path / "pwned").exists() and not (tmp_path / "multirun").exists()
