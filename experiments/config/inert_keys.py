"""Config keys that do not change what a run computes, each with the reason.

A key changes the computation when another valid value gives other data, another model (its
parameter shapes or outputs) or another recorded training (its weights, steps or metrics). Every
other key is declared here, by its dotted name or an ``fnmatch`` pattern, with why it is inert:
where files go, what is logged or shown, how runs are launched or placed, what is checked.
``tests/experiments/config/test_every_key.py`` holds every key under ``conf/`` to one of the two, so a new key that
neither changes the computation nor is declared here fails there. The run's identity (the config
hash that decides resuming and skipping) may leave out the same keys.
"""

from __future__ import annotations

# key or pattern -> why it does not change what is computed
INERT: dict[str, str] = {
    # where and how runs start and what they are called
    "name": "names the output folder and the W&B group",
    "hydra.*": "Hydra's folders, help, launcher and sweep list: where and how runs start, not what one computes "
    "(each value a sweep sets is another key, tested by itself)",
    "resume": "whether a finished run in the same folder is skipped and an interrupted one continued",
    "plugins": "modules imported so that their variants can be named; the variant is chosen by name",
    "num_threads": "intra-op threads: the same arithmetic on more cores",
    "jobs_per_gpu": "how many cells share one GPU",
    "trainer._target_": "the Trainer class itself",
    "trainer.accelerator": "the device; the same computation on any (kernels tested equal to the reference)",
    "trainer.devices": "how many devices share the batch (DDP); the data is sharded so the steps are the same",
    "trainer.num_nodes": "how many machines share the batch (DDP)",
    "trainer.strategy": "how processes share the batch (DDP)",
    "trainer.use_distributed_sampler": "the datamodule shards by rank itself; Lightning's sampler stays off",
    "task.cache_name": "the folder the tokenizer is cached in",
    "task.cache_dir": "the fallback folder of the tokenizer cache",
    "attention.chunk_size": "the chunk length of the running-sum kernel: the same sums in other slices",
    "model.compile_mode": "how torch.compile optimises the same graph (refused without model.compile)",
    "backend": "the attention kernel; every kernel is tested equal to the math reference",
    "ensemble.seeds": "how many seeds train in one process; each member computes what its own run computes "
    "(tests/experiments/ensemble/test_ensemble.py)",
    # what is logged, shown or written beside the result
    "logger": "which loggers record the run",
    "logger.*": "where and how metrics are logged",
    "wandb_uploads.*": "what is uploaded to W&B beside the metrics",
    "progress_bar": "a progress bar or log lines",
    "trainer.enable_model_summary": "the model summary printed at the start",
    "trainer.log_every_n_steps": "how often train/loss is logged",
    "checkpoint_every_n_steps": "how often checkpoints/last.ckpt is written (for resuming)",
    "callbacks.*._target_": "the class a callback node builds; its keys are each tested",
    "callbacks.last_checkpoint.*": "the checkpoint file for resuming: its folder, name and frequency",
    "callbacks.best_checkpoint.dirpath": "the folder of the best weights' file",
    "callbacks.best_checkpoint.filename": "the name of the best weights' file",
    "callbacks.best_checkpoint.save_last": "whether a copy named last.ckpt is written",
    "callbacks.best_checkpoint.auto_insert_metric_name": "the file name's form",
    "callbacks.best_checkpoint.save_top_k": "how many of the best files are kept; the best one is the same",
    "trainer.gradient_clip_val": "follows optim.grad_clip (any other value is refused); optim.grad_clip is tested",
    "ensemble.member_seeds": "set by hydra/launcher=ensemble: which seeds train together; each as its own run",
    "ensemble.member_dirs": "set by hydra/launcher=ensemble: each member's folder",
    "callbacks.lr_monitor.*": "logs the learning rate",
    "own_callbacks": "progress lines, the step timer and the last validation's record",
    "eval.attention_maps": "saves attention maps beside the result",
    "eval.attention_stats": "records attention statistics beside the metrics",
    "eval.attention_stats_examples": "how many test examples the attention statistics read",
    "claims": "hypotheses tested by the analysis once the results exist",
    "objective": "the metric a sweeper reads from the result",
    # checks that stop a bad run and otherwise change nothing
    "trainer.detect_anomaly": "raises on a NaN in backward; otherwise the same steps",
    "trainer.deterministic": "chooses deterministic kernels; the same arithmetic on CPU",
    "trainer.num_sanity_val_steps": "validation batches run before training as a check; nothing recorded",
    "fail_at_step": "fault injection for tests: raises at a step",
    # where a run resumes or reports, never what it computes
    "ckpt_path": "which checkpoint of this same computation resumes; refused unless its computation hash matches",
    "trial.number": "the Optuna trial the run reports validation metrics to (a pruned run is recorded as pruned)",
    "trial.study": "the Optuna study the run reports to",
    "trial.storage": "where the Optuna study is stored",
    "trial.role": "a tuned comparison's label for the run (tuning, tuned, default), read by the report",
}


__all__ = ["INERT"]
