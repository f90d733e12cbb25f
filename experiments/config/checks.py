"""Checks of a composed config, run before anything trains. One line per error."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from experiments.config.errors import ConfigError
from experiments.config.errors import choice as _choice
from experiments.config.errors import require as _require
from experiments.config.metric_names import logged_metrics
from experiments.config.schema import COMPILE_MODES, EVAL_CHECKPOINTS, validate_model_options, validate_optim

if TYPE_CHECKING:  # the spec is built by running these checks (experiments.config.spec.build_spec)
    from experiments.config.spec import ModelChoice, Spec


def check_logger(cfg: DictConfig) -> None:
    """W&B takes another mode with a multi-line warning and then trains without logging: refuse it here
    (``logger.wandb.mode``, else ``WANDB_MODE``: experiments/config/wandb_settings.py)."""
    wandb = (cfg.get("logger") or {}).get("wandb")
    if wandb is not None:
        from experiments.config.wandb_settings import check_mode

        check_mode(wandb)


def check_config(cfg: DictConfig) -> None:
    """Every value of a composed config, then its task."""
    check_values(cfg)
    check_task(cfg)


def check_task(cfg: DictConfig) -> None:
    """The task is registered and every callback's ``monitor`` is a metric it logs. Apart from the other
    values, and checked last by the command line (experiments/app/preflight/), because naming a task
    imports Lightning (a task is a LightningDataModule): any other refusal comes without that wait."""
    from experiments.tasks import TASKS

    TASKS.get(cfg.task.name)
    check_monitors(cfg)


def check_values(cfg: DictConfig) -> None:
    """Every value of a composed config but its task (``check_task``)."""
    from variants import ATTENTION, POSITION
    from variants.discovery import import_plugins
    from variants.kernels import BACKENDS

    import_plugins(list(cfg.get("plugins") or []))

    missing = sorted(OmegaConf.missing_keys(cfg))
    _require(
        not missing,
        f"{', '.join(missing)}: required but not set; give it on the command line, "
        f"e.g. {missing[0] if missing else ''}=...",
    )
    ATTENTION.get(cfg.attention.name)
    POSITION.get(cfg.position.name)
    from experiments.config.roles import check_roles

    check_roles(cfg)
    check_logger(cfg)
    from experiments.config import lightning_keys

    lightning_keys.check_trainer(cfg.trainer)  # keys and types first: the comparisons below assume them
    lightning_keys.check_callbacks(cfg)
    lightning_keys.check_loggers(cfg)
    t, m = cfg.trainer, cfg.model
    _choice("eval.checkpoint", cfg.eval.checkpoint, EVAL_CHECKPOINTS)
    # the schema's validators: the same checks, values and messages as when the model and optimiser are built
    validate_model_options(m)
    _choice("model.compile_mode", m.compile_mode, COMPILE_MODES)
    _choice("backend", cfg.backend, BACKENDS)
    check_optim(cfg)
    check_trainer_values(cfg)
    check_resources(cfg)
    _require(
        t.fast_dev_run or t.max_steps > 0,
        f"trainer.max_steps={t.max_steps} is not allowed; it must be a positive number of steps (to test a trained "
        "run without training: python -m experiments.evaluate ckpt_path=RUN_DIR)",
    )
    n = cfg.eval.attention_stats_examples
    _require(
        n is None or n > 0,
        f"eval.attention_stats_examples={n} is not allowed; it must be a positive integer or null (all)",
    )
    _require(
        t.get("val_check_interval") is None or t.val_check_interval > 0,
        f"trainer.val_check_interval={t.val_check_interval} is not allowed; it must be > 0",
    )
    _require(cfg.seed >= 0, f"seed={cfg.seed} is not allowed; it must be >= 0")
    _require(cfg.jobs_per_gpu >= 1, f"jobs_per_gpu={cfg.jobs_per_gpu} is not allowed; it must be >= 1")
    check_ddp(cfg)
    check_ensemble(cfg)
    check_claims(cfg)
    if t.accelerator in ("gpu", "cuda"):
        import torch  # here, so that importing the checks does not import torch

        _require(
            torch.cuda.is_available(),
            f"trainer.accelerator={t.accelerator} but no CUDA device is visible; use trainer=cpu",
        )


def check_ddp(cfg: DictConfig) -> None:
    """A DDP cell: whole GPUs (no ``jobs_per_gpu``), and more than one process."""
    t = cfg.trainer
    _require(
        cfg.jobs_per_gpu == 1 or "ddp" not in str(t.strategy),
        f"jobs_per_gpu={cfg.jobs_per_gpu} with trainer.strategy={t.strategy}: a DDP cell uses whole GPUs; "
        "set jobs_per_gpu=1",
    )
    if "ddp" in str(t.strategy):
        devices = t.devices
        many = (
            (isinstance(devices, int) and devices > 1)
            or t.num_nodes > 1
            or devices in ("auto", -1)
            or (not isinstance(devices, int) and len(list(devices)) > 1)
        )
        _require(
            many,
            f"trainer.strategy={t.strategy} with trainer.devices={devices} and num_nodes={t.num_nodes}: "
            "DDP needs more than one process; set trainer.devices >= 2 or use trainer=cpu",
        )


def check_optim(cfg: DictConfig) -> None:
    """Values the optimiser would take and then train with wrongly (a negative or infinite learning rate), and
    the keys beside ``optim`` that must agree with it."""
    o, m = cfg.optim, cfg.model
    validate_optim(o)
    _require(
        m.compile or m.compile_mode == "default",
        f"model.compile_mode={m.compile_mode} takes effect only with model.compile=true; "
        "add model.compile=true or leave model.compile_mode=default",
    )
    # one key for one thing: optim.grad_clip (the ensemble clips each member by it); the Trainer's follows it
    clip = cfg.trainer.get("gradient_clip_val")
    _require(
        clip is None or clip == o.grad_clip,
        f"trainer.gradient_clip_val={clip} is not allowed beside optim.grad_clip={o.grad_clip}; "
        f"the clipping is set by optim.grad_clip (0: off), e.g. optim.grad_clip={clip}",
    )


# Trainer keywords that count something and mean nothing below their minimum (Lightning divides by some)
TRAINER_MINIMUM = {
    "accumulate_grad_batches": 1,
    "log_every_n_steps": 1,
    "num_nodes": 1,
    "check_val_every_n_epoch": 1,
    "reload_dataloaders_every_n_epochs": 0,
    "num_sanity_val_steps": -1,
    "max_epochs": -1,
}
LIMIT_KEYS = ("limit_train_batches", "limit_val_batches", "limit_test_batches", "limit_predict_batches")
HALF_ON_CPU = ("16-mixed", "16", 16)  # CPU autocast has no float16: Lightning would run bf16 and record 16-mixed


def on_cpu(trainer: DictConfig) -> bool:
    """Whether the Trainer trains on the CPU (``accelerator=auto`` without a visible GPU)."""
    if trainer.accelerator == "cpu":
        return True
    if trainer.accelerator != "auto":
        return False
    import torch  # here, so that importing the checks does not import torch

    return not torch.cuda.is_available()


def check_trainer_values(cfg: DictConfig) -> None:
    t = cfg.trainer
    for key, minimum in TRAINER_MINIMUM.items():
        value = t.get(key)
        _require(
            value is None or (isinstance(value, int) and value >= minimum),
            f"trainer.{key}={value} is not allowed; it must be an integer >= {minimum}",
        )
    # attnlab's own count beside the Trainer's (Lightning's ModelCheckpoint divides by it)
    _require(
        cfg.checkpoint_every_n_steps >= 1,
        f"checkpoint_every_n_steps={cfg.checkpoint_every_n_steps} is not allowed; it must be an integer >= 1",
    )
    for key in LIMIT_KEYS:
        value = t.get(key)
        _require(
            value is None or (value >= 0 and (isinstance(value, int) or value <= 1)),
            f"trainer.{key}={value} is not allowed; it must be a fraction in [0, 1] or a number of batches >= 0",
        )
    devices = t.get("devices")
    _require(
        not isinstance(devices, int) or devices >= 1 or devices == -1,
        f"trainer.devices={devices} is not allowed; it must be >= 1, -1 (all), 'auto' or a list",
    )
    if on_cpu(t):
        _require(
            t.get("precision") not in HALF_ON_CPU,
            f"trainer.precision={t.precision} is not allowed on the CPU (it has no float16 autocast); "
            "use 32-true or bf16-mixed",
        )
        cores = available_cores()
        _require(
            not isinstance(devices, int) or devices <= cores,
            f"trainer.devices={devices} is not allowed on the CPU; this machine has {cores} cores",
        )
        _require(
            not isinstance(devices, int) or devices == 1 or "ddp" in str(t.strategy),
            f"trainer.devices={devices} on the CPU needs trainer.strategy=ddp (trainer=ddp); "
            "for more threads in one process set num_threads",
        )
    if cfg.eval.checkpoint == "best":
        _require(
            t.get("limit_val_batches") != 0,
            "eval.checkpoint=best with trainer.limit_val_batches=0: nothing is validated, so there are no best "
            "weights; use eval.checkpoint=last or let validation run",
        )


def available_cores() -> int:
    """The cores this process may use (SLURM and taskset narrow them); the sweep shares them out among its jobs
    (experiments/sweep/grid.py)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def check_resources(cfg: DictConfig) -> None:
    """Thread counts this machine can give."""
    cores = available_cores()
    n = cfg.num_threads
    _require(
        isinstance(n, int) and 0 <= n <= cores,
        f"num_threads={n} is not allowed; it must be 0 (the cores shared out) to {cores} (this machine's cores)",
    )


def check_monitored(key: str, metric: Any, cfg: DictConfig, stage: str = "val") -> None:
    """One line when ``key`` names a metric the run never logs (it would fail, or score nothing, after training)."""
    logged = logged_metrics(cfg, stage)
    if metric in logged:
        return
    import difflib

    near = difflib.get_close_matches(str(metric), sorted(logged), n=1)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    raise ConfigError(
        f"{key}={metric}: task={cfg.task.name} (model.arch={cfg.model.arch}) never logs it; "
        f"it logs {sorted(logged)}{hint}"
    )


def check_monitors(cfg: DictConfig) -> None:
    """Every Lightning callback's ``monitor`` names a metric the run logs."""
    for name, node in (cfg.get("callbacks") or {}).items():
        if node is not None and node.get("monitor"):
            check_monitored(f"callbacks.{name}.monitor", node.monitor, cfg)


def check_ensemble(cfg: DictConfig) -> None:
    """``ensemble.seeds`` and the member lists hydra/launcher=ensemble sets name one member each."""
    n = cfg.ensemble.seeds
    _require(
        isinstance(n, int) and n >= 1, f"ensemble.seeds={n} is not allowed; it must be an integer >= 1 (1: one run)"
    )
    for key in ("member_seeds", "member_dirs"):
        listed = cfg.ensemble.get(key)
        if listed is None:
            continue
        listed = list(listed)
        _require(
            len(listed) == n,
            f"ensemble.{key}={listed} lists {len(listed)} members but ensemble.seeds={n}; they must agree",
        )
        _require(
            len({str(x) for x in listed}) == n,
            f"ensemble.{key}={listed} names a member twice; each member needs its own",
        )
    if n != 1 or cfg.ensemble.get("member_seeds") is not None:
        # the members resume only their shared checkpoint, and each starts from its own seed's weights
        for key, instead in (
            ("ckpt_path", "re-running the ensemble's command resumes it from ensemble/checkpoints/last.ckpt"),
            ("init_from", "warm-start the seeds as separate runs (-m seed=...)"),
        ):
            _require(
                cfg.get(key) is None,
                f"{key}={cfg.get(key)} is not taken by an ensemble (ensemble.seeds={n}); {instead}, or drop {key}",
            )


def check_claims(cfg: DictConfig) -> None:
    """A preset's claims are well formed before any cell trains; whether they fit the results is the analysis's
    question (``python -m analysis.claims``), asked once the runs exist."""
    claims = cfg.get("claims")
    if not claims:
        return
    from attnlab.claims import ClaimError, parse_claims

    try:
        parse_claims(OmegaConf.to_container(claims, resolve=True), "claims")
    except ClaimError as err:
        raise ConfigError(str(err)) from None


def longest_sequence(model: ModelChoice, datamodule) -> int:
    """The longest position index + 1 the model will see in any split."""
    src, tgt = datamodule.max_source_length(), datamodule.max_target_length()
    if datamodule.kind == "lm":
        return src
    if datamodule.kind == "classify":
        return src + (1 if model.options["pooling"] == "cls" else 0)
    return src + 1 + tgt if model.arch == "decoder" else max(src, tgt)


def check_task_fit(spec: Spec, datamodule) -> None:
    """The built task fits the model: its architecture, its batch size, a learned position table's length."""
    from experiments.tasks import TASKS

    kind, arch, task = datamodule.kind, spec.model.arch, spec.task.name
    allowed = TASKS.declared(task).architectures
    _require(
        arch in allowed,
        f"model.arch={arch} does not fit task={task} (a {kind} task); allowed: {list(allowed)}",
    )
    # an lm task draws its training windows on the fly (task.train_batches_per_epoch): no list to count
    examples = len(datamodule.split("train")) if datamodule.kind != "lm" else datamodule.batch_size
    _require(
        datamodule.batch_size <= examples,
        f"task.batch_size={datamodule.batch_size} is more than task={task}'s {examples} training examples "
        f"(a step would see fewer than asked); set task.batch_size <= {examples} or more training data",
    )
    position = spec.model.position
    if position["name"] == "learned":
        max_len = int(position.get("max_len", 512))
        need = longest_sequence(spec.model, datamodule)
        _require(
            max_len >= need,
            f"position.max_len={max_len} is shorter than the longest sequence of task={task} "
            f"with model.arch={arch} ({need}, eval lengths included); set position.max_len >= {need}",
        )
