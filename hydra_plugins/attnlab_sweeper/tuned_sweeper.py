"""``hparams_search=tuned``: each cell of a grid at its own tuned settings.

    python -m experiments.train -m hparams_search=tuned attention=soft,local,linear
    python -m analysis.report.tuned multirun/default/tuned_reverse
    python -m experiments.train -m experiment=study/vaswani_heads hparams_search=tuned attention.num_heads=1,8

Each cell of the grid (the preset's ``hydra.sweeper.params`` and the command line's sweeps, seeds
aside) gets a study of its own with the same budget (``n_trials``) over the declared search space
(``hydra.sweeper.space``: learning rate and warm-up), each trial trained on ``tuning_seeds`` and scored on
validation; then each cell's best configuration, and the shared defaults beside it, are trained on
``final_seeds`` (never a tuning seed) and tested. ``tuned.json`` in the sweep folder records the studies;
the runs are ordinary result.json folders (``trial.role``: tuning, tuned or default). Re-running the
command resumes every study and skips finished runs.

It lives here because Hydra instantiates sweepers only from the ``hydra_plugins`` package.
"""

# No `from __future__ import annotations`: Hydra's plugin scan executes this module outside
# sys.modules, where dataclasses cannot resolve string annotations.
import logging
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from hydra.core.config_store import ConfigStore

from hydra_plugins.attnlab_sweeper.optuna_sweeper import OptunaSweeper, OptunaSweeperConf

log = logging.getLogger(__name__)


@dataclass
class TunedSweeperConf(OptunaSweeperConf):
    """The sweeper's options and their defaults, in Hydra's ConfigStore as ``hydra/sweeper/attnlab_tuned``
    (conf/hydra/sweeper/tuned.yaml, ``hydra/sweeper=tuned``, extends it with a sampler and a pruner)."""

    _target_: str = "hydra_plugins.attnlab_sweeper.tuned_sweeper.TunedSweeper"
    # the tuning budget of each cell: trials that finish (complete, pruned or failed)
    n_trials: Any = 8
    # the seeds each trial trains on (its score: the mean of their objective) ...
    tuning_seeds: Any = field(default_factory=lambda: [0])
    # ... and the fresh seeds each cell's best configuration and the defaults are tested on; never a tuning seed
    final_seeds: Any = field(default_factory=lambda: [1000, 1001, 1002])
    # the metric the cells are compared on at their tuned settings, and which way is better
    compare_on: Any = "test/loss"
    compare_direction: Any = "minimize"
    # the search space (hparams_search=tuned: learning rate and warm-up)
    space: Any = field(default_factory=dict)
    # the grid of cells (a preset's sweep lists); its seed list is replaced by tuning_seeds and final_seeds
    params: Any = field(default_factory=dict)


ConfigStore.instance().store(group="hydra/sweeper", name="attnlab_tuned", node=TunedSweeperConf, provider="attnlab")


class TunedSweeper(OptunaSweeper):
    space_key = "hydra.sweeper.space"  # hydra.sweeper.params are the cells here

    def __init__(
        self,
        tuning_seeds: Any = (0,),
        final_seeds: Any = (1000, 1001, 1002),
        compare_on: str = "test/loss",
        compare_direction: str = "minimize",
        space: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        # the search space; ``params`` (a preset's grid, e.g. study/vaswani_heads' heads) are the cells
        self.space = {str(k): v for k, v in dict(space or {}).items() if v is not None}
        self.tuning_seeds = list(tuning_seeds)
        self.final_seeds = list(final_seeds)
        self.compare_on = compare_on
        self.compare_direction = compare_direction

    def plan(self, arguments: list[str]) -> dict[str, Any]:
        """Every check before any trial, and what the sweep will run: the search space, the cells, the
        arguments every run shares, and the tuning and final seeds. Raises StudyError (one line)."""
        from experiments.config.metric_names import logged_metrics
        from experiments.sweep import optuna_study as s
        from experiments.sweep import tuned_study as t

        assert self.config is not None
        space_args, cells, fixed = t.split_cells(self.space, t.grid_arguments(self.params, arguments))
        space, _ = s.search_space(self.space, space_args)
        tuning, final = t.check_seeds(self.tuning_seeds, self.final_seeds)
        if self.pruner is not None and len(tuning) > 1:
            raise s.StudyError(
                "hydra.sweeper.pruner: a trial trained on several tuning_seeds reports from several runs; "
                "prune with one tuning seed"
            )
        final_metrics = logged_metrics(self.config, "result")
        if self.compare_on not in final_metrics:
            raise s.StudyError(
                f"hydra.sweeper.compare_on={self.compare_on!r}: the task never logs it; "
                f"choose one of {sorted(final_metrics)}"
            )
        if self.compare_direction not in ("minimize", "maximize"):
            raise s.StudyError(
                f"hydra.sweeper.compare_direction={self.compare_direction!r}; choose minimize or maximize"
            )
        self._prepare(space)
        return {"space": space, "cells": cells, "fixed": fixed, "tuning": tuning, "final": final}

    def sweep(self, arguments: list[str]) -> Any:
        from experiments.record.result import write_json_atomic
        from experiments.sweep import tuned_study as t

        assert self.config is not None
        planned, studies = self._open(arguments)
        space, cells, fixed = planned["space"], planned["cells"], planned["fixed"]
        tuning, final = planned["tuning"], planned["final"]
        began = time.perf_counter()
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        earlier = _earlier_best(sweep_dir / "tuned.json")
        record = self._record(planned)
        finals: list[list[str]] = []
        for cell, study in zip(cells, studies):
            self._tune(study, space, [*fixed, *cell], seeds=tuning, role="tuning")
            record["cells"].append(self._cell_record(study, cell))
            best = record["cells"][-1]["best_params"]
            if earlier.get(study.study_name) not in (None, best):
                # more trials found another best: its final seeds are a cell of their own, never pooled with the
                # old best's (analysis/report/sections/tuned.py reads only the seeds at the recorded best)
                log.warning(
                    "tuned: cell %s has a new best configuration %s (was %s); its final seeds at the old one stay "
                    "in their folders, left out of the comparison",
                    t.cell_label(cell),
                    best,
                    earlier[study.study_name],
                )
            finals += _final_runs([*fixed, *cell], best, final, study.study_name)
        log.info("tuned: %d cells tuned; training %d final runs on seeds %s", len(cells), len(finals), final)
        self.launcher.launch(finals, initial_job_idx=self.job_idx)
        record["seconds_this_sweep"] = time.perf_counter() - began
        write_json_atomic(sweep_dir / "tuned.json", record)
        return record

    def _open(self, arguments: list[str]) -> tuple[dict[str, Any], list[Any]]:
        """The plan and every cell's study, opened before any trial: a bad option, or a study whose settings
        changed, stops the sweep whole with one line and exit code 2."""
        from experiments.sweep import optuna_study as s
        from experiments.sweep import tuned_study as t
        from experiments.training.cell_contract import StudyChangedError

        base = str(self.study_name or "tuned")
        try:
            planned = self.plan(arguments)
            settings = {"tuning_seeds": planned["tuning"]}
            studies = [
                self._study(
                    t.study_name(base, cell), self._settings(planned["space"], [*planned["fixed"], *cell], **settings)
                )
                for cell in planned["cells"]
            ]
        except (s.StudyError, StudyChangedError) as err:  # one line and exit code 2, before any trial
            print(f"attnlab: {err}", file=sys.stderr)
            raise SystemExit(2) from None
        return planned, studies

    def _record(self, planned: dict[str, Any]) -> dict[str, Any]:
        """tuned.json's header: the protocol every cell was tuned and tested under; the cells follow."""
        assert self.config is not None
        return {
            "objective": str(self.config.objective),
            "direction": self.direction,
            "compare_on": self.compare_on,
            "compare_direction": self.compare_direction,
            "n_trials": self.n_trials,
            "tuning_seeds": planned["tuning"],
            "final_seeds": planned["final"],
            "search_space": {k: str(v) for k, v in planned["space"].items()},
            "storage": self.spec,  # the cells' studies (the report plots them and names optuna-dashboard's command)
            "cells": [],
        }

    def _cell_record(self, study: Any, cell: list[str]) -> dict[str, Any]:
        from optuna.trial import TrialState

        from experiments.sweep.optuna_study import INTERRUPTED_ATTR
        from experiments.sweep.tuned_study import cell_label

        trials = [t for t in study.get_trials(deepcopy=False) if not t.user_attrs.get(INTERRUPTED_ATTR)]
        complete = [t for t in trials if t.state == TrialState.COMPLETE]
        best: Optional[Any] = study.best_trial if complete else None
        if best is None:
            log.warning("tuned: cell %s has no completed trial; only its defaults are tested", cell_label(cell))
        return {
            "cell": cell_label(cell),
            "overrides": cell,
            "study": study.study_name,
            "best_params": best.params if best is not None else None,
            "best_value": best.value if best is not None else None,
            "trials": [
                {"number": t.number, "state": t.state.name.lower(), "params": t.params, "value": t.value}
                for t in trials
            ],
        }


def _earlier_best(path: Path) -> dict[str, Any]:
    """Each study's best parameters as an earlier run of the sweep recorded them ({}: none recorded)."""
    import json

    try:
        cells = json.loads(path.read_text()).get("cells") or []
    except (OSError, ValueError, AttributeError):
        return {}
    return {c.get("study"): c.get("best_params") for c in cells if isinstance(c, dict)}


def _final_runs(cell: list[str], best: Optional[dict], seeds: list[int], study: str) -> list[list[str]]:
    """The cell's final runs, per seed its best configuration (when a trial completed) and then the defaults."""
    runs = []
    where = [f"trial.study={study}"]
    for seed in seeds:
        if best is not None:
            params = [f"{k}={v}" for k, v in best.items()]
            runs.append([*cell, *params, f"seed={seed}", *where, "trial.role=tuned"])
        runs.append([*cell, f"seed={seed}", *where, "trial.role=default"])
    return runs
