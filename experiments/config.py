"""Structured config: the typed schema Hydra validates every composed config against.

Variant and task groups stay open dictionaries (each entry has its own
parameters, checked by its registry); everything else is typed, so
``optim.lr=abc`` or ``trainer.max_stepz=5`` fails at composition.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from hydra.core.config_store import ConfigStore


@dataclass
class ModelConf:
    arch: str = "seq2seq"
    d_model: int = 64
    encoder_layers: int = 2
    decoder_layers: int = 2
    ffn_dim: int = 256
    dropout: float = 0.1
    attention_dropout: float = 0.0
    norm: str = "post"
    tie_embeddings: bool = True
    pooling: str = "mean"
    embedding: str = "scaled"  # scaled (std d^-1/2, x sqrt(d) at the input) | gpt2 (std 0.02, no scale)
    # per-role attention: null = the ``attention`` group; a registry name or {name: .., <params>}
    encoder_attention: Any = None
    decoder_attention: Any = None
    cross_attention: Any = None
    compile: bool = False


@dataclass
class OptimConf:
    lr: float = 1e-3
    weight_decay: float = 0.01
    betas: list[float] = field(default_factory=lambda: [0.9, 0.98])
    warmup_steps: int = 100
    schedule: str = "inverse_sqrt"
    min_lr_ratio: float = 0.1
    label_smoothing: float = 0.0
    grad_clip: float = 1.0
    reinforce_weight: float = 1.0
    reinforce_baseline_decay: float = 0.9
    reinforce_reward: str = "position"
    reinforce_discount: float = 0.0
    reinforce_baseline: str = "moving_average"
    reinforce_samples: int = 1
    reinforce_entropy: float = 0.0


@dataclass
class TrainerConf:
    accelerator: str = "cpu"
    devices: Any = 1
    num_nodes: int = 1
    strategy: str = "auto"
    precision: str = "32-true"
    max_steps: int = 1000
    val_check_interval: int = 200
    limit_val_batches: Optional[float] = None
    limit_test_batches: Optional[float] = None
    checkpoint_every_n_steps: int = 200
    deterministic: bool = False
    fast_dev_run: bool = False
    log_every_n_steps: int = 20
    accumulate_grad_batches: int = 1
    progress_bar: Optional[bool] = None  # null: a rich bar in a terminal, log lines otherwise
    num_sanity_val_steps: int = 0


@dataclass
class WandbConf:
    enabled: bool = True
    mode: str = "offline"
    project: str = "attnlab"
    entity: Optional[str] = None
    tags: list[str] = field(default_factory=list)


@dataclass
class LoggerConf:
    wandb: WandbConf = field(default_factory=WandbConf)
    log_attention_maps: bool = True


@dataclass
class EvalConf:
    generate: bool = True
    attention_maps: bool = True
    # entropy, distance, sink and alignment of every attention layer over the test set
    attention_stats: bool = True
    # the first N test examples of each evaluation length feed the statistics (null: all)
    attention_stats_examples: Optional[int] = 16


@dataclass
class EnsembleConf:
    # N > 1: seeds seed .. seed+N-1 train in this process as one batched model, one result
    # folder each (experiments/ensemble); 1: an ordinary run
    seeds: int = 1


@dataclass
class Config:
    task: Any = None
    attention: Any = None
    position: Any = None
    model: ModelConf = field(default_factory=ModelConf)
    optim: OptimConf = field(default_factory=OptimConf)
    trainer: TrainerConf = field(default_factory=TrainerConf)
    logger: LoggerConf = field(default_factory=LoggerConf)
    eval: EvalConf = field(default_factory=EvalConf)
    ensemble: EnsembleConf = field(default_factory=EnsembleConf)
    name: str = "default"
    seed: int = 0
    backend: str = "auto"
    resume: bool = True
    objective: str = "val/loss"
    num_threads: int = 0
    # modules imported before anything is built, so variants they register can be named
    plugins: list[str] = field(default_factory=list)
    # set by a test or a fault-injection run: raise inside training at this step
    fail_at_step: Optional[int] = None
    # hypotheses about this sweep's results, tested by ``python -m analysis.claims`` and the report
    # (analysis/claims.py); they do not change what is computed, so they stay out of the config hash
    claims: list[Any] = field(default_factory=list)


def register_configs() -> None:
    ConfigStore.instance().store(name="attnlab_schema", node=Config)
