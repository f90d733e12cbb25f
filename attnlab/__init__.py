"""attnlab: attention mechanisms and position encodings compared inside one Transformer.

The way in from Python (a notebook, a script)::

    import attnlab
    result = attnlab.run(["task=reverse", "attention=local", "trainer.max_steps=200"], run_dir="runs/local")
    folder = attnlab.sweep(["experiment=quick", "hydra/launcher=joblib"])   # python -m experiments.train -m
    cfg = attnlab.compose(["attention=local"])                              # the config a run would use
    runs = attnlab.collect(folder)                                          # one frame of runs
    attnlab.report(folder)                                                  # the ablation report
    record = attnlab.evaluate("runs/local", ["task.eval_lengths=[32,64]"])   # a checkpoint's test again
    sorted(attnlab.ATTENTION), sorted(attnlab.POSITION)                     # the registries

The names load on first use, so ``import attnlab`` (and any ``attnlab.<module>``) costs the standard library only:
Hydra imports this package's plugins when it scans them. The modules here are what experiments and analysis both
need and neither owns (the result.json key spelling, the claim schema, the one bibliography, the sequential
rules); they import nothing but the standard library and each other.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Sequence

try:
    __version__ = version("attnlab")
except PackageNotFoundError:  # a source tree on sys.path without an install
    __version__ = "0+unknown"

# public name -> (module, attribute): imported by __getattr__ on first use
LAZY = {
    "run": ("experiments.app.api", "run"),
    "sweep": ("experiments.app.api", "multirun"),
    "compose": ("experiments.app.api", "compose"),
    "collect": ("analysis.data.collect", "collect"),
    "ATTENTION": ("variants", "ATTENTION"),
    "POSITION": ("variants", "POSITION"),
}


def report(*folders: str | Path, out: str | Path | None = None, **options: Any) -> Path:
    """Write the ablation report of the sweeps under ``folders`` as ``python -m analysis.report`` does and return
    its report.html. ``out`` defaults to ``<first folder>/report``; ``options`` are
    ``analysis.report.build_report``'s keyword arguments (baseline, metrics, claims, ...)."""
    if not folders:
        raise TypeError("attnlab.report: name at least one sweep or run folder, e.g. attnlab.report('multirun/demo')")
    build_report = import_module("analysis.report").build_report
    return build_report(list(folders), out=Path(folders[0]) / "report" if out is None else out, **options)


def evaluate(ckpt_path: str | Path, overrides: Sequence[str] = (), out: str | Path | None = None) -> dict[str, Any]:
    """Test the checkpoint ``ckpt_path`` names (a .ckpt file or a run folder) again, as
    ``python -m experiments.evaluate ckpt_path=PATH <overrides>`` does; returns the evaluation's record, also written
    to ``evaluation.json`` in ``out`` (default ``<run>/eval/<time>/``). ``overrides`` may change what is evaluated
    (``task.eval_lengths``, ``eval.*``, the device), never the model."""
    evaluate_checkpoint = import_module("experiments.training.evaluate_checkpoint").evaluate_checkpoint
    record, _ = evaluate_checkpoint(str(ckpt_path), list(overrides), out)
    return record


def __getattr__(name: str) -> Any:
    if name in LAZY:
        module, attribute = LAZY[name]
        return getattr(import_module(module), attribute)
    raise AttributeError(f"module 'attnlab' has no attribute {name!r}; its public names are {sorted(__all__)}")


def __dir__() -> list[str]:
    return sorted({*globals(), *LAZY})


__all__ = ["ATTENTION", "POSITION", "__version__", "collect", "compose", "evaluate", "report", "run", "sweep"]
