"""Each default has one home: a value a conf/ yaml writes equals the default of the code it configures.

The code is the home: the schema's dataclasses (``experiments/config/schema.py``) for ``config.yaml`` and
``model/``, the registered classes' constructors for ``attention/``, ``position/`` and ``task/``, and the
Lightning classes named by ``_target_`` for ``trainer/``, ``callbacks/`` and ``logger/``. A yaml value may
repeat a code default (so the file shows the keys a user can set), but then it must equal it; a value that
differs on purpose is listed in ``DELIBERATE`` with its reason. A new yaml value that differs from its code
default and is not declared fails here, as does a declared difference that no longer differs.

Left out: ``experiment/``, ``hparams_search/`` and ``variant_param/`` (presets whose purpose is to change
values), ``hydra/`` (Hydra's and its plugins' own), and keys whose code takes no default (a required
parameter, ``???``, attnlab's own keys beside a Lightning class): those have no second home to agree with.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

import pytest
import yaml

from experiments.config.schema import Config, ModelConf
from tests.helpers.paths import CONF
from tests.helpers.registries import REGISTRIES
from variants.registry import keyword_parameters

# "<file under conf/>:<dotted key>" -> why the yaml's value differs from the code's default
DELIBERATE: dict[str, str] = {
    "model/base.yaml:d_model": "the paper's base model; the schema's default is the small model that trains on CPU",
    "model/base.yaml:encoder_layers": "the paper's base model has 6 encoder layers; the small model 2",
    "model/base.yaml:decoder_layers": "the paper's base model has 6 decoder layers; the small model 2",
    "model/base.yaml:ffn_dim": "the paper's base model's FFN width (4 x 512); the small model's is 256",
    "trainer/cpu.yaml:accelerator": "the default preset trains on the CPU wherever it runs; trainer=gpu for CUDA",
    "trainer/cpu.yaml:devices": "one process per run; more processes are DDP (trainer=ddp)",
    "trainer/cpu.yaml:precision": "full precision named explicitly, so the recorded config says what ran",
    "trainer/cpu.yaml:max_steps": "every variant gets the same budget in optimiser steps, not epochs",
    "trainer/cpu.yaml:val_check_interval": "validation every N steps, matching the step budget",
    "trainer/cpu.yaml:check_val_every_n_epoch": "Lightning needs null for a step interval longer than an epoch",
    "trainer/cpu.yaml:deterministic": "stated, so the recorded config says it; trainer.deterministic=true to rerun bit "
    "for bit",
    "trainer/cpu.yaml:log_every_n_steps": "short runs log a curve with more than a few points",
    "trainer/cpu.yaml:gradient_clip_val": "follows optim.grad_clip: one key for clipping (config/checks.py)",
    "trainer/cpu.yaml:gradient_clip_algorithm": "the algorithm named explicitly (Lightning's null means norm too)",
    "trainer/cpu.yaml:num_sanity_val_steps": "validation only on the step schedule, none before the first step",
    "trainer/cpu.yaml:enable_model_summary": "the parameter count is in result.json's cost and the closing summary",
    "trainer/cpu.yaml:use_distributed_sampler": "the task datamodules shard their own batches per rank",
    "trainer/ddp.yaml:devices": "the smallest DDP: two processes",
    "trainer/ddp.yaml:strategy": "the preset's purpose: data-parallel training",
    "trainer/gpu.yaml:accelerator": "the preset's purpose: a CUDA device",
    "trainer/gpu.yaml:devices": "one GPU per run; several are DDP",
    "trainer/gpu.yaml:precision": "bf16 autocast on the GPU",
    "callbacks/default.yaml:last_checkpoint.filename": "step-numbered names without Lightning's 'step=' text",
    "callbacks/default.yaml:last_checkpoint.save_last": "checkpoints/last.ckpt is what a rerun resumes",
    "callbacks/default.yaml:last_checkpoint.save_top_k": "only last.ckpt: the best weights are best_checkpoint's job",
    "callbacks/default.yaml:last_checkpoint.every_n_train_steps": "follows checkpoint_every_n_steps",
    "callbacks/default.yaml:last_checkpoint.auto_insert_metric_name": "the filename names the step itself",
    "callbacks/best_checkpoint.yaml:best_checkpoint.filename": "apart from last_checkpoint's step files",
    "callbacks/best_checkpoint.yaml:best_checkpoint.monitor": "the best weights by validation loss",
    "callbacks/best_checkpoint.yaml:best_checkpoint.save_last": "last.ckpt is last_checkpoint's job",
    "callbacks/best_checkpoint.yaml:best_checkpoint.auto_insert_metric_name": "the filename names the step itself",
    "callbacks/early_stopping.yaml:early_stopping.check_on_train_epoch_end": "decided at each validation (steps), "
    "not at epoch ends",
    "callbacks/lr_monitor.yaml:lr_monitor.logging_interval": "the schedule changes the rate every step",
    "logger/csv.yaml:csv.name": "the CSV's folder in the run's folder is named for the logger",
    "logger/tensorboard.yaml:tensorboard.name": "the events' folder in the run's folder is named for the logger",
    "logger/csv.yaml:csv.version": "the CSV goes straight into the run's folder, without version_N/",
    "logger/csv.yaml:csv.flush_logs_every_n_steps": "every row on disk at once: a crash loses no logged step",
    "logger/tensorboard.yaml:tensorboard.version": "the events go straight into the run's folder, without version_N/",
}

TARGET_GROUPS = ("trainer", "callbacks", "logger")
MANDATORY = "???"  # Hydra's "no default: give it"


def dataclass_defaults(cls: type) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


def constructor_defaults(factory: Any) -> dict[str, Any]:
    """The defaults of the keywords ``factory`` takes, with the stand-ins the constructor resolves itself read
    where it reads them: ``num_heads=None`` is the attention type's ``default_heads``, a task's length lists
    are its ``default_train_lengths`` / ``default_eval_lengths``."""
    out = {}
    for name, p in keyword_parameters(factory).items():
        if p.default is inspect.Parameter.empty:
            continue
        default = p.default
        if name == "num_heads" and default is None and hasattr(factory, "default_heads"):
            default = factory.default_heads
        elif name in ("train_lengths", "eval_lengths") and hasattr(factory, f"default_{name}"):
            default = getattr(factory, f"default_{name}")
        out[name] = default
    return out


def same(written: Any, default: Any) -> bool:
    """Equal as values: a yaml list equals a code tuple; a bool never equals a number."""
    if isinstance(written, bool) or isinstance(default, bool):
        return type(written) is type(default) and written == default
    if isinstance(written, (list, tuple)) and isinstance(default, (list, tuple)):
        return len(written) == len(default) and all(same(w, d) for w, d in zip(written, default))
    return written == default


def read(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text()) or {}


def extended(group: str, node: dict[str, Any]) -> dict[str, Any]:
    """The node with the same-group presets its defaults list extends merged under it (for their ``_target_``)."""
    merged: dict[str, Any] = {}
    for entry in node.get("defaults") or []:
        if isinstance(entry, str) and entry != "_self_":
            merged = deep_merge(merged, extended(group, read(CONF / group / f"{entry}.yaml")))
    return deep_merge(merged, node)


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        out[key] = deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def pairs(written: dict[str, Any], defaults: dict[str, Any], prefix: str = "") -> list[tuple[str, Any, Any]]:
    """(dotted key, yaml value, code default) for each written key the code gives a default; a default that is a
    dataclass is compared field by field."""
    found = []
    for key, value in written.items():
        if key in ("defaults", "_target_") or key not in defaults or value == MANDATORY:
            continue
        default = defaults[key]
        if dataclasses.is_dataclass(default) and isinstance(value, dict):
            found += pairs(value, dataclass_defaults(type(default)), f"{prefix}{key}.")
        else:
            found.append((f"{prefix}{key}", value, default))
    return found


def target_pairs(written: dict[str, Any], full: dict[str, Any], prefix: str = "") -> list[tuple[str, Any, Any]]:
    """Each ``_target_`` node's written values against its class's constructor defaults."""
    from hydra.utils import get_class

    if "_target_" in full:
        return pairs(written, constructor_defaults(get_class(full["_target_"])), prefix)
    found = []
    for key, value in written.items():
        if isinstance(value, dict) and isinstance(full.get(key), dict):
            found += target_pairs(value, full[key], f"{prefix}{key}.")
    return found


def compared(relative: str) -> list[tuple[str, Any, Any]]:
    """What the yaml file ``relative`` (under conf/) writes, each value beside the code default it repeats."""
    group, stem = Path(relative).parent.name, Path(relative).stem
    node = read(CONF / relative)
    if relative == "config.yaml":
        return pairs({k: v for k, v in node.items() if k != "hydra"}, dataclass_defaults(Config))
    if group == "model":
        return pairs(node, dataclass_defaults(ModelConf))
    if group in REGISTRIES:
        return pairs({k: v for k, v in node.items() if k != "name"}, constructor_defaults(REGISTRIES[group].get(stem)))
    return target_pairs(node, extended(group, node))


FILES = ["config.yaml"] + [
    f"{group}/{path.name}"
    for group in (*REGISTRIES, "model", *TARGET_GROUPS)
    for path in sorted((CONF / group).glob("*.yaml"))
]


def differences(relative: str) -> dict[str, str]:
    return {
        f"{relative}:{key}": f"yaml {value!r}, code {default!r}"
        for key, value, default in compared(relative)
        if not same(value, default)
    }


@pytest.mark.parametrize("relative", FILES)
def test_yaml_values_equal_their_code_defaults(relative: str) -> None:
    undeclared = {key: diff for key, diff in differences(relative).items() if key not in DELIBERATE}
    assert not undeclared, (
        f"conf/{relative} differs from the code it configures: {undeclared}; make them equal, drop the key from the "
        "yaml (the code supplies it), or declare the difference in DELIBERATE with its reason"
    )


def test_every_declared_difference_still_differs() -> None:
    """A declared difference that no longer differs (or names a key no yaml writes) is a stale row."""
    found: dict[str, str] = {}
    for relative in FILES:
        found |= differences(relative)
    stale = sorted(set(DELIBERATE) - set(found))
    assert not stale, f"DELIBERATE rows that are no longer differences: {stale}"
    assert all(reason.strip() for reason in DELIBERATE.values())


def test_the_comparison_reaches_every_group() -> None:
    """Each group contributes compared values (a lookup that silently finds no defaults would pass anything)."""
    reached = {Path(relative).parent.name or "config.yaml" for relative in FILES if compared(relative)}
    assert reached == {"config.yaml", *REGISTRIES, "model", *TARGET_GROUPS}, reached
    keys = {key for key, _, _ in compared("config.yaml")}
    assert {"seed", "num_threads", "eval.checkpoint", "eval.attention_stats_examples"} <= keys, keys
    assert "window" in {key for key, _, _ in compared("attention/local.yaml")}


def test_same_compares_values_not_spellings() -> None:
    assert same([2, 12], (2, 12)) and same(1.0, 1) and same(None, None)
    assert not same(False, 0) and not same([2, 12], (2, 13)) and not same(8, 4)
