"""The run specification: the composed config read once into frozen, typed specs.

``build_spec(cfg)`` is the one place a composed Hydra config is read for a run: it fills in each role's
attention (``roles.expand_roles``), runs the config's checks (``checks.check_values``, then the task's) in one
pass, and copies every value into frozen dataclasses of plain, read-only data. Below ``config/`` and ``app/``
the run takes these specs (or plain values), never the ``DictConfig``:

- ``RunSpec``: the run's identity and what it records (seed, name, resume, the resolved config and its hash);
- ``ModelChoice``: the model options the user chose, each variant's node (the data decides the rest);
- ``TaskSpec``, ``EvalSpec``: the task's registry name and parameters; what the test measures;
- ``TrainerSpec``: lightning.Trainer's keywords, the callbacks and loggers by name, attnlab's own settings;
- ``SweepSpec``: what a launcher or sweeper sets (threads, GPU sharing, an ensemble's members, a study trial);
- ``optim``: the optimiser's options (``Spec.optim_options()`` is the module's ``OptimConf``).

A check that refuses the config does not raise at build: the refusal is kept (``Spec.problem``) and raised
by ``Spec.checked()`` where the run records its ending, so a sweep's bad cell still leaves a failed result,
as it did when the checks ran inside the build of the run's parts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any

from omegaconf import DictConfig, OmegaConf

from attnlab.flatten import flatten
from attnlab.roles import ROLES
from experiments.config.schema import EvalConf, ModelOptions, OptimConf


def freeze(value: Any) -> Any:
    """Plain nested data made read-only: a dict becomes a ``MappingProxyType``, a list a tuple."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """``freeze`` undone: fresh dicts and lists, as ``OmegaConf.to_container`` gave them (a config holds no tuple),
    for what takes plain data (``hydra.utils.instantiate``, ``json``, a checkpoint's hyper-parameters)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


@dataclass(frozen=True)
class RunSpec:
    """Who the run is and what it records."""

    name: str
    seed: int
    backend: str
    resume: str
    ckpt_path: str | None
    init_from: str | None
    objective: str
    plugins: tuple[str, ...]
    fail_at_step: int | None
    #: the resolved config (roles expanded), nested and flattened (``attnlab.flatten``), and the flat one's hash
    resolved: Mapping[str, Any]
    flat: Mapping[str, Any]
    config_hash: str

    def flat_config(self) -> dict[str, Any]:
        """The flattened config as a fresh plain dict: result.json's ``config``, the loggers' hyper-parameters."""
        return thaw(self.flat)

    def resolved_config(self) -> dict[str, Any]:
        """The resolved config as fresh plain nested data (what a checkpoint may store)."""
        return thaw(self.resolved)


@dataclass(frozen=True)
class ModelChoice:
    """The Transformer the user chose (``model.*``); the task decides its vocabulary and special tokens."""

    #: ``ModelOptions``' fields (arch, d_model, norm, ...)
    options: Mapping[str, Any]
    #: each variant as ``{"name": ..., **params}``; a role is None where it uses ``attention``
    attention: Mapping[str, Any]
    position: Mapping[str, Any]
    roles: Mapping[str, Mapping[str, Any] | None]
    compile: bool
    compile_mode: str

    @property
    def arch(self) -> str:
        return str(self.options["arch"])

    @property
    def d_model(self) -> int:
        return int(self.options["d_model"])

    def role_labels(self) -> dict[str, str | None]:
        """{role: label or None}: what result.json and the W&B tags record for each role (``roles.label``)."""
        from experiments.config.roles import label

        return {role: label(node) for role, node in self.roles.items()}

    def names(self) -> dict[str, str]:
        """The main attention's and position's registry names."""
        return {"attention": str(self.attention["name"]), "position": str(self.position["name"])}


@dataclass(frozen=True)
class TaskSpec:
    name: str
    #: every key of the task's node but ``name``, in the node's order
    params: Mapping[str, Any]


@dataclass(frozen=True)
class EvalSpec:
    """``eval.*``: what the test measures and which weights it tests (``schema.EvalConf``' fields)."""

    generate: bool
    attention_maps: bool
    attention_stats: bool
    attention_stats_examples: int | None
    checkpoint: str


@dataclass(frozen=True)
class TrainerSpec:
    """lightning.Trainer's keywords (``node``, with its ``_target_``), the Lightning callbacks and loggers by name
    (a None entry is switched off), and attnlab's own settings beside them."""

    node: Mapping[str, Any]
    callbacks: Mapping[str, Mapping[str, Any] | None]
    loggers: Mapping[str, Mapping[str, Any] | None]
    own_callbacks: tuple[str, ...]
    checkpoint_every_n_steps: int
    progress_bar: bool | None
    wandb_uploads: Mapping[str, bool]

    def get(self, key: str, default: Any = None) -> Any:
        """A Trainer keyword's value, ``default`` where the node does not set it."""
        return self.node.get(key, default)

    @property
    def max_steps(self) -> int:
        return int(self.node.get("max_steps", -1) or -1)

    @property
    def log_every_n_steps(self) -> int:
        return int(self.node.get("log_every_n_steps") or 1)

    @property
    def accelerator(self) -> str:
        return str(self.node.get("accelerator", "auto"))

    @property
    def strategy(self) -> str:
        return str(self.node.get("strategy", "auto"))


@dataclass(frozen=True)
class SweepSpec:
    """What a launcher or sweeper sets for this run: threads, GPU sharing, an ensemble's members, a trial."""

    num_threads: int
    jobs_per_gpu: int
    #: ensemble.seeds, and the members' seeds and folders hydra/launcher=ensemble sets (None: seed .. seed+N-1)
    ensemble_seeds: int
    member_seeds: tuple[int, ...] | None
    member_dirs: tuple[str, ...] | None
    #: the Optuna trial this run reports to (``trial.*``: number, study, storage, role)
    trial: Mapping[str, Any]
    claims: tuple[Any, ...]


@dataclass(frozen=True)
class Spec:
    """One run's specification, built once from the composed config (``build_spec``)."""

    run: RunSpec
    model: ModelChoice
    optim: Mapping[str, Any]
    task: TaskSpec
    trainer: TrainerSpec
    eval: EvalSpec
    sweep: SweepSpec
    #: the refusal of the config's checks, raised by ``checked()`` where the run records its ending
    problem: Exception | None = None

    def checked(self) -> "Spec":
        """This spec, or the checks' refusal raised."""
        if self.problem is not None:
            raise self.problem
        return self

    def names(self) -> dict[str, str]:
        """{"task": .., "attention": .., "position": ..}: the registry names result.json and W&B name the run by."""
        return {"task": self.task.name, **self.model.names()}

    def used_variants(self, unused: Iterable[str] = ()) -> dict[str, list[str]]:
        """Registry kind -> the names the run uses: its task, position and every attention type of any role,
        but a role whose config key is in ``unused`` (``model.cross_attention`` of a decoder-only model)."""
        skip = set(unused)
        roles = [str(n["name"]) for r, n in self.model.roles.items() if n is not None and f"model.{r}" not in skip]
        names = self.names()
        return {"attention": [names["attention"], *roles], "position": [names["position"]], "task": [names["task"]]}

    def optim_options(self) -> OptimConf:
        """The optimiser's options as the module takes them (a fresh ``OptimConf``)."""
        return OptimConf(**thaw(self.optim))


@dataclass(frozen=True)
class GridSpec:
    """A multirun's grid as its Hydra callback reads the sweep's config before any cell starts
    (experiments/sweep/grid.py): a preset's sweep lists, the command line, the launcher and the Trainer."""

    #: ``hydra.sweeper.params``: key -> the sweep list as written (``soft,hard``)
    params: Mapping[str, str]
    #: the command line's overrides (``hydra.overrides.task``)
    overrides: tuple[str, ...]
    launcher: Mapping[str, Any]
    trainer: Mapping[str, Any]


def grid_spec(config: DictConfig) -> GridSpec:
    """The grid of a sweep's config (the hydra node included), read once."""
    params = OmegaConf.select(config, "hydra.sweeper.params") or {}
    launcher = OmegaConf.select(config, "hydra.launcher")
    return GridSpec(
        params=MappingProxyType({str(key): str(value) for key, value in params.items()}),
        overrides=tuple(str(o) for o in OmegaConf.select(config, "hydra.overrides.task") or ()),
        launcher=freeze(OmegaConf.to_container(launcher, resolve=True) if launcher is not None else {}),
        trainer=freeze(OmegaConf.to_container(config.trainer, resolve=True)),
    )


def build_spec(cfg: DictConfig, *, check_task: bool = True) -> Spec:
    """The run's spec from a composed config, checked in one pass (``checks.check_values``, then, with
    ``check_task``, the task's check, which imports Lightning: the preflight runs it last itself)."""
    from experiments.config import checks
    from experiments.config.roles import expand_roles

    expand_roles(cfg)  # in place: every form of a per-role variant gives the same config, hash and record
    problem: Exception | None = None
    try:
        checks.check_values(cfg)
        if check_task:
            checks.check_task(cfg)
    except Exception as err:  # noqa: BLE001 - every refusal is raised where the run records its ending
        problem = err
    return spec_of(OmegaConf.to_container(cfg, resolve=True), problem)


def spec_of(plain: Mapping[str, Any], problem: Exception | None = None) -> Spec:
    """The spec of a resolved config given as plain nested data (``OmegaConf.to_container(cfg, resolve=True)``)."""
    from experiments.config.hashing import config_hash

    flat = flatten(thaw(plain))
    model, ensemble = plain.get("model") or {}, plain.get("ensemble") or {}
    task = dict(plain.get("task") or {})
    members = ensemble.get("member_seeds"), ensemble.get("member_dirs")
    run = RunSpec(
        name=str(plain.get("name")),
        seed=plain.get("seed"),
        backend=str(plain.get("backend")),
        resume=plain.get("resume"),
        ckpt_path=None if plain.get("ckpt_path") is None else str(plain["ckpt_path"]),
        init_from=None if plain.get("init_from") is None else str(plain["init_from"]),
        objective=str(plain.get("objective")),
        plugins=tuple(str(p) for p in plain.get("plugins") or ()),
        fail_at_step=plain.get("fail_at_step"),
        resolved=freeze(plain),
        flat=freeze(flat),
        config_hash=config_hash(flat),
    )
    return Spec(
        run=run,
        model=ModelChoice(
            options=freeze({f.name: model.get(f.name) for f in fields(ModelOptions)}),
            attention=freeze(plain.get("attention") or {}),
            position=freeze(plain.get("position") or {}),
            roles=MappingProxyType({role: freeze(model.get(role)) for role in ROLES}),
            compile=bool(model.get("compile")),
            compile_mode=str(model.get("compile_mode")),
        ),
        optim=freeze(plain.get("optim") or {}),
        task=TaskSpec(name=str(task.pop("name", None)), params=freeze(task)),
        trainer=TrainerSpec(
            node=freeze(plain.get("trainer") or {}),
            callbacks=freeze(plain.get("callbacks") or {}),
            loggers=freeze(plain.get("logger") or {}),
            own_callbacks=tuple(plain.get("own_callbacks") or ()),
            checkpoint_every_n_steps=plain.get("checkpoint_every_n_steps"),
            progress_bar=plain.get("progress_bar"),
            wandb_uploads=freeze(plain.get("wandb_uploads") or {}),
        ),
        eval=EvalSpec(**{f.name: (plain.get("eval") or {}).get(f.name) for f in fields(EvalConf)}),
        sweep=SweepSpec(
            num_threads=plain.get("num_threads"),
            jobs_per_gpu=plain.get("jobs_per_gpu"),
            ensemble_seeds=ensemble.get("seeds", 1),
            member_seeds=None if members[0] is None else tuple(members[0]),
            member_dirs=None if members[1] is None else tuple(str(d) for d in members[1]),
            trial=freeze(plain.get("trial") or {}),
            claims=freeze(list(plain.get("claims") or [])),
        ),
        problem=problem,
    )


__all__ = [
    "EvalSpec",
    "GridSpec",
    "ModelChoice",
    "RunSpec",
    "Spec",
    "SweepSpec",
    "TaskSpec",
    "TrainerSpec",
    "build_spec",
    "freeze",
    "grid_spec",
    "spec_of",
    "thaw",
]
