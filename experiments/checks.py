"""Checks of a composed config, run before anything trains. One line per error."""

from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from experiments.errors import ConfigError

COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")  # torch.compile's modes
ARCH_FOR_KIND = {"seq2seq": ("seq2seq", "decoder"), "lm": ("decoder",), "classify": ("encoder",)}


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def _choice(key: str, value, allowed: tuple[str, ...]) -> None:
    if value in allowed:
        return
    import difflib

    near = difflib.get_close_matches(str(value), allowed, n=1)
    hint = f"; did you mean {near[0]!r}?" if near else ""
    raise ConfigError(f"{key}={value} is not allowed; choose one of {list(allowed)}{hint}")


WANDB_MODES = ("online", "offline", "disabled")


def check_logger(cfg: DictConfig) -> None:
    """W&B takes another mode with a multi-line warning and then trains without logging: refuse it here."""
    wandb = (cfg.get("logger") or {}).get("wandb")
    if wandb is not None and "mode" in wandb:
        _choice("logger.wandb.mode", wandb.mode, WANDB_MODES)


def check_config(cfg: DictConfig) -> None:
    from experiments.tasks import TASKS
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
    TASKS.get(cfg.task.name)
    from experiments.roles import check_roles

    check_roles(cfg)
    check_logger(cfg)
    from experiments import lightning_parts

    lightning_parts.check_trainer(cfg.trainer)  # keys and types first: the comparisons below assume them
    lightning_parts.check_callbacks(cfg)
    lightning_parts.check_loggers(cfg)
    t, o, m = cfg.trainer, cfg.optim, cfg.model
    _choice("eval.checkpoint", cfg.eval.checkpoint, ("last", "best"))
    _choice("model.arch", m.arch, ("seq2seq", "decoder", "encoder"))
    _choice("model.norm", m.norm, ("post", "pre"))
    _choice("model.pooling", m.pooling, ("mean", "cls"))
    _choice("model.embedding", m.embedding, ("scaled", "gpt2"))
    _choice("optim.schedule", o.schedule, ("inverse_sqrt", "cosine", "constant"))
    _choice("model.compile_mode", m.compile_mode, COMPILE_MODES)
    _choice("backend", cfg.backend, BACKENDS)
    _require(o.lr > 0, f"optim.lr={o.lr} is not allowed; it must be > 0")
    _require(o.warmup_steps >= 0, f"optim.warmup_steps={o.warmup_steps} is not allowed; it must be >= 0")
    _require(o.grad_clip >= 0, f"optim.grad_clip={o.grad_clip} is not allowed; it must be >= 0 (0 = off)")
    _require(
        t.fast_dev_run or t.max_steps > 0,
        f"trainer.max_steps={t.max_steps} is not allowed; it must be a positive number of steps",
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
    for key in ("dropout", "attention_dropout"):
        value = m[key]
        _require(0 <= value < 1, f"model.{key}={value} is not allowed; it must be in [0, 1)")
    _require(cfg.seed >= 0, f"seed={cfg.seed} is not allowed; it must be >= 0")
    _require(cfg.jobs_per_gpu >= 1, f"jobs_per_gpu={cfg.jobs_per_gpu} is not allowed; it must be >= 1")
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
    check_ensemble(cfg)
    check_claims(cfg)
    if t.accelerator in ("gpu", "cuda"):
        import torch  # here, so that importing the checks does not import torch

        _require(
            torch.cuda.is_available(),
            f"trainer.accelerator={t.accelerator} but no CUDA device is visible; use trainer=cpu",
        )


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


def check_claims(cfg: DictConfig) -> None:
    """A preset's claims are well formed before any cell trains; whether they fit the results is the analysis's
    question (``python -m analysis.claims``), asked once the runs exist."""
    claims = cfg.get("claims")
    if not claims:
        return
    from common.claims import ClaimError, parse_claims

    try:
        parse_claims(OmegaConf.to_container(claims, resolve=True), "claims")
    except ClaimError as err:
        raise ConfigError(str(err)) from None


def longest_sequence(cfg: DictConfig, datamodule) -> int:
    """The longest position index + 1 the model will see in any split."""
    arch = cfg.model.arch
    src, tgt = datamodule.max_source_length(), datamodule.max_target_length()
    if datamodule.kind == "lm":
        return src
    if datamodule.kind == "classify":
        return src + (1 if cfg.model.pooling == "cls" else 0)
    return src + 1 + tgt if arch == "decoder" else max(src, tgt)


def check_task_fit(cfg: DictConfig, datamodule) -> None:
    kind, arch = datamodule.kind, cfg.model.arch
    allowed = ARCH_FOR_KIND[kind]
    _require(
        arch in allowed,
        f"model.arch={arch} does not fit task={cfg.task.name} (a {kind} task); allowed: {list(allowed)}",
    )
    if cfg.position.name == "learned":
        max_len = int(cfg.position.get("max_len", 512))
        need = longest_sequence(cfg, datamodule)
        _require(
            max_len >= need,
            f"position.max_len={max_len} is shorter than the longest sequence of task={cfg.task.name} "
            f"with model.arch={arch} ({need}, eval lengths included); set position.max_len >= {need}",
        )
