"""``nanogpt``: attnlab's shakespeare_char preset and nanoGPT's CPU recipe as two processes started together.

    python -m experiments.bench nanogpt --clone ~/src/nanoGPT          # 2,000 steps each, one thread each
    python -m experiments.bench nanogpt --clone ~/src/nanoGPT --runs 3 --out pairs.json

nanoGPT is a clone of karpathy/nanoGPT the user names; nothing here downloads it or needs it otherwise. Its
files are copied to a scratch folder with the text (``--data``, tiny Shakespeare beside the repository) as
``data/shakespeare_char/input.txt``, where its ``prepare.py`` encodes it and its ``train.py`` runs the README's
CPU recipe: ``config/train_shakespeare_char.py --device=cpu --compile=False --eval_iters=20 --block_size=64
--batch_size=12 --n_layer=4 --n_head=4 --n_embd=128 --max_iters=2000 --lr_decay_iters=2000 --dropout=0.0``.
attnlab's side is the command a user types, ``python -m experiments.train experiment=shakespeare_char
task.path=... num_threads=1`` (W&B offline), in a scratch run folder.

The two start at the same moment with one intra-op thread each (``OMP_NUM_THREADS=1``), so on a machine with
two free cores each has one and a load that comes and goes hits both. Reported per process: the wall time
from start to exit, its CPU time (user + system, from the kernel's accounting of that child), and the final
validation loss each prints (nanoGPT: its last ``step N: ... val loss``, the mean of 20 random batches of 12;
attnlab: ``val/loss`` in result.json, the mean over 512 fixed held-out windows); and attnlab / nanoGPT for
the wall and the CPU. ``--runs N`` repeats the pair. Exit status 1 when a side fails.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from experiments.bench.registry import BENCHMARKS

SHAKESPEARE = Path("../shared/data/tinyshakespeare/input.txt")
# what the recipe needs from a clone; the rest (assets, notebooks) is not copied
CLONE_FILES = ("train.py", "model.py", "configurator.py", "config", "data/shakespeare_char/prepare.py")
# nanoGPT's README, "I only have a macbook": its CPU recipe (the step count is --steps)
RECIPE = (
    "config/train_shakespeare_char.py",
    "--device=cpu",
    "--compile=False",
    "--eval_iters=20",
    "--log_interval=100",
    "--block_size=64",
    "--batch_size=12",
    "--n_layer=4",
    "--n_head=4",
    "--n_embd=128",
    "--dropout=0.0",
)
VAL_LINE = re.compile(r"^step (\d+): train loss ([0-9.]+), val loss ([0-9.]+)", re.MULTILINE)


def arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--clone", type=Path, default=None, help="a clone of karpathy/nanoGPT (needed)")
    parser.add_argument("--data", type=Path, default=SHAKESPEARE, help="the text both train on (tiny Shakespeare)")
    parser.add_argument("--steps", type=int, default=2000, help="training steps of each side (the recipe's 2,000)")
    parser.add_argument("--runs", type=int, default=1, help="pairs, one after another")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds a pair may take before both are killed")
    parser.add_argument("--out", type=Path, default=None, help="write every pair's figures as JSON here")
    parser.add_argument("overrides", nargs="*", help="more overrides for attnlab's run")


@dataclass
class Side:
    """One process of a pair: its wall and CPU seconds, exit status and final validation loss."""

    wall: float
    cpu: float
    status: int
    val_loss: float | None


def check(args: argparse.Namespace) -> None:
    """The clone and the text, refused in one line each before anything runs (the counts and the timeout are
    ``experiments.bench.check_arguments``')."""
    if args.clone is None:
        raise ValueError("--clone is needed: the folder of a clone of karpathy/nanoGPT, which nothing here downloads")
    missing = [name for name in CLONE_FILES if not (args.clone / name).exists()]
    if missing:
        raise ValueError(f"--clone={args.clone} is not a nanoGPT clone: it lacks {', '.join(missing)}")
    if not args.data.is_file():
        raise ValueError(f"--data={args.data} is not a file")


def prepare_clone(clone: Path, data: Path, work: Path) -> Path:
    """nanoGPT's files and the text in ``work``, encoded by its own ``prepare.py``; the copy's folder."""
    copy = work / "nanogpt"
    for name in CLONE_FILES:
        source, target = clone / name, copy / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target)
        else:
            shutil.copy2(source, target)
    shutil.copy2(data, copy / "data/shakespeare_char/input.txt")  # present, so prepare.py downloads nothing
    subprocess.run(
        [sys.executable, "prepare.py"], cwd=copy / "data/shakespeare_char", check=True, capture_output=True, text=True
    )
    return copy


def _one_thread() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.setdefault("WANDB_MODE", "offline")
    env.setdefault("WANDB_SILENT", "true")
    return env


def run_pair(args: argparse.Namespace, nanogpt: Path, run_dir: Path, logs: Path) -> dict[str, Side]:
    """Both commands started together; each side's figures once both have ended."""
    steps = [f"--max_iters={args.steps}", f"--lr_decay_iters={args.steps}"]
    commands = {
        "nanogpt": ([sys.executable, "train.py", *RECIPE, *steps], nanogpt),
        "attnlab": (
            [
                sys.executable,
                "-m",
                "experiments.train",
                "experiment=shakespeare_char",
                f"task.path={args.data.resolve()}",
                "num_threads=1",
                f"trainer.max_steps={args.steps}",
                f"hydra.run.dir={run_dir}",
                *args.overrides,
            ],
            Path.cwd(),
        ),
    }
    logs.mkdir(parents=True, exist_ok=True)
    began, procs, files = {}, {}, {}
    for name, (command, cwd) in commands.items():
        files[name] = (logs / f"{name}.log").open("w")
        began[name] = time.monotonic()
        procs[name] = subprocess.Popen(
            command, cwd=cwd, env=_one_thread(), stdout=files[name], stderr=subprocess.STDOUT
        )
    ended: dict[str, tuple[float, float, int]] = {}
    deadline = time.monotonic() + args.timeout
    while len(ended) < len(procs):
        for name, proc in procs.items():
            if name in ended:
                continue
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                proc.returncode = os.waitstatus_to_exitcode(status)
                ended[name] = (time.monotonic() - began[name], usage.ru_utime + usage.ru_stime, proc.returncode)
        if time.monotonic() > deadline:
            for proc in procs.values():
                if proc.returncode is None:
                    proc.kill()
        time.sleep(0.05)
    for file in files.values():
        file.close()
    nanogpt_loss = _nanogpt_val_loss((logs / "nanogpt.log").read_text())
    return {
        "nanogpt": Side(*ended["nanogpt"], val_loss=nanogpt_loss),
        "attnlab": Side(*ended["attnlab"], val_loss=_attnlab_val_loss(run_dir / "result.json")),
    }


def _nanogpt_val_loss(log: str) -> float | None:
    """The validation loss of nanoGPT's last evaluation line."""
    found = VAL_LINE.findall(log)
    return float(found[-1][2]) if found else None


def _attnlab_val_loss(result: Path) -> float | None:
    if not result.is_file():
        return None
    value = json.loads(result.read_text()).get("metrics", {}).get("val/loss")
    return float(value) if value is not None else None


def ratios(pair: dict[str, Side]) -> dict[str, float]:
    """attnlab / nanoGPT, wall and CPU."""
    a, n = pair["attnlab"], pair["nanogpt"]
    return {"wall": a.wall / n.wall, "cpu": a.cpu / n.cpu}


def _loss(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _print_pair(index: int, pair: dict[str, Side]) -> None:
    r = ratios(pair)
    print(f"pair {index}: load average {os.getloadavg()[0]:.2f} at its end")
    print(f"  {'side':8s} {'wall s':>8s} {'CPU s':>8s} {'val loss':>9s}  status")
    for name, side in pair.items():
        print(f"  {name:8s} {side.wall:8.1f} {side.cpu:8.1f} {_loss(side.val_loss):>9s}  {side.status}")
    print(f"  attnlab / nanoGPT: wall {r['wall']:.3f}, CPU {r['cpu']:.3f}")


@BENCHMARKS.register(
    "nanogpt",
    help="attnlab's shakespeare_char preset beside nanoGPT's CPU recipe (a clone you name)",
    arguments=arguments,
)
def nanogpt(args: argparse.Namespace) -> int:
    check(args)
    pairs = []
    with tempfile.TemporaryDirectory(prefix="bench_nanogpt_") as scratch:
        work = Path(scratch)
        copy = prepare_clone(args.clone, args.data, work)
        for index in range(1, args.runs + 1):
            shutil.rmtree(copy / "out-shakespeare-char", ignore_errors=True)  # nanoGPT's checkpoint folder
            pair = run_pair(args, copy, work / f"attnlab{index}", work / f"logs{index}")
            _print_pair(index, pair)
            pairs.append(pair)
            failed = [name for name, side in pair.items() if side.status != 0]
            if failed:
                for name in failed:
                    tail = (work / f"logs{index}" / f"{name}.log").read_text().splitlines()[-15:]
                    print(f"{name} exited {pair[name].status}; its last lines:", *tail, sep="\n", file=sys.stderr)
                return 1
    if len(pairs) > 1:
        walls = [ratios(p)["wall"] for p in pairs]
        cpus = [ratios(p)["cpu"] for p in pairs]
        print(f"median of {len(pairs)} pairs: wall {statistics.median(walls):.3f}, CPU {statistics.median(cpus):.3f}")
    if args.out:
        figures = [{**{name: asdict(side) for name, side in p.items()}, "ratios": ratios(p)} for p in pairs]
        args.out.write_text(json.dumps({"steps": args.steps, "pairs": figures}, indent=2) + "\n")
    return 0
