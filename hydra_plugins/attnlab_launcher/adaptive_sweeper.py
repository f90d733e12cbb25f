"""``hydra/sweeper=adaptive``: the grid's seeds added in rounds until every claim is decided.

    python -m experiments.train -m experiment=study/vaswani_pe hydra/sweeper=adaptive \\
        hydra.sweeper.budget=10 hydra/launcher=ensemble

The grid is the basic sweeper's (``hydra.sweeper.params`` and the command line's sweeps); its
``seed=`` values, when swept, are the first round, else ``first_round`` seeds 0, 1, .... After
each round the claims (the config's ``claims:``, or ``claims_file``) are decided by their
anytime-valid confidence sequences (experiments/sweep/adaptive.py); the cells of undecided claims get
``step`` more seeds, as one ensemble per cell under ``hydra/launcher=ensemble``, until every claim
is decided or ``budget`` seeds per cell are spent. Rounds are recorded in
``<sweep dir>/adaptive.json``: the same command resumes a killed sweep at its last round.

It lives here because Hydra instantiates sweepers only from the ``hydra_plugins`` package.
"""

# No `from __future__ import annotations`: Hydra's plugin scan executes this module outside
# sys.modules, where dataclasses cannot resolve string annotations.
import itertools
import logging
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.plugins import Plugins
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

log = logging.getLogger(__name__)


@dataclass
class AdaptiveSeedSweeperConf:
    """The sweeper's options and their defaults, in Hydra's ConfigStore as ``hydra/sweeper/attnlab_adaptive``
    (conf/hydra/sweeper/adaptive.yaml, ``hydra/sweeper=adaptive``, extends it). Values the sweeper checks itself,
    with a one-line error naming the key, are typed ``Any`` here so that its error, not OmegaConf's, is the one."""

    _target_: str = "hydra_plugins.attnlab_launcher.adaptive_sweeper.AdaptiveSeedSweeper"
    # the grid, as the basic sweeper's; a swept seed= is the first round
    params: Any = None
    # seeds per cell in the first round when the grid sweeps no seed= (0, 1, ...)
    first_round: Any = 3
    # seeds added per round to each cell of an undecided claim
    step: Any = 2
    # the most seeds per cell; a re-run with a larger budget continues the same sequences
    budget: Any = 20
    # the chance that any claim is decided wrongly, over all claims and all rounds
    alpha: Any = 0.05
    # the precision c of the mixture over the standardised effect (1: spread at Cohen's d = 1)
    mixture: Any = 1.0
    # a claims YAML (a list, or a claims: key) instead of the config's claims:
    claims_file: Optional[str] = None
    # the confidence sequence: t_mixture (Lai; assumes Gaussian per-seed differences; a diverged or failed seed
    # stops its claim undecided), betting (Waudby-Smith and Ramdas; valid for any distribution within bounds; needs
    # bounds; a diverged seed counts at the bound on the metric's bad side) or median (Howard and Ramdas; claims on
    # the median paired difference, valid for any distribution; a diverged seed counts at the metric's worst value);
    # each is a module of attnlab/rules/, and any rule registered there is a value
    boundary: Any = "t_mixture"
    # the claim metrics' range [lo, hi], e.g. [0, 1] for an accuracy; betting needs it
    bounds: Any = None


ConfigStore.instance().store(
    group="hydra/sweeper", name="attnlab_adaptive", node=AdaptiveSeedSweeperConf, provider="attnlab"
)


class AdaptiveSeedSweeper(Sweeper):
    def __init__(
        self,
        params: Optional[Dict[str, str]] = None,
        first_round: int = 3,
        step: int = 2,
        budget: int = 20,
        alpha: float = 0.05,
        mixture: float = 1.0,
        claims_file: Optional[str] = None,
        boundary: str = "t_mixture",
        bounds: Optional[Sequence[float]] = None,
    ) -> None:
        super().__init__()
        self.params = dict(params or {})
        self.hydra_context: Optional[HydraContext] = None
        self.config: Optional[DictConfig] = None
        self.launcher: Optional[Launcher] = None
        self.first_round, self.step, self.budget = first_round, step, budget
        self.alpha, self.mixture, self.claims_file = alpha, mixture, claims_file
        self.boundary, self.bounds = boundary, bounds

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from experiments.sweep.grid import register_resolvers

        register_resolvers()  # before the launcher's config is resolved
        self.hydra_context, self.config = hydra_context, config
        self.launcher = Plugins.instance().instantiate_launcher(
            hydra_context=hydra_context, task_function=task_function, config=config
        )

    def _grid(self, arguments: List[str]) -> tuple:
        """The cells (overrides without the seed) in sweep order, and the swept seeds (None when not swept)."""
        assert self.hydra_context is not None
        parser = OverridesParser.create(config_loader=self.hydra_context.config_loader)
        overrides = parser.parse_overrides([*[f"{k}={v}" for k, v in self.params.items()], *arguments])
        seeds = None
        kept = []
        for override in overrides:
            if override.get_key_element().lstrip("+~") == "seed":
                seeds = [int(v) for v in override.sweep_string_iterator()] if override.is_sweep_override() else None
                if seeds is None:
                    seeds = [int(override.get_value_element_as_str())]
                continue
            kept.append(override)
        return _product(kept), seeds

    def _claims(self) -> tuple:
        """The claims as written (kept in the state for the analysis) and parsed."""
        from attnlab.claims import parse_claims

        assert self.config is not None
        if self.claims_file:
            path = Path(str(self.claims_file))
            if not path.is_file():
                raise ValueError(f"hydra.sweeper.claims_file={self.claims_file} is not a file; give a claims YAML")
            raw = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
            raw = raw.get("claims") if isinstance(raw, dict) else raw
            return raw, parse_claims(raw, str(path))
        raw = OmegaConf.to_container(self.config.claims, resolve=True) if self.config.get("claims") else None
        return raw, parse_claims(raw, "claims")

    def _cells(self, grid: List[List[str]]) -> list:
        from attnlab.flatten import flatten
        from experiments.sweep.adaptive import Cell

        assert self.hydra_context is not None and self.config is not None
        cells = []
        for overrides in grid:
            composed = self.hydra_context.config_loader.load_sweep_config(self.config, [*overrides, "seed=0"])
            OmegaConf.set_struct(composed, False)
            composed.pop("hydra", None)
            config = flatten(OmegaConf.to_container(composed, resolve=False))
            cells.append(Cell(",".join(overrides), tuple(overrides), config))
        return cells

    def sweep(self, arguments: List[str]) -> Any:
        from attnlab.claims import ClaimError
        from experiments.sweep import adaptive

        assert self.config is not None and self.launcher is not None
        try:
            grid, seeds = self._grid(arguments)
            first = tuple(seeds) if seeds is not None else tuple(range(int(self.first_round)))
            bounds = _bounds(self.bounds)
            plan = adaptive.Plan(first, self.step, self.budget, self.alpha, self.mixture, self.boundary, bounds)
            plan.check()
            raw, claims = self._claims()
            adaptive.require_claims(claims)  # before the cells are composed
            adaptive.check_boundary(claims, plan)
            cells = self._cells(grid)
            sides = adaptive.claim_cells(cells, claims)
            sweep_dir = Path(str(self.config.hydra.sweep.dir))
            state = adaptive.load_state(sweep_dir, adaptive.new_state(cells, claims, plan, raw), cells, claims, plan)
        except (adaptive.AdaptiveError, ClaimError, ValueError) as err:
            print(f"attnlab: {err}", file=sys.stderr)  # one line, before any seed trains
            raise SystemExit(2) from None
        sweep_dir.mkdir(parents=True, exist_ok=True)
        OmegaConf.save(self.config, sweep_dir / "multirun.yaml")
        return self._rounds(state, sweep_dir, plan, claims, cells, sides)

    def _rounds(self, state: dict, sweep_dir: Path, plan, claims: list, cells: list, sides: list) -> list:
        from experiments.sweep import adaptive

        assert self.launcher is not None
        returns = []
        while True:
            folders = _folders(state, sweep_dir)
            try:
                decided = _decide(plan, claims, sides, folders)
            except adaptive.AdaptiveError as err:
                print(f"attnlab: {err}", file=sys.stderr)  # a seed outside the betting bounds: one line
                raise SystemExit(2) from None
            decisions = [d for d, _ in decided]
            state["decisions"] = [_decision_row(c, d, o, plan, len(claims)) for c, (d, o) in zip(claims, decided)]
            pending = state["rounds"][-1] if state["rounds"] and not state["rounds"][-1]["done"] else None
            if pending is None:
                active = _active_cells(cells, sides, decisions) if state["rounds"] else list(cells)
                new = {
                    c.key: (plan.next_seeds(_used(folders, c.key)) if state["rounds"] else list(plan.first))
                    for c in active
                }
                new = {k: v for k, v in new.items() if v}
                if not new:
                    state["finished"] = True
                    adaptive.save_state(sweep_dir, state)
                    break
                pending = {"round": len(state["rounds"]) + 1, "first_job": state["jobs"], "seeds": new, "done": False}
                state["rounds"].append(pending)
                state["jobs"] += sum(len(v) for v in new.values())
                adaptive.save_state(sweep_dir, state)  # the round is planned before any of it trains
            by_key = {c.key: c for c in cells}
            batch = [[*by_key[k].overrides, f"seed={s}"] for k, seeds in pending["seeds"].items() for s in seeds]
            log.info(
                "Adaptive seeds: round %d, %d runs over %d cells", pending["round"], len(batch), len(pending["seeds"])
            )
            results = self.launcher.launch(batch, initial_job_idx=pending["first_job"])
            pending["folders"] = {}
            for job, result in zip(batch, results):
                key, seed = ",".join(job[:-1]), job[-1].split("=", 1)[1]
                folder = os.path.relpath(_job_folder(result, sweep_dir), sweep_dir)  # the sweep folder may move
                pending["folders"].setdefault(key, {})[seed] = folder
            pending["done"] = True
            adaptive.save_state(sweep_dir, state)
            returns.append(results)
        for row in state["decisions"]:
            log.info("%s", row["summary"])
        return returns


def _product(overrides: list) -> List[List[str]]:
    """The grid of the overrides, as Hydra's basic sweeper builds it: each key once (a later override of a key
    replaces an earlier one, the command line a preset's params), in first-seen order, and every combination of
    their values, the last key varying fastest."""
    values: Dict[str, List[str]] = {}
    for override in overrides:
        key = override.get_key_element()
        if not override.is_sweep_override():
            values[key] = [f"{key}={override.get_value_element_as_str()}"]
        elif override.is_discrete_sweep():
            values[key] = [f"{key}={value}" for value in override.sweep_string_iterator()]
        else:
            raise ValueError(f"{override.input_line}: the adaptive sweeper takes lists of values (a,b,c), not ranges")
    return [list(job) for job in itertools.product(*values.values())]


def _bounds(value: Any) -> Optional[tuple]:
    """hydra.sweeper.bounds as a tuple (a scalar kept whole in one, so the plan's check names it)."""
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        return (value,)
    return tuple(value)


def _folders(state: dict, sweep_dir: Path) -> Dict[str, Dict[int, str]]:
    """Each cell's finished seeds and their folders, over the rounds done."""
    out: Dict[str, Dict[int, str]] = {}
    for done in state["rounds"]:
        for key, seeds in (done.get("folders") or {}).items():
            for seed, folder in seeds.items():
                out.setdefault(key, {})[int(seed)] = str(sweep_dir / folder)
    return out


def _job_folder(result: Any, sweep_dir: Path) -> str:
    """The folder a job wrote: its working dir where that lies in the sweep (a member of an ensemble, or a job
    run with hydra.job.chdir=true), else its Hydra output dir (the basic launcher runs jobs in the launch dir)."""
    working = Path(str(result.working_dir)).resolve()
    if working.is_relative_to(sweep_dir.resolve()) and working != sweep_dir.resolve():
        return str(working)
    return str(OmegaConf.select(result.hydra_cfg, "hydra.runtime.output_dir"))


def _used(folders: Dict[str, Dict[int, str]], key: str) -> List[int]:
    return sorted(folders.get(key, {}))


def _results(folders: Dict[int, str]) -> Dict[int, dict]:
    import json

    out = {}
    for seed, folder in folders.items():
        try:
            out[seed] = json.loads((Path(folder) / "result.json").read_text())
        except (OSError, ValueError):
            out[seed] = {"status": "failed"}  # no result: the seed has no value, as a failed run
    return out


def _decide(plan, claims: list, sides: list, folders: Dict[str, Dict[int, str]]) -> list:
    """Each claim's (decision, observations), from the result files of its cells' finished seeds."""
    from experiments.sweep import adaptive

    out = []
    for claim, (a, b) in zip(claims, sides):
        results_a = _results(folders.get(a.key, {}))
        results_b = None if b is None else _results(folders.get(b.key, {}))
        adaptive.check_observed(claim, (results_a, results_b), plan)
        observed = adaptive.claim_values(claim, results_a, results_b, plan.bounds)
        out.append((adaptive.decide(claim, observed, plan, len(claims)), observed))
    return out


def _active_cells(cells: list, sides: list, decisions: Sequence) -> list:
    """The cells of the claims not yet decided nor stopped (a lost seed under the t-mixture, a model violation), in
    grid order."""
    wanted = {
        c.key
        for (a, b), d in zip(sides, decisions)
        if d.verdict is None and not d.reason
        for c in (a, b)
        if c is not None
    }
    return [c for c in cells if c.key in wanted]


def _decision_row(claim, decision, observed, plan, claims: int) -> dict:
    from attnlab.sequential import correction
    from experiments.sweep import adaptive

    def finite(x: float) -> Optional[float]:
        return x if math.isfinite(x) else None  # JSON has no infinity: an unbounded edge is null

    return {
        "claim": claim.name,
        "verdict": decision.verdict,
        "n": decision.n,
        "low": finite(decision.low),
        "high": finite(decision.high),
        "mean": finite(decision.mean),
        "reason": decision.reason,
        "sides": observed.sides,
        "correction": correction(claims, plan.alpha),
        "summary": adaptive.summary(claim, decision, observed, plan, claims),
    }
