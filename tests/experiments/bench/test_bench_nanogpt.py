"""The nanoGPT side-by-side bench (experiments/bench/nanogpt.py): its refusals, what it reads off nanoGPT's log,
and a pair run against a stand-in clone that checks it is given nanoGPT's CPU recipe and its encoded data."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from experiments.bench.nanogpt import CLONE_FILES, Side, _nanogpt_val_loss, ratios
from tests.helpers.env import environment
from tests.helpers.paths import ROOT

# the recipe's flags the stand-in insists on, written out here rather than read from the module
RECIPE_FLAGS = ["--device=cpu", "--compile=False", "--eval_iters=20", "--block_size=64", "--batch_size=12",
                "--n_layer=4", "--n_head=4", "--n_embd=128", "--dropout=0.0"]  # fmt: skip

STAND_IN_TRAIN = f"""
import os, sys, time
args = sys.argv[1:]
missing = [flag for flag in {RECIPE_FLAGS!r} if flag not in args]
assert args[0] == "config/train_shakespeare_char.py" and not missing, (args, missing)
assert os.environ["OMP_NUM_THREADS"] == "1"
assert open("data/shakespeare_char/train.bin").read() == "encoded", "prepare.py did not run on the text"
steps = int([a for a in args if a.startswith("--max_iters=")][0].split("=")[1])
end = time.process_time() + 0.5  # CPU the bench must account to this child
while time.process_time() < end:
    pass
print("step 0: train loss 4.1700, val loss 4.1650")
print(f"iter {{steps}}: loss 2.0")
print(f"step {{steps}}: train loss 1.7648, val loss 1.8857")
"""

STAND_IN_PREPARE = """
text = open("input.txt").read()
assert text.startswith("First Citizen"), text[:20]
open("train.bin", "w").write("encoded")
"""


def _stand_in_clone(root: Path) -> Path:
    for name in CLONE_FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / "config").mkdir(exist_ok=True)
    (root / "config/train_shakespeare_char.py").write_text("")
    (root / "model.py").write_text("")
    (root / "configurator.py").write_text("")
    (root / "train.py").write_text(STAND_IN_TRAIN)
    (root / "data/shakespeare_char/prepare.py").write_text(STAND_IN_PREPARE)
    return root


def _text(path: Path) -> Path:
    path.write_text("First Citizen:\n" + "Before we proceed any further, hear me speak.\n" * 300, encoding="utf-8")
    return path


def _bench(*args: str, cwd: Path = ROOT, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "experiments.bench", "nanogpt", *args],
        cwd=cwd,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_the_last_evaluation_line_of_nanogpts_log_is_its_validation_loss() -> None:
    log = textwrap.dedent("""\
        step 0: train loss 4.1676, val loss 4.1649
        iter 0: loss 4.1828, time 781.33ms, mfu -100.00%
        step 250: train loss 2.4293, val loss 2.4447
        iter 1900: loss 1.6849, time 47.08ms, mfu 0.02%
        step 2000: train loss 1.7648, val loss 1.8857
        """)
    assert _nanogpt_val_loss(log) == 1.8857
    assert _nanogpt_val_loss("iter 0: loss 4.1828\n") is None


def test_ratios_are_attnlab_over_nanogpt() -> None:
    pair = {"nanogpt": Side(100.0, 80.0, 0, 1.9), "attnlab": Side(95.0, 88.0, 0, 1.8)}
    assert ratios(pair) == pytest.approx({"wall": 0.95, "cpu": 1.1})


@pytest.mark.parametrize(
    "problem, says",
    [
        ("no clone", "is not a nanoGPT clone: it lacks train.py, model.py"),
        ("clone not named", "--clone is needed: the folder of a clone of karpathy/nanoGPT"),
        ("runs 0", "--runs=0 is not allowed; it must be >= 1"),
        ("timeout 0", "--timeout=0 is not allowed; it must be a number of seconds > 0"),
        ("no text", "is not a file"),
    ],
)
def test_a_bad_option_is_refused_in_one_line_before_anything_runs(problem: str, says: str, tmp_path: Path) -> None:
    clone = tmp_path / "clone" if problem == "no clone" else _stand_in_clone(tmp_path / "clone")
    clone.mkdir(exist_ok=True)
    data = tmp_path / "missing.txt" if problem == "no text" else _text(tmp_path / "input.txt")
    runs = {"runs 0": ["--runs", "0"], "timeout 0": ["--timeout", "0"]}.get(problem, [])
    named = [] if problem == "clone not named" else ["--clone", str(clone)]
    done = _bench(*named, "--data", str(data), *runs)
    assert done.returncode == 2 and says in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not done.stdout


@pytest.mark.slow
def test_a_pair_runs_the_recipe_beside_the_preset_and_reports_both(tmp_path: Path) -> None:
    clone = _stand_in_clone(tmp_path / "clone")
    out = tmp_path / "pairs.json"
    done = _bench(
        "--clone", str(clone), "--data", str(_text(tmp_path / "input.txt")), "--steps", "3", "--out", str(out)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "attnlab / nanoGPT: wall" in done.stdout
    figures = json.loads(out.read_text())
    assert figures["steps"] == 3 and len(figures["pairs"]) == 1
    pair = figures["pairs"][0]
    assert pair["nanogpt"]["val_loss"] == 1.8857 and pair["nanogpt"]["status"] == 0
    assert pair["nanogpt"]["cpu"] >= 0.45  # the stand-in's busy half second, accounted to that child
    assert pair["attnlab"]["status"] == 0 and 0 < pair["attnlab"]["val_loss"] < 10
    assert pair["ratios"]["wall"] == pytest.approx(pair["attnlab"]["wall"] / pair["nanogpt"]["wall"])
    assert not (clone / "data/shakespeare_char/train.bin").exists()  # the clone itself is left as it was
