"""Running a grid: one folder per cell, threads per job, checks before any cell starts, the exit code.

Jobs of a multirun never raise (each records its failure in its result.json), so
the sweep goes on. ``SweepSummary`` is a Hydra callback that runs in the
launching process whatever the launcher (basic, joblib, submitit):

- ``on_multirun_start`` checks every name the grid will use (variants, tasks,
  config group options), that a SLURM launcher can reach ``sbatch`` and that the
  cluster can meet its request (``experiments.sweep.slurm``), so a typo fails in one line
  before any cell starts;
- ``on_multirun_end`` reads the results this sweep wrote and remembers whether
  any cell did not complete; ``train.main`` turns that into the exit code.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import os
import re
import shlex
import shutil
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Sequence

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from attnlab.roles import ROLES
from experiments.config.checks import available_cores
from experiments.config.spec import GridSpec, grid_spec

log = logging.getLogger("attnlab")
_LAST: dict[str, Any] = {"failed": 0, "ran": False}
CONF_DIR = Path(__file__).resolve().parents[2] / "conf"
# A cell folder named by all of its overrides becomes unreadable (and, past 255 bytes,
# impossible); past this length it is named by its variant keys and a hash of the overrides.
MAX_CELL_NAME = 100
CELL_KEYS = (
    "task",
    "attention",
    "position",
    "variant_param",
    "attention@model.cross_attention",
    "model.arch",
    "seed",
    "optim.lr",
    "optim.warmup_steps",
)
VARIANT_NAME_KEYS = {
    "attention.name": "attention",
    "position.name": "position",
    "task.name": "task",
    **{f"model.{role}": "attention" for role in ROLES},
}


class SweepConfigError(ValueError):
    """A grid that cannot run as given; the message names the key, the value and what is allowed."""


# -- where each cell writes ------------------------------------------------------------------------
def cell_dirname(override_dirname: str) -> str:
    """The folder of one cell under the sweep dir, a function of its overrides only.

    The same overrides give the same folder, so re-running a sweep finds its
    finished and interrupted cells; different overrides give different folders,
    however close in time the jobs start.
    """
    if not override_dirname:
        return "defaults"
    safe = "/" not in override_dirname and not override_dirname.startswith(".")
    if safe and len(override_dirname) <= MAX_CELL_NAME:
        return override_dirname
    items = dict(item.split("=", 1) for item in override_dirname.split(",") if "=" in item)
    name = f"overrides={hashlib.sha1(override_dirname.encode()).hexdigest()[:10]}"
    for key in reversed(CELL_KEYS):
        item = f"{key}={items.get(key)}"
        if key in items and "/" not in item and len(item) + 1 + len(name) <= MAX_CELL_NAME:
            name = f"{item},{name}"
    return name


def _gpus_to_request(accelerator: str, devices: Any) -> int | None:
    from experiments.sweep.slurm import gpus_to_request

    return gpus_to_request(accelerator, devices)


# The OmegaConf resolvers attnlab's yaml interpolates, by name. Importing this module registers none:
# the command (experiments.app.train.main), the Python API (run, compose), attnlab's sweepers and
# launchers, and a SweepSummary unpickled in a joblib or submitit worker call register_resolvers first.
RESOLVERS = {
    "attnlab_cell": cell_dirname,  # each cell's folder (conf/config.yaml: hydra.sweep.subdir)
    "attnlab_gpus": _gpus_to_request,  # the GPUs per node a SLURM cell asks for (conf/hydra/launcher/slurm.yaml)
}


def register_resolvers() -> None:
    """Register each attnlab resolver not registered yet; calling it again changes nothing. Every entry calls
    it before Hydra runs a job (a joblib worker too), so Hydra's config save is made atomic here as well."""
    from experiments.record.files import save_hydra_config_atomically

    for name, resolver in RESOLVERS.items():
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, resolver)
    save_hydra_config_atomically()


# -- threads ---------------------------------------------------------------------------------------
def jobs_at_once(launcher: Mapping[str, Any] | None, cores: int) -> int:
    """How many jobs of the sweep the launcher runs at the same time on one machine."""
    target = str((launcher or {}).get("_target_", ""))
    if target.endswith("JoblibLauncher"):
        n = int(launcher.get("n_jobs") or 1)
        return min(max(cores + 1 + n if n < 0 else n, 1), cores)  # joblib: -1 = every core, -2 = all but one
    if target.endswith("submitit_launcher.LocalLauncher"):
        return cores  # submitit's local executor starts every cell at once
    return 1


def threads_per_process(
    launcher: Mapping[str, Any] | None, trainer: Mapping[str, Any], requested: int = 0, cores: int | None = None
) -> int:
    """Intra-op threads for each training process: ``requested`` when > 0, else the cores shared out.

    Parallel jobs and CPU DDP processes each get their share, so 2 jobs on 2 cores run
    one thread each instead of four threads fighting over two cores. A submitit job
    with ``cpus_per_task`` uses that many (on SLURM each DDP rank is a task of its own).
    """
    if requested > 0:
        return requested
    cores = cores or available_cores()
    launcher = launcher or {}
    target, cpus = str(launcher.get("_target_", "")), launcher.get("cpus_per_task")
    if target.endswith("SlurmLauncher"):
        return max(1, min(cores, int(cpus or cores)))
    if cpus and target.endswith("LocalLauncher"):
        share = min(cores, int(cpus))
    else:
        share = cores // jobs_at_once(launcher, cores)
    processes = 1
    if "ddp" in str(trainer.get("strategy", "")) and trainer.get("accelerator") == "cpu":
        devices = trainer.get("devices", 1)
        processes = devices if isinstance(devices, int) and devices > 0 else 1
    return max(1, share // processes)


def set_threads(n: int) -> None:
    import torch

    torch.set_num_threads(n)
    # Inherited by DDP children and DataLoader workers; Lightning keeps it instead of its own guess.
    os.environ["OMP_NUM_THREADS"] = str(n)


# -- checks before any cell starts ------------------------------------------------------------------
def grid_values(grid: GridSpec) -> Iterator[tuple[str, list[str]]]:
    """(key, values) of each override of the grid, as the basic sweeper combines them: the
    preset's sweeper params, then the command line, which wins for a key given in both."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import Glob
    from hydra.errors import HydraException

    lines = [f"{key}={value}" for key, value in grid.params.items()] + list(grid.overrides)
    parser = OverridesParser.create()
    merged: dict[str, tuple[str, list[str]]] = {}
    for line in lines:
        try:
            (override,) = parser.parse_overrides([line])
        except HydraException:
            continue  # not ours to judge: Hydra or the sweeper reports it
        if override.is_delete() or (override.is_sweep_override() and not override.is_discrete_sweep()):
            continue  # nothing to look up (an interval of numbers, a deleted key)
        if override.is_sweep_override() and isinstance(override.value(), Glob):
            # glob(...) over a group's options (experiment=variant_params): the options it matches
            values = override.value().filter(group_options(override.key_or_group))
        elif override.is_sweep_override():
            values = list(override.sweep_string_iterator())
        elif isinstance(override.value(), list) and "." not in override.key_or_group:
            # experiment=[a,b]: several configs of one group, merged in order
            values = [str(v) for v in override.value()]
        else:
            values = [override.get_value_element_as_str()]
        merged[override.get_key_element()] = (override.key_or_group, values)
    yield from merged.values()


def group_options(group: str, searchpath: Sequence[str] = ()) -> list[str]:
    """Every yaml under the group's folder, sub-folders too (``experiment=study/vaswani_pe``), and the
    options Hydra finds on its search path besides: a user's own presets (``--config-dir DIR
    experiment=mine``, or ``searchpath``: a command line's ``hydra.searchpath=[...]`` overrides) are choices in a
    sweep as in a single run."""
    return sorted({*own_options(group), *search_path_options(group, searchpath)})


def own_options(group: str) -> set[str]:
    """The options of attnlab's own conf/ folder for ``group``."""
    from experiments.config.yaml_files import yaml_options

    return yaml_options(CONF_DIR / group)


def search_path_options(group: str, searchpath: Sequence[str] = ()) -> set[str]:
    """The options Hydra finds for ``group`` on the sweep's search path: ``--config-dir``, and the folders of
    ``searchpath`` (a command line's ``hydra.searchpath=[...]``, which Hydra applies per load, so it is passed)."""
    from hydra.core.global_hydra import GlobalHydra

    if not GlobalHydra.instance().is_initialized():  # the sweep's own Hydra, with the user's search path
        return set()
    loader = GlobalHydra.instance().config_loader()
    return set(
        loader.get_group_options(group, config_name="config" if searchpath else None, overrides=list(searchpath))
    )


def searchpath_overrides(overrides: Sequence[str]) -> list[str]:
    """The command line's ``hydra.searchpath=[...]`` overrides among a sweep's ``overrides``."""
    return [str(o) for o in overrides if str(o).lstrip("+~").startswith("hydra.searchpath=")]


def _unknown(key: str, value: str, choices: list[str]) -> SweepConfigError:
    near = difflib.get_close_matches(value, choices, n=1)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    return SweepConfigError(f"{key}={value!r} in the sweep is unknown; choose one of {choices}{hint}")


def variant_name(value: str) -> str:
    """The registry name of a sweep value: ``hard``, or the ``name`` of ``{name:hard,estimator:reinforce}``."""
    match = re.fullmatch(r"\{.*?\bname\s*:\s*'?([^,'}\s]+).*\}", value.strip())
    return match.group(1) if match else value


def grid_choices(group: str, registry: Any, searchpath: Sequence[str]) -> list[str]:
    """The values a grid may take for a config group, read once per key. attnlab's own files of a registry's group
    are one per registered variant; a folder the user adds (hydra.searchpath, --config-dir) may hold presets of any
    name (attention=narrow: local, window 3), whose variant name the cell's composed config checks."""
    own = own_options(group)
    theirs = search_path_options(group, searchpath) - own
    if registry is not None:
        own &= set(registry.names())
    return sorted(own | theirs)


def check_grid(grid: GridSpec) -> None:
    """Every variant, task and group option the grid names exists, and SLURM is reachable if asked for."""
    from experiments.tasks import TASKS
    from variants import ATTENTION, POSITION

    registries = {"attention": ATTENTION, "position": POSITION, "task": TASKS}
    groups = {p.name for p in CONF_DIR.iterdir() if p.is_dir() and not p.name.startswith(("_", "."))} - {"hydra"}
    searchpath = searchpath_overrides(grid.overrides)
    for key, values in grid_values(grid):
        repeated = sorted({v for v in values if values.count(v) > 1})
        if repeated:
            raise SweepConfigError(
                f"{key}={','.join(values)} in the sweep lists {repeated[0]!r} more than once; "
                "those cells would be one run sharing one folder; list each value once"
            )
        choices = grid_choices(key, registries.get(key), searchpath) if key in groups else []
        for value in values:
            if key in groups:
                if value not in choices:
                    raise _unknown(key, value, choices)
            elif key in VARIANT_NAME_KEYS and value not in ("null", "None"):
                registry = registries[VARIANT_NAME_KEYS[key]]
                name = variant_name(value)
                if name not in registry:
                    raise _unknown(key, name, registry.names())
    check_launcher(grid.launcher, grid.trainer)


def check_launcher(launcher: Mapping[str, Any], trainer: Mapping[str, Any]) -> None:
    if not str(launcher.get("_target_", "")).endswith("SlurmLauncher"):
        return
    if shutil.which("sbatch") is None:
        raise SweepConfigError(
            "hydra/launcher=submitit_slurm needs SLURM's sbatch, which is not on PATH here; "
            "submit from a cluster login node, or try the same path with "
            "hydra/launcher=submitit_local"
        )
    tasks, devices = launcher.get("tasks_per_node", 1), trainer.get("devices", 1)
    if "ddp" in str(trainer.get("strategy", "")) and tasks != devices:
        # Under srun every rank is a SLURM task; Lightning starts none itself.
        raise SweepConfigError(
            f"hydra.launcher.tasks_per_node={tasks} with trainer.devices={devices}: "
            "a DDP job on SLURM runs one task per device; set them equal"
        )
    from experiments.sweep.slurm import ClusterRequestError, check_request, cluster_nodes

    try:
        check_request(launcher, cluster_nodes())
    except ClusterRequestError as err:
        raise SweepConfigError(str(err)) from None


# -- the callback ----------------------------------------------------------------------------------
class SweepSummary(Callback):
    def __reduce__(self) -> tuple[Any, tuple[()]]:
        # joblib and submitit workers unpickle this callback before Hydra resolves the job's folder
        # (hydra.sweep.subdir) there; arriving registers the resolvers that folder's name needs
        return (_summary_in_worker, ())

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from experiments.record.files import OutputError, check_output_path

        # the config, for the summary of a sweep that a signal ends (summarise_interrupted_sweep)
        _LAST.update(failed=0, ran=True, started=time.time(), config=config, ended=False)
        from experiments.training.cell_contract import BUSY

        BUSY.clear()
        try:
            check_grid(grid_spec(config))  # the grid read once from the sweep's config
            # every launcher writes the sweep's folder first (multirun.yaml, then one folder per cell)
            check_output_path(Path(str(config.hydra.sweep.dir)) / "multirun.yaml", "hydra.sweep.dir:")
        except (SweepConfigError, OutputError) as err:
            # One line and a distinct exit code, before any cell has started.
            print(f"attnlab: {err}", file=sys.stderr)
            raise SystemExit(2) from None

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        _LAST["ended"] = True
        sweep_dir = Path(config.hydra.sweep.dir)
        metric = str(OmegaConf.select(config, "objective") or "val/loss")
        counts: dict[str, int] = {}
        bad, earlier, cells = [], 0, []
        from attnlab.run_folders import moved_aside
        from experiments.training.cell_contract import BUSY

        # cells another live process was writing: refused here, and their results (if any) are not this sweep's
        busy = sorted({Path(b).resolve() for b in BUSY})
        for path in sorted(sweep_dir.rglob("result.json")):
            if moved_aside(path, sweep_dir):
                continue  # an earlier run of a cell, kept under its previous/
            if any(path.resolve().is_relative_to(b) for b in busy):
                continue
            if path.stat().st_mtime < _LAST.get("started", 0):
                earlier += 1  # an earlier sweep's cell that this one skipped or does not include
                continue
            try:
                result = json.loads(path.read_text())
            except (OSError, ValueError):
                result = {}
            status = result.get("status", "failed")
            counts[status] = counts.get(status, 0) + 1
            if status not in ("completed", "pruned"):  # a pruned trial is the study's decision, not a fault
                bad.append(f"{path.parent.name}: {status}")
            cells.append((result, status, path.parent))
        from experiments.sweep.slurm import LOST

        bad += LOST  # SLURM jobs that ended without writing their cell's result (none with other launchers)
        bad += [f"{b.name}: busy (another process writes it)" for b in busy]
        _LAST["failed"] = len(bad)
        if busy:
            counts["busy"] = len(busy)
        summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no new results"
        log.info(
            "sweep %s: %s in %.0f s; %d results from earlier runs left as they were",
            sweep_dir,
            summary,
            time.time() - _LAST.get("started", time.time()),
            earlier,
        )
        if bad:
            log.warning("cells that did not complete: %s", "; ".join(bad))
        labels = cell_labels([list(result.get("overrides") or []) for result, _, _ in cells])
        for (result, status, folder), label in zip(cells, labels):  # one line per cell, then what to run next
            print(cell_line(result, status, metric, folder, label))
        for folder in busy:
            print(f"{'busy':<9}  another process writes this cell; run the sweep again once it has ended  {folder}")
        if cells:
            print(f"report  {report_command(sweep_dir)}")


def report_command(folder: Path) -> str:
    """The command that writes the report of a run or a sweep, in the form training was started by (``attnlab-report``
    after ``attnlab-train``, ``python -m analysis.report`` after ``python -m experiments.train``), quoted so that it
    pastes into a shell."""
    from attnlab.prog import command

    report = command("analysis.report", "attnlab-report")
    return shlex.join([*report, str(folder), "--out", str(folder / "report")])


def _summary_in_worker() -> SweepSummary:
    register_resolvers()
    return SweepSummary()


def cell_labels(overrides: list[list[str]]) -> list[str]:
    """Each cell named by the overrides in which the cells differ (``attention=local seed=1``), shell-quoted
    so they paste; a cell that differs in none (the only one) by all of its overrides."""
    parsed = [dict(o.lstrip("+~").split("=", 1) if "=" in o else (o, "") for o in cell) for cell in overrides]
    keys = list(dict.fromkeys(key for cell in parsed for key in cell))
    differ = [key for key in keys if len({cell.get(key) for cell in parsed}) > 1]
    labels = []
    for cell, given in zip(parsed, overrides):
        items = [f"{key}={cell[key]}" for key in differ if key in cell] if differ else list(given)
        labels.append(shlex.join(items) if items else "defaults")
    return labels


def cell_line(result: dict[str, Any], status: str, metric: str, folder: Path, label: str = "") -> str:
    """``completed  val/loss 3.7955  attention=local seed=1  <folder>``; a cell that did not complete says
    why instead of the metric."""
    value = (result.get("metrics") or {}).get(metric)
    shown = f"{metric} {value:.4f}" if isinstance(value, (int, float)) else f"{metric} -"
    if status != "completed":
        shown = str(result.get("error") or "no result")[:80]
    line = f"{status:<9}  {shown}  {label + '  ' if label else ''}{folder}"
    previous = result.get("previous_run") or {}
    if previous.get("changed"):  # the cell's configuration changed since its last run (experiments/training/folder.py)
        line += f"  retrained: {previous.get('summary')} (old files in {previous.get('moved_to')})"
    return line


def summarise_interrupted_sweep() -> None:
    """The closing summary of a sweep that Ctrl-C or SIGTERM ends in one of its cells, in the launching
    process (the basic launcher's): Hydra's ``on_multirun_end`` runs only when every cell returned."""
    if _LAST.get("ran") and not _LAST.get("ended") and _LAST.get("config") is not None:
        SweepSummary().on_multirun_end(_LAST["config"])


def exit_code_for_last_multirun() -> int:
    return 1 if _LAST["ran"] and _LAST["failed"] else 0
