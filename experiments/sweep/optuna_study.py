"""An Optuna study as attnlab's sweeper runs it (hydra_plugins/attnlab_sweeper): its search space from
Hydra's sweep syntax, its storage, the asking of trials so that a seeded sampler replays, and the checks
that refuse a study before its first trial.

Shared by the sweeper (which asks and tells) and by a trial's pruning callback (experiments/training/pruning.py),
which reports to the same trial through the same storage.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from experiments.config.errors import ConfigError

# the study's attributes a trial's pruning callback reads, and its storage: the trial's side of the study
from experiments.training.study_storage import METRIC_ATTR, PRUNER_ATTR, open_storage  # noqa: F401

# the study's own files in the sweep folder when no storage is given: Optuna's journal (one file,
# safe for several processes, no database migrations to log)
JOURNAL = "optuna.journal"
# a trial that a killed sweep left running: failed, and asked again with the same parameters
INTERRUPTED_ATTR = "attnlab_interrupted"
RETRY_ATTR = "attnlab_retry_of"  # on a trial asked again: the number of the interrupted trial it repeats


class StudyError(ConfigError):
    """A study that cannot run as configured; one line naming the key and what is allowed."""


def storage_spec(storage: str | None, sweep_dir: str | Path) -> str:
    """The storage as one string: the given URL or journal path, else the sweep folder's journal file."""
    if storage:
        return str(storage)
    return str(Path(sweep_dir).resolve() / JOURNAL)


# -- the search space ------------------------------------------------------------------------------
def distribution(key: str, spec: str) -> Any | None:
    """Optuna's distribution for one ``key=spec`` in Hydra's sweep syntax; None for a fixed value.

    ``choice(a, b)`` and ``a,b`` are categorical; ``range(0, 400, step=50)`` is an integer grid (its
    stop excluded, as Python's range); ``interval(lo, hi)`` is uniform, ``tag(log, interval(..))`` log-uniform.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    try:
        (override,) = OverridesParser.create().parse_overrides([f"{key}={spec}"])
    except Exception as err:  # noqa: BLE001 - Hydra's grammar errors come in several types
        raise StudyError(f"hydra.sweeper.params.{key}={spec!r} is not Hydra sweep syntax: {err}") from None
    if not override.is_sweep_override():
        return None
    value = override.value()
    if isinstance(value, ChoiceSweep):
        choices = [v for v in override.sweep_iterator()]
        if not choices:
            raise StudyError(f"hydra.sweeper.params.{key}: choice() is empty; give at least one value")
        return CategoricalDistribution(choices)
    if isinstance(value, RangeSweep):
        values = list(override.sweep_iterator())
        if not values:
            raise StudyError(f"hydra.sweeper.params.{key}={spec}: the range holds no value")
        if all(isinstance(v, int) for v in values):
            step = values[1] - values[0] if len(values) > 1 else 1
            return IntDistribution(values[0], values[-1], step=step)
        return CategoricalDistribution(values)
    if isinstance(value, IntervalSweep):
        low, high, log = value.start, value.end, "log" in value.tags
        if not low < high:
            raise StudyError(f"hydra.sweeper.params.{key}={spec}: interval's start must be below its end")
        if isinstance(low, int) and isinstance(high, int):
            return IntDistribution(low, high, log=log)
        return FloatDistribution(float(low), float(high), log=log)
    raise StudyError(f"hydra.sweeper.params.{key}={spec}: use choice(), range(), interval() or a,b")


def search_space(params: Mapping[str, Any], arguments: Sequence[str]) -> tuple[dict[str, Any], list[str]]:
    """The study's distributions by key, and the fixed overrides: the sweeper's ``params``, then the
    command line (a sweep there joins the space, a single value there overrides and leaves it)."""
    # a preset's null leaves a key it inherits out of the space (a mapping merge cannot delete it)
    specs = {str(k): str(v) for k, v in params.items() if v is not None}
    fixed: list[str] = []
    for arg in arguments:
        key, _, spec = arg.partition("=")
        space_key = key.lstrip("+~")
        if distribution(space_key, spec) is None:
            specs.pop(space_key, None)
            fixed.append(arg)
        else:
            specs[space_key] = spec
    space = {key: d for key, spec in specs.items() if (d := distribution(key, spec)) is not None}
    fixed += [f"{key}={spec}" for key, spec in specs.items() if key not in space]
    return space, fixed


def grid(space: Mapping[str, Any]) -> dict[str, list[Any]]:
    """Every value of each distribution, for Optuna's grid sampler; a continuous interval has no grid."""
    from optuna.distributions import CategoricalDistribution, IntDistribution

    out: dict[str, list[Any]] = {}
    for key, dist in space.items():
        if isinstance(dist, CategoricalDistribution):
            out[key] = list(dist.choices)
        elif isinstance(dist, IntDistribution) and not dist.log:
            out[key] = list(range(dist.low, dist.high + 1, dist.step))
        else:
            raise StudyError(
                f"hydra.sweeper.params.{key}: the grid sampler needs a list of values "
                "(choice(), range() or a,b), not an interval"
            )
    return out


def grid_size(space: Mapping[str, Any]) -> int:
    return math.prod(len(values) for values in grid(space).values())


# -- checks before the first trial -----------------------------------------------------------------
def check_study(
    config: Any,
    space: Mapping[str, Any],
    n_trials: Any,
    n_jobs: Any,
    pruning_metric: str | None,
    space_key: str = "hydra.sweeper.params",
) -> None:
    """Raise StudyError (one line) for a study that cannot run: an empty space, a key no config has,
    a budget below 1, an objective or pruning metric the task never logs. ``space_key``: where the user
    declared the space (a tuned comparison's is ``hydra.sweeper.space``), named in the refusal."""
    from omegaconf import OmegaConf

    from experiments.config.metric_names import logged_metrics

    if not isinstance(n_trials, int) or isinstance(n_trials, bool) or n_trials < 1:
        raise StudyError(f"hydra.sweeper.n_trials={n_trials!r}: the budget must be an integer of at least 1")
    if not isinstance(n_jobs, int) or isinstance(n_jobs, bool) or n_jobs < 1:
        raise StudyError(f"hydra.sweeper.n_jobs={n_jobs!r}: trials at once must be an integer of at least 1")
    if not space:
        raise StudyError(
            f"{space_key}: the search space is empty; declare at least one swept key, "
            f"e.g. {space_key}.optim.lr='tag(log, interval(1e-4, 1e-2))'"
        )
    missing = object()
    for key in space:
        if OmegaConf.select(config, key, default=missing) is missing:
            raise StudyError(
                f"{space_key}.{key}: no config has the key {key!r}; "
                f"search a key of the composed config (e.g. optim.lr, optim.warmup_steps)"
            )
    final, validation = logged_metrics(config, "result"), logged_metrics(config, "val")
    objective = str(config.objective)
    if objective not in final:
        raise StudyError(f"objective={objective!r}: the task never logs it; choose one of {sorted(final)}")
    if pruning_metric is not None and pruning_metric not in validation:
        raise StudyError(
            f"hydra.sweeper.pruning_metric={pruning_metric!r}: not logged at validation steps; "
            f"choose one of {sorted(validation)}"
        )


# -- asking trials -----------------------------------------------------------------------------------
def sampler_for(sampler_cfg: Mapping[str, Any], space: Mapping[str, Any], index: int) -> Any:
    """The sampler that asks the study's ``index``-th trial (interrupted trials not counted).

    Built afresh with seed ``seed + index``, so that a resumed study asks what the uninterrupted one
    would have asked: Optuna's samplers keep their random state in the process, which a resume loses.
    """
    from hydra.utils import instantiate

    node = dict(sampler_cfg)
    seed = node.pop("seed", None)
    target = str(node.get("_target_", ""))
    if target.endswith("GridSampler"):
        # the grid sampler shuffles its grid by the seed and records grid ids: one seed for every trial
        return instantiate(node, seed=seed, search_space=grid(space))
    if target.endswith("QMCSampler"):
        # the study counts the QMC sequence's points under a key that holds the seed: one seed for every trial
        return instantiate(node, seed=seed)
    return instantiate(node, seed=None if seed is None else int(seed) + index)


def asked_index(study: Any) -> int:
    """How many trials the study has asked, not counting those a killed sweep left behind."""
    return sum(1 for t in study.get_trials(deepcopy=False) if not t.user_attrs.get(INTERRUPTED_ATTR))


def recover_interrupted(study: Any) -> list[int]:
    """Trials a killed sweep left RUNNING: failed (marked interrupted) and queued again with the same
    parameters, so the resumed study runs them and no finished trial twice. Returns their numbers."""
    from optuna.trial import TrialState

    numbers = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study._storage.set_trial_user_attr(trial._trial_id, INTERRUPTED_ATTR, True)
        study.tell(trial.number, state=TrialState.FAIL, skip_if_finished=True)
        study.enqueue_trial(trial.params, user_attrs={RETRY_ATTR: trial.number}, skip_if_exists=False)
        numbers.append(trial.number)
    return numbers


def trial_folder(sweep_dir: str | Path, study_name: str, number: int, seed: int | None) -> str | None:
    """The folder (relative to the sweep's) of trial ``number`` of ``study_name`` at ``seed``, found by the
    overrides Hydra recorded for it; None when it has none. A trial asked again after a kill runs there, so that
    it resumes from its checkpoint (the trial's number is not part of what a run computes)."""
    import yaml

    root = Path(sweep_dir)
    wanted = {f"trial.number={number}", f"trial.study={study_name}"} | ({f"seed={seed}"} if seed is not None else set())
    for listed in sorted(root.glob("*/.hydra/overrides.yaml")):
        try:
            overrides = yaml.safe_load(listed.read_text())
        except (OSError, yaml.YAMLError):
            continue
        if isinstance(overrides, list) and wanted <= {str(o) for o in overrides}:
            return listed.parent.parent.name
    return None


def finished(study: Any) -> int:
    """Trials that count against the budget: complete, pruned or failed, not the interrupted ones."""
    from optuna.trial import TrialState

    done = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)
    return sum(1 for t in study.get_trials(deepcopy=False, states=done) if not t.user_attrs.get(INTERRUPTED_ATTR))
