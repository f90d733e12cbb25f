"""``python -m experiments.evaluate``: a trained run's test again, from its checkpoint alone.

    python -m experiments.evaluate ckpt_path=outputs/default/<time>/checkpoints/last.ckpt
    python -m experiments.evaluate ckpt_path=outputs/default/<time> 'task.eval_lengths=[32,64]'
    python -m experiments.evaluate sweep_dir=multirun/quick 'task.eval_lengths=[32,64]'

``ckpt_path`` is a checkpoint file or a run folder (the checkpoint its test read: ``checkpoints/last.ckpt``, or
eval.checkpoint=best's); ``sweep_dir`` evaluates every completed run under it, each from that checkpoint. Each
evaluation writes ``evaluation.json`` (result.json's schema, marked as an evaluation of that checkpoint) into
``<run>/eval/<time>/``, or into ``out=DIR`` for one checkpoint. Other ``key=value`` arguments change what is
evaluated (``task.eval_lengths``, ``task.test_size``, ``eval.*``, the device; ``experiments.training.eval_config``);
one that would change the model is refused. Exit codes: 0 done; 1 a sweep run failed to evaluate (the others are
written); 2 bad input, in one line naming the path or key. docs/evaluate.md has the details.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

COMMAND_KEYS = ("ckpt_path", "sweep_dir", "out")


class UsageError(ValueError):
    """A command line evaluate cannot run; the message is one line."""


def split_arguments(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    """({ckpt_path, sweep_dir, out} given, the overrides of what is evaluated)."""
    command: dict[str, str] = {}
    overrides = []
    for arg in argv:
        key, eq, value = arg.partition("=")
        if not eq:
            raise UsageError(f"{arg}: evaluate takes key=value arguments (ckpt_path=PATH or sweep_dir=DIR first)")
        if key in COMMAND_KEYS:
            command[key] = value
        else:
            overrides.append(arg)
    if ("ckpt_path" in command) == ("sweep_dir" in command):
        raise UsageError("evaluate needs ckpt_path=PATH (a .ckpt file or a run folder) or sweep_dir=DIR, one of them")
    if "sweep_dir" in command and "out" in command:
        raise UsageError("out=DIR names one folder; with sweep_dir each evaluation goes into its run's eval/ folder")
    return command, overrides


def sweep_checkpoints(sweep_dir: Path) -> tuple[list[Path], list[str]]:
    """(the checkpoint of every completed run under ``sweep_dir``, one line for each run left out and why).

    A run's checkpoint is the one its test read (``tested_checkpoint``: eval.checkpoint=best), else its last."""
    from attnlab.run_folders import EVAL_DIR, live_writer, moved_aside
    from experiments.record.result import read_result
    from experiments.training.folder import RESULT
    from experiments.training.run_checkpoint import tested_checkpoint

    if not sweep_dir.is_dir():
        raise UsageError(f"sweep_dir={sweep_dir}: no such folder")
    found, skipped = [], []
    for file in sorted(sweep_dir.rglob(RESULT)):
        run_dir = file.parent
        if moved_aside(file, sweep_dir) or EVAL_DIR in run_dir.relative_to(sweep_dir).parts:
            continue
        result = read_result(file) or {}
        checkpoint = tested_checkpoint(run_dir)
        if result.get("status") != "completed":
            skipped.append(f"{run_dir}: {result.get('status') or 'unreadable result'}, not evaluated")
        elif live_writer(run_dir) is not None:
            skipped.append(f"{run_dir}: {live_writer(run_dir)} writes it now, not evaluated")
        elif not checkpoint.is_file():
            skipped.append(f"{run_dir}: no {checkpoint.relative_to(run_dir)}, not evaluated")
        else:
            found.append(checkpoint)
    return found, skipped


def headline(result: dict[str, Any]) -> str:
    """The test metrics in one line: ``test/loss=0.41 test/seq_acc=0.93``."""
    return " ".join(f"{k}={v:.4g}" for k, v in result["metrics"].items() if k.startswith("test/") and v is not None)


def run(argv: list[str]) -> int:
    """The command; returns its exit code."""
    from experiments.config.errors import user_error_types
    from experiments.training.evaluate_checkpoint import evaluate_checkpoint
    from experiments.training.quiet import quiet_library_warnings, quiet_lightning_info

    command, overrides = split_arguments(argv)
    quiet_library_warnings()
    quiet_lightning_info()
    if "ckpt_path" in command:
        result, folder = evaluate_checkpoint(command["ckpt_path"], overrides, command.get("out"))
        print(
            f"evaluated {result['evaluation']['checkpoint']} (step {result['evaluation']['step']}): {headline(result)}"
        )
        print(f"evaluation: {folder / 'evaluation.json'}")
        return 0
    sweep_dir = Path(command["sweep_dir"])
    checkpoints, skipped = sweep_checkpoints(sweep_dir)
    for line in skipped:
        print(f"attnlab: {line}", file=sys.stderr)
    if not checkpoints:
        raise UsageError(f"sweep_dir={sweep_dir}: no completed run with a checkpoint under it")
    failed = 0
    for checkpoint in checkpoints:
        try:
            result, folder = evaluate_checkpoint(str(checkpoint), overrides)
        except user_error_types() as err:
            if checkpoint == checkpoints[0]:
                raise  # the overrides themselves: every run would refuse them alike
            print(f"attnlab: {checkpoint}: {err}", file=sys.stderr)
            failed += 1
            continue
        print(f"{folder / 'evaluation.json'}: {headline(result)}")
    print(
        f"{len(checkpoints) - failed} of {len(checkpoints)} runs evaluated, each into its eval/ folder; read them "
        f"with analysis.collect.collect_evaluations({str(sweep_dir)!r})"
    )
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__)
        sys.exit(0)
    from experiments.config.errors import user_error_types

    try:
        code = run(argv)
    except UsageError as err:
        print(f"attnlab: {err}", file=sys.stderr)
        sys.exit(2)
    except ValueError as err:
        if not isinstance(err, user_error_types()):
            raise
        print(f"attnlab: {err}", file=sys.stderr)
        sys.exit(2)
    sys.exit(code)


def command() -> None:
    """``python -m experiments.evaluate`` and ``attnlab-evaluate``: ``main``, its process ended without the
    interpreter's teardown once the command is done (``experiments.app.quick_exit``)."""
    from experiments.app.quick_exit import run_then_exit

    run_then_exit(main)


if __name__ == "__main__":
    command()
