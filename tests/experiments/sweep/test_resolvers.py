"""attnlab's OmegaConf resolvers are registered by the entry points, never by importing a module.

One fresh process imports every module of ``experiments`` and attnlab's Hydra plugins and finds no
``attnlab_*`` resolver; then each entry point, started with none registered, leaves both registered, and
resolving them gives what the functions they name return.
"""

from __future__ import annotations

import hashlib
import json
import pickle
import subprocess
import sys

from experiments.sweep.grid import SweepSummary
from tests.helpers.paths import ROOT

NAMES = ("attnlab_cell", "attnlab_gpus")

CHILD = r"""
import importlib, json, os, pickle, pkgutil, sys
from omegaconf import OmegaConf

import experiments
CALLBACK = bytes.fromhex(sys.argv[1])  # the sweep's callback, pickled by the launching process
names = [m.name for m in pkgutil.walk_packages(experiments.__path__, "experiments.") if not m.name.endswith("__main__")]
names += [f"hydra_plugins.attnlab_launcher.{m}" for m in ("adaptive_sweeper", "ensemble_launcher", "slurm_launcher")]
names += [f"hydra_plugins.attnlab_sweeper.{m}" for m in ("optuna_sweeper", "tuned_sweeper")]
for name in names:
    importlib.import_module(name)
NAMES = ("attnlab_cell", "attnlab_gpus")
seen = {"modules": len(names), "imported": [OmegaConf.has_resolver(n) for n in NAMES]}


def fresh():
    for n in NAMES:
        OmegaConf.clear_resolver(n)


def command():
    import experiments.app.train as app

    app.hydra_entry = lambda: None  # what main registers before Hydra composes anything
    os.environ["LOCAL_RANK"] = "1"  # skips the preflight, which a rank > 0 does not repeat
    sys.argv = ["experiments.train"]
    try:
        app.main()
    except SystemExit:
        pass


def compose():
    from experiments.app.api import compose
    compose([])


def ensemble_launcher():
    from hydra_plugins.attnlab_launcher.ensemble_launcher import EnsembleLauncher
    EnsembleLauncher().setup(hydra_context=None, task_function=None, config=None)


def worker():
    pickle.loads(CALLBACK)  # as a joblib or submitit worker receives it


for entry in (command, compose, ensemble_launcher, worker):
    fresh()
    entry()
    seen[entry.__name__] = [OmegaConf.has_resolver(n) for n in NAMES]
cell = OmegaConf.create({"dir": "${attnlab_cell:" + "x" * 120 + "}", "gpus": "${attnlab_gpus:gpu,2}"})
seen["resolved"] = [cell.dir, cell.gpus]
print(json.dumps(seen))
"""


def test_no_import_registers_a_resolver_and_every_entry_point_does() -> None:
    callback = pickle.dumps(SweepSummary()).hex()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, callback], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["modules"] > 50, "the walk found the package's modules"
    assert seen["imported"] == [False, False], "importing a module registered an attnlab resolver"
    for entry in ("command", "compose", "ensemble_launcher", "worker"):
        assert seen[entry] == [True, True], f"{entry} left {dict(zip(NAMES, seen[entry]))}"
    # a name past 100 characters becomes the hash of the overrides (experiments.sweep.grid.cell_dirname);
    # a GPU trainer asks SLURM for its devices
    assert seen["resolved"] == [f"overrides={hashlib.sha1(('x' * 120).encode()).hexdigest()[:10]}", 2]


def test_registering_twice_changes_nothing() -> None:
    from omegaconf import OmegaConf

    from experiments.sweep.grid import RESOLVERS, register_resolvers

    register_resolvers()
    before = {name: OmegaConf.has_resolver(name) for name in NAMES}
    register_resolvers()  # a second entry point in the same process (run() after compose()) must not raise
    assert before == {name: OmegaConf.has_resolver(name) for name in NAMES} == dict.fromkeys(NAMES, True)
    assert set(RESOLVERS) == set(NAMES)
