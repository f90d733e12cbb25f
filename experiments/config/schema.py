"""Structured config: the typed schema Hydra validates every composed config against.

Variant and task groups stay open dictionaries (each entry has its own
parameters, checked by its registry); everything else is typed, so
``optim.lr=abc`` fails at composition. ``trainer``, ``callbacks`` and ``logger`` are open too: they
hold the keywords of Lightning's classes, checked against those classes' signatures before a run
(``experiments/training/lightning_parts.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional

from experiments.config.errors import choice, require

# Each key's allowed values, once; the validators below, the checks (experiments/config/checks.py) and the
# Transformer (experiments/model/transformer.py) take them from here.
ARCHS = ("seq2seq", "decoder", "encoder")
NORMS = ("post", "pre")
POOLINGS = ("mean", "cls")
# How token embeddings start and enter the residual stream:
# - "scaled" (Vaswani et al.): std d^-1/2, multiplied by sqrt(d) at the input (unit scale);
# - "gpt2": std 0.02 and no input scale, like the learned position table. Under Adam a table
#   that starts small is learned relatively faster; nanoGPT's recipes assume this one.
# An absolute position term is matched to whichever is chosen (experiments.model.layers.Stack).
EMBEDDINGS = ("scaled", "gpt2")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune")  # torch.compile's modes
# the learning-rate schedules experiments.training.optimiser implements (optim.schedule)
SCHEDULES = ("inverse_sqrt", "cosine", "constant")
# the weights that are tested (eval.checkpoint)
EVAL_CHECKPOINTS = ("last", "best")


def validate_model_options(m: Any) -> None:
    """The ``model.*`` options a user chooses (a ``ModelOptions`` or the config's ``model`` node), one line per error.

    The config checks run it before anything is built, and ``ModelSpec.validate`` when the Transformer is.
    """
    from variants.checks import positive

    choice("model.arch", m.arch, ARCHS)
    choice("model.norm", m.norm, NORMS)
    choice("model.pooling", m.pooling, POOLINGS)
    choice("model.embedding", m.embedding, EMBEDDINGS)
    positive("model.d_model", m.d_model, integer=True)
    positive("model.ffn_dim", m.ffn_dim, integer=True)
    for key in ("dropout", "attention_dropout"):
        value = getattr(m, key)
        require(0 <= value < 1, f"model.{key}={value} is not allowed; it must be in [0, 1)")
    if m.arch in ("seq2seq", "encoder"):
        positive("model.encoder_layers", m.encoder_layers, integer=True)
    if m.arch in ("seq2seq", "decoder"):
        positive("model.decoder_layers", m.decoder_layers, integer=True)


def validate_optim(o: Any) -> None:
    """The ``optim.*`` values the optimiser would take and then train with wrongly (an ``OptimConf`` or the
    config's ``optim`` node), one line per error. REINFORCE's options are checked by ``OptimConf.validate``."""
    require(o.lr > 0, f"optim.lr={o.lr} is not allowed; it must be > 0")
    for key in ("lr", "weight_decay", "grad_clip", "label_smoothing", "min_lr_ratio"):
        value = getattr(o, key)
        require(math.isfinite(value), f"optim.{key}={value} is not allowed; it must be a finite number")
    require(o.weight_decay >= 0, f"optim.weight_decay={o.weight_decay} is not allowed; it must be >= 0")
    require(o.warmup_steps >= 0, f"optim.warmup_steps={o.warmup_steps} is not allowed; it must be >= 0")
    require(o.grad_clip >= 0, f"optim.grad_clip={o.grad_clip} is not allowed; it must be >= 0 (0 = off)")
    choice("optim.schedule", o.schedule, SCHEDULES)
    # cosine decays to lr * min_lr_ratio: below 0 the rate turns negative, above 1 it rises past its peak
    require(
        0 <= o.min_lr_ratio <= 1,
        f"optim.min_lr_ratio={o.min_lr_ratio} is not allowed; it must be in [0, 1] (the final lr as a fraction of lr)",
    )
    require(
        0 <= o.label_smoothing < 1,
        f"optim.label_smoothing={o.label_smoothing} is not allowed; it must be in [0, 1)",
    )


@dataclass
class ModelOptions:
    """The Transformer a user chooses (``model.*``): the one home of each default.

    The defaults are a small Transformer that trains on CPU in minutes (``model=small``);
    ``conf/model/base.yaml`` overrides them with the paper's base model. The runtime spec
    (``experiments.model.transformer.ModelSpec``) extends this class with what the data decides.
    """

    arch: str = "seq2seq"  # seq2seq | decoder | encoder
    d_model: int = 64
    encoder_layers: int = 2
    decoder_layers: int = 2
    ffn_dim: int = 256
    dropout: float = 0.1
    attention_dropout: float = 0.0
    norm: str = "post"  # post (the paper's) | pre
    tie_embeddings: bool = True
    pooling: str = "mean"  # encoder only: mean | cls
    embedding: str = "scaled"  # scaled (the paper: std d^-1/2, x sqrt(d) at the input) | gpt2 (std 0.02, no scale)
    # additive biases in the attention projections, feed-forward layers, layer norms and classifier; false: none,
    # as in nanoGPT's recipe (about 6% less time per CPU step there: each biased matmul first copies its bias)
    bias: bool = True

    def validate(self) -> None:
        validate_model_options(self)


@dataclass
class ModelConf(ModelOptions):
    """``model`` in the config: the options, each role's attention as a config node, and compilation."""

    # per-role attention: null = the ``attention`` group; or the group placed at the role,
    # attention@model.cross_attention=local model.cross_attention.window=4 (experiments/config/roles.py)
    encoder_attention: Any = None
    decoder_attention: Any = None
    cross_attention: Any = None
    compile: bool = False
    # with compile: default | reduce-overhead (CUDA graphs; fixed-shape batches) | max-autotune
    compile_mode: str = "default"


@dataclass
class OptimConf:
    """``optim``: AdamW, the learning-rate schedule, gradient clipping and REINFORCE's options.

    The module trains with this object itself (one class for the config node and the optimiser's options).
    """

    lr: float = 1e-3
    weight_decay: float = 0.01
    betas: list[float] = field(default_factory=lambda: [0.9, 0.98])
    warmup_steps: int = 100
    schedule: str = "inverse_sqrt"  # inverse_sqrt | cosine | constant
    min_lr_ratio: float = 0.1  # cosine: the final learning rate as a fraction of lr
    label_smoothing: float = 0.0
    # the largest gradient norm (0: no clipping); trainer.gradient_clip_val follows it
    grad_clip: float = 1.0
    # REINFORCE hard attention (attention.estimator=reinforce); experiments/model/reinforce.py, docs/reinforce.md
    reinforce_weight: float = 1.0  # the score-function term's weight (1 = the unbiased estimator)
    reinforce_baseline_decay: float = 0.9  # moving_average only
    # sequence | position (a decoder query is credited with the loss from its position on)
    reinforce_reward: str = "position"
    # position: weight discount^(s - t) of a later position's loss (1 = unbiased; 0, each query
    # its own position's loss: measured fastest, docs/reinforce.md)
    reinforce_discount: float = 0.0
    # none | moving_average | learned | leave_one_out (per query position)
    reinforce_baseline: str = "moving_average"
    reinforce_samples: int = 1  # k samples of every example per step (leave_one_out needs k >= 2)
    reinforce_entropy: float = 0.0  # weight of the entropy bonus

    def reinforce(self):
        """The REINFORCE options as ``experiments.config.reinforce_options.ReinforceSpec``."""
        from experiments.config.reinforce_options import ReinforceSpec

        return ReinforceSpec(
            weight=self.reinforce_weight,
            reward=self.reinforce_reward,
            discount=self.reinforce_discount,
            baseline=self.reinforce_baseline,
            baseline_decay=self.reinforce_baseline_decay,
            samples=self.reinforce_samples,
            entropy=self.reinforce_entropy,
        )

    def validate(self) -> None:
        validate_optim(self)
        self.reinforce().validate()


@dataclass
class EvalConf:
    generate: bool = True
    attention_maps: bool = True
    # entropy, distance, sink and alignment of every attention layer over the test set
    attention_stats: bool = True
    # the first N test examples of each evaluation length feed the statistics (null: all)
    attention_stats_examples: Optional[int] = 16
    # the weights that are tested: last (the final ones) | best (callbacks=best_checkpoint's)
    checkpoint: str = "last"


@dataclass
class EnsembleConf:
    # N > 1: seeds seed .. seed+N-1 train in this process as one batched model, one result
    # folder each (experiments/ensemble); 1: an ordinary run
    seeds: int = 1
    # set by hydra/launcher=ensemble for the sweep jobs it groups, not by hand: the members' seeds
    # and each one's folder (the job's own folder had it run alone); null: seed .. seed+N-1, each
    # in seed=<s>/ under the run's folder
    member_seeds: Optional[list[int]] = None
    member_dirs: Optional[list[str]] = None


@dataclass
class TrialConf:
    # set by the Optuna sweeper (hydra_plugins/attnlab_sweeper) for the jobs it runs as trials, not by
    # hand: where this run reports its validation metrics for pruning (experiments/training/pruning.py)
    number: Optional[int] = None
    study: Optional[str] = None
    storage: Optional[str] = None
    # a tuned comparison's run (hparams_search=tuned): tuning (a trial), tuned (a cell's best configuration
    # on a fresh seed) or default (the shared defaults on a fresh seed); read by analysis/report/sections/tuned.py
    role: Optional[str] = None


@dataclass
class WandbUploadsConf:
    """What a run uploads to W&B besides its metrics (when logger.wandb is on)."""

    # attention maps of the final weights as images
    attention_maps: bool = True
    # the final checkpoint as an artifact beside result.json (it can be large)
    checkpoint: bool = False


@dataclass
class Config:
    task: Any = None
    attention: Any = None
    position: Any = None
    model: ModelConf = field(default_factory=ModelConf)
    optim: OptimConf = field(default_factory=OptimConf)
    # lightning.Trainer's keywords only (``hydra.utils.instantiate(cfg.trainer)`` builds it), and the
    # Lightning callbacks and loggers by name: open nodes, checked against the classes they build
    # (experiments/training/lightning_parts.py), so every keyword those classes take can be set
    trainer: Any = None
    callbacks: Any = None
    logger: Any = None
    # attnlab's own callbacks, by name (experiments.config.lightning_keys.OWN_CALLBACK_NAMES)
    own_callbacks: list[str] = field(default_factory=lambda: ["progress", "last_validation", "step_timer"])
    # attnlab's own settings beside the Trainer's: how often checkpoints/last.ckpt is written, and
    # the progress display (null: a rich bar in a terminal, plain log lines otherwise)
    checkpoint_every_n_steps: int = 200
    progress_bar: Optional[bool] = None
    wandb_uploads: WandbUploadsConf = field(default_factory=WandbUploadsConf)
    eval: EvalConf = field(default_factory=EvalConf)
    ensemble: EnsembleConf = field(default_factory=EnsembleConf)
    trial: TrialConf = field(default_factory=TrialConf)
    name: str = "default"
    seed: int = 0
    backend: str = "auto"
    # auto: skip a completed run, resume an interrupted one of the same computation, refuse another's
    # folder; never: move the folder's files to previous/<time>/ and start afresh (experiments/training/folder.py)
    resume: str = "auto"
    # resume this checkpoint (``last``: the run folder's) under the same rule; null: the folder's own, if any
    ckpt_path: Optional[str] = None
    # new training from a checkpoint's weights (fresh optimiser, step 0), recorded in result.json
    init_from: Optional[str] = None
    objective: str = "val/loss"
    num_threads: int = 0
    jobs_per_gpu: int = 1
    # modules imported before anything is built, so variants they register can be named
    plugins: list[str] = field(default_factory=list)
    # set by a test or a fault-injection run: raise inside training at this step
    fail_at_step: Optional[int] = None
    # hypotheses about this sweep's results, tested by ``python -m analysis.claims`` and the report
    # (analysis/claims/); they do not change what is computed, so they stay out of the config hash
    claims: list[Any] = field(default_factory=list)


def register_configs() -> None:
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="attnlab_schema", node=Config)
