"""Every key under conf/ either changes what a run computes or is declared inert with a reason.

For each leaf key of each yaml under ``conf/`` (and of the composed schema), another valid value is
tried on a tiny seeded run, in the context the key belongs to (``attention.window`` with
``attention=local``), and the run is compared with the unchanged one at three depths, cheapest
first: the data (every split), the model (parameter shapes, initial weights and the output of
one training forward), the recorded training (a few optimiser steps: final weights, step count,
validation steps and the logged and tested metrics). A key whose change none of these sees must be
declared in ``experiments/config/inert_keys.py``; a key declared there must not be one the run reads.
"""

from __future__ import annotations

import hashlib
import re
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest
import torch
from omegaconf import OmegaConf

from experiments.config.inert_keys import INERT
from experiments.config.spec import build_spec
from tests.helpers.config import compose
from tests.helpers.paths import CONF, ROOT

# the tiny run every probe starts from: validation at every step, so that when and what it
# validates is part of what is compared
BASE = [
    "model.d_model=16",
    "model.ffn_dim=32",
    "model.encoder_layers=1",
    "model.decoder_layers=1",
    "attention.num_heads=2",
    "trainer.max_steps=4",
    "trainer.val_check_interval=1",
    "trainer.limit_val_batches=1",
    "trainer.limit_test_batches=1",
    "progress_bar=false",
    "eval.attention_maps=false",
    "eval.attention_stats=false",
    "logger=none",
    "num_threads=1",
    "callbacks=[early_stopping,best_checkpoint]",
]
# the task's sizes, where its yaml has the key
TASK_SIZES = ["task.train_size=32", "task.val_size=8", "task.test_size=8", "task.batch_size=8"]
# what each task needs beside the tiny sizes ({text}, {src}, ...: files made for the test)
TASK_CONTEXT = {
    "parity": ["model.arch=encoder"],
    "listops": ["model.arch=encoder"],
    "charlm": [
        "model.arch=decoder",
        "task.path={text}",
        "task.context=8",
        "task.eval_contexts=[8,16]",
        "task.train_batches_per_epoch=4",
        "task.val_windows=4",
        "task.batch_size=4",
    ],
    "translation": [
        "task.train_src={src}",
        "task.train_tgt={tgt}",
        "task.val_src={src}",
        "task.val_tgt={tgt}",
        "task.vocab_size=40",
        "task.batch_size=8",
    ],
}
# keys that matter only beside another setting: the context they are probed in
EARLY_STOP_SOON = ["trainer.max_steps=8", "callbacks.early_stopping.min_delta=10"]
CONTEXT: dict[str, list[str]] = {
    "optim.min_lr_ratio": ["optim.schedule=cosine", "optim.warmup_steps=0"],
    "optim.warmup_steps": ["optim.warmup_steps=2"],
    "model.pooling": ["task=parity", "model.arch=encoder"],
    "model.decoder_layers": ["model.arch=decoder"],
    "model.compile_mode": ["model.compile=true"],
    "callbacks.early_stopping.patience": EARLY_STOP_SOON,
    "callbacks.early_stopping.min_delta": ["trainer.max_steps=8", "callbacks.early_stopping.patience=0"],
    "callbacks.early_stopping.mode": ["trainer.max_steps=8", "callbacks.early_stopping.patience=0"],
    "callbacks.early_stopping.monitor": ["trainer.max_steps=8", "callbacks.early_stopping.patience=0"],
    "attention.temperature": ["attention=hard", "attention.estimator=gumbel"],
    "eval.checkpoint": ["callbacks.best_checkpoint.mode=max"],
    "optim.schedule": ["optim.warmup_steps=1"],
    "position.factor": ["position=rope", "position.scaling=linear", "position.train_length=4"],
    "position.scaling": ["position=rope", "position.train_length=2", "position.factor=4.0"],
    "position.train_length": [
        "position=rope",
        "position.scaling=linear",
        "position.train_length=2",
        "position.factor=4.0",
    ],
    "attention.expected_mix": ["attention=hard", "attention.estimator=reinforce"],
    "task.train_batches_per_epoch": ["trainer.max_steps=10"],
    "trainer.limit_val_batches": ["task.val_size=16"],
    "callbacks.early_stopping.check_on_train_epoch_end": [*EARLY_STOP_SOON, "callbacks.early_stopping.patience=0"],
    "callbacks.best_checkpoint.monitor": ["eval.checkpoint=best"],
    "callbacks.best_checkpoint.mode": ["eval.checkpoint=best"],
    "trainer.check_val_every_n_epoch": ["trainer.val_check_interval=null", "trainer.max_steps=12"],
    "task.test_src": ["task.test_src={src}", "task.test_tgt={tgt}"],
    "task.test_tgt": ["task.test_src={src}", "task.test_tgt={tgt}"],
}
for _key in ("weight", "reward", "discount", "baseline", "baseline_decay", "samples", "entropy"):
    CONTEXT[f"optim.reinforce_{_key}"] = ["attention=hard", "attention.estimator=reinforce"]
CONTEXT["optim.reinforce_baseline_decay"] += ["optim.reinforce_baseline=moving_average"]
CONTEXT["optim.reinforce_discount"] += ["optim.reinforce_reward=position"]
# another valid value, where doubling a number, negating a bool or this table's choice does not fit
# keys whose other value is a file that a run writes first: their effect is tested there
TESTED_ELSEWHERE = {
    "init_from": "tests/experiments/training/test_run_folder.py::"
    "test_init_from_starts_new_training_from_the_weights_and_is_recorded",
}


def test_each_key_tested_elsewhere_names_a_test_that_exists() -> None:
    for key, where in TESTED_ELSEWHERE.items():
        path, name = where.split("::")
        assert f"def {name}(" in (ROOT / path).read_text(), f"{key}: {where} is not a test"


OTHER: dict[str, str] = {
    "attention.estimator": "gumbel",
    "attention.mode": "predictive",
    "attention.score": "general",
    "position.scaling": "linear",
    "task.tokenizer": "char",
    "task.train_limit": "10",
    "task.max_length": "12",
    "task.test_src": "{src2}",
    "task.test_tgt": "{tgt2}",
    "task.path": "{text2}",
    "task.test_windows": "2",  # null: val_windows (4 here); 2 moves the first test batch's starts
    "model.arch": "decoder",
    "model.norm": "pre",
    "model.pooling": "cls",
    "model.embedding": "gpt2",
    "model.compile_mode": "max-autotune",
    "optim.schedule": "cosine",
    "optim.reinforce_reward": "sequence",
    "optim.reinforce_baseline": "none",
    "optim.reinforce_samples": "2",
    "optim.betas": "[0.8,0.9]",
    "trainer.precision": "bf16-mixed",
    "trainer.gradient_clip_val": "0.001",
    "trainer.gradient_clip_algorithm": "value",
    "trainer.val_check_interval": "2",
    "trainer.max_steps": "3",
    "trainer.limit_val_batches": "2",
    "trainer.limit_test_batches": "2",
    "trainer.check_val_every_n_epoch": "2",
    "eval.checkpoint": "best",
    "callbacks.early_stopping.monitor": "val/token_acc",
    "callbacks.early_stopping.mode": "max",
    "callbacks.best_checkpoint.monitor": "val/token_acc",
    "callbacks.best_checkpoint.mode": "max",
    "attention.num_kv_heads": "1",
    "position.factor": "2.0",
    "task.train_src": "{src2}",
    "task.train_tgt": "{tgt2}",
    "task.val_src": "{src2}",
    "task.val_tgt": "{tgt2}",
}


# -- the keys ---------------------------------------------------------------------------------------


def inert_reason(key: str) -> str | None:
    """Why ``key`` does not change the computation, or None when it may."""
    if key in INERT:
        return INERT[key]
    for pattern, reason in INERT.items():
        if fnmatchcase(key, pattern):
            return reason
    return None


def _package(path: Path) -> str:
    """Where a yaml's keys land in the composed config: its ``# @package`` line, else its group's path."""
    for line in path.read_text().splitlines():
        match = re.match(r"#\s*@package\s+(\S+)", line)
        if match:
            return "" if match.group(1) == "_global_" else match.group(1)
    group = path.parent.relative_to(CONF).as_posix()
    return "" if group == "." else group.replace("/", ".")


def _leaves(node: Any, prefix: str) -> list[str]:
    if isinstance(node, dict) and node:
        return [k for key, value in node.items() if key != "defaults" for k in _leaves(value, f"{prefix}{key}.")]
    return [prefix[:-1]]


def conf_keys() -> dict[str, list[Path]]:
    """{composed key: the yaml files that set it} for every leaf key of every yaml under conf/."""
    keys: dict[str, list[Path]] = {}
    for path in sorted(CONF.rglob("*.yaml")):
        package = _package(path)
        node = OmegaConf.to_container(OmegaConf.load(path), resolve=False) or {}
        node.pop("defaults", None)
        if not node:
            continue  # a file of defaults only (model=small: the schema's values)
        for key in _leaves(node, f"{package}." if package else ""):
            keys.setdefault(key, []).append(path)
    return keys


def schema_keys() -> list[str]:
    """The leaf keys of the default composed config (the typed schema's among them, ``optim.*``)."""
    return _leaves(OmegaConf.to_container(compose(BASE), resolve=False), "")


def group_choice(key: str, files: list[Path]) -> list[str]:
    """The group option a key is probed under: ``attention=local`` for ``attention.window``
    (the default option when it has the key)."""
    for path in sorted(files, key=lambda p: p.stem not in ("multihead", "sinusoidal", "reverse")):
        group = path.parent.relative_to(CONF).as_posix()
        if group in ("attention", "position", "task") and key.startswith(group + "."):
            return [f"{group}={path.stem}"]
    return []


# -- what a run computes ----------------------------------------------------------------------------
def _digest(*parts: Any) -> str:
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, torch.Tensor):
            h.update(part.detach().float().contiguous().numpy().tobytes())
        else:
            h.update(repr(part).encode())
    return h.hexdigest()[:16]


def data_print(cfg, run_dir: Path) -> str:
    from experiments.training.build import build_datamodule

    datamodule = build_datamodule(build_spec(cfg), run_dir)
    splits = [datamodule.split(name) for name in ("train", "val", "test")]
    return _digest(datamodule.batch_size, datamodule.kind, repr(splits))


class Probe:
    """A config's model and recorded training, built once and compared lazily."""

    def __init__(self, overrides: list[str], run_dir: Path, paths: dict[str, str]) -> None:
        task = next((o.split("=", 1)[1] for o in reversed(overrides) if o.startswith("task=")), "reverse")
        has = OmegaConf.load(CONF / "task" / f"{task}.yaml")
        sizes = [o for o in TASK_SIZES if o.split("=", 1)[0].split(".", 1)[1] in has]
        self.cfg = compose([*BASE, *sizes, *[o.format(**paths) for o in TASK_CONTEXT.get(task, [])], *overrides])
        self.run_dir = run_dir
        self._data = self._model = self._fit = None

    def data(self) -> str:
        if self._data is None:
            self._data = data_print(self.cfg, self.run_dir)
        return self._data

    def model(self) -> str:
        if self._model is None:
            self._assemble()
        return self._model

    def fit(self) -> str:
        if self._fit is None:
            self._fit = self._train()
        return self._fit

    def _assemble(self) -> None:
        from experiments.config.roles import expand_roles
        from experiments.training.build import assemble

        expand_roles(self.cfg)
        self.parts = assemble(build_spec(self.cfg), self.run_dir, run_id="probe")
        module, datamodule = self.parts.module, self.parts.datamodule
        datamodule.setup("fit")
        batch = next(iter(datamodule.train_dataloader()))
        state = module.model.state_dict()
        torch.manual_seed(0)
        module.train()
        logits, _, _ = module._io(batch)
        shapes = [(k, tuple(v.shape)) for k, v in state.items()]
        self._model = _digest(shapes, *state.values(), logits)

    def _train(self) -> str:
        from lightning.pytorch import seed_everything
        from lightning.pytorch.callbacks import Callback

        from experiments.training.lightning_parts import tested_checkpoint

        if self._model is None:
            self._assemble()
        validated: list[int] = []

        class Validations(Callback):
            def on_validation_end(self, trainer, pl_module) -> None:
                validated.append(trainer.global_step)

        trainer, module, datamodule = self.parts.trainer, self.parts.module, self.parts.datamodule
        trainer.callbacks.append(Validations())
        # the other probes built since this one drew from the global streams: start dropout from the seed again
        seed_everything(self.cfg.seed, workers=True, verbose=False)
        trainer.fit(module, datamodule=datamodule)
        logged = {k: round(float(v), 5) for k, v in sorted(trainer.callback_metrics.items())}
        tested = trainer.test(
            module,
            datamodule=datamodule,
            ckpt_path=tested_checkpoint(build_spec(self.cfg).eval, trainer),
            verbose=False,
        )
        weights = list(module.model.state_dict().values())
        return _digest(trainer.global_step, validated, logged, tested, *weights)


def other_value(key: str, value: Any) -> str:
    if key in OTHER:
        return OTHER[key]
    if isinstance(value, bool):
        return str(not value).lower()
    if isinstance(value, int):
        return str(value * 2 if value > 0 else 1)
    if isinstance(value, float):
        return repr(value / 2 if value else 0.1)
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return "[" + ",".join(str(v + 1) for v in value) + "]"
    raise AssertionError(f"{key}={value!r}: no other value to try; add one to OTHER in {__file__}")


# a variant group's ``name`` is its option: the other value is another option of the group
OTHER_OPTION = {"attention": "local", "position": "rope", "task": "copy"}


def changed_overrides(key: str, cfg, context: list[str]) -> list[str]:
    group = key.split(".", 1)[0]
    if key == f"{group}.name" and group in OTHER_OPTION:
        return [o for o in context if not o.startswith(f"{group}=")] + [f"{group}={OTHER_OPTION[group]}"]
    if key in ("model.encoder_attention", "model.decoder_attention", "model.cross_attention"):
        return [*context, f"attention@{key}=local"]  # a role's own type, placed as docs/configuration.md shows
    value = OmegaConf.select(cfg, key)
    if OmegaConf.is_config(value):
        value = OmegaConf.to_container(value)
    return [*context, f"{key}={other_value(key, value)}"]


# -- the test ---------------------------------------------------------------------------------------
def data_files(folder: Path) -> dict[str, str]:
    """Small seeded text and parallel files for the file-reading tasks (two of each, to switch between)."""
    import random

    rng = random.Random(0)
    words = ["".join(rng.choice("abcdefgh") for _ in range(rng.randint(1, 6))) for _ in range(60)]
    files = {}
    for name in ("text", "src", "tgt", "text2", "src2", "tgt2"):
        lines = [" ".join(rng.choice(words) for _ in range(rng.randint(2, 9))) for _ in range(40)]
        files[name] = str(folder / f"{name}.txt")
        Path(files[name]).write_text("\n".join(lines) + "\n")
    return files


def classify(keys: dict[str, list[Path]], tmp_path: Path) -> tuple[dict[str, str], dict[str, str], list[str]]:
    """({key: the depth that saw it change}, {key: declared reason}, [keys that did neither])."""
    probes: dict[tuple[str, ...], Probe] = {}
    paths = data_files(tmp_path)

    def probe(overrides: list[str]) -> Probe:
        overrides = [o.format(**paths) for o in overrides]
        found = probes.get(tuple(overrides))
        if found is None:
            found = probes[tuple(overrides)] = Probe(overrides, tmp_path / f"run{len(probes)}", paths)
        return found

    changed, inert, neither = {}, {}, []
    for key, files in sorted(keys.items()):
        if key in TESTED_ELSEWHERE:
            changed[key] = "elsewhere"
            continue
        reason = inert_reason(key)
        if reason is not None:
            inert[key] = reason
            continue
        context = probe_context(key, files)
        base = probe(context)
        try:
            alt = probe(changed_overrides(key, base.cfg, context))
            depth = next((d for d in ("data", "model", "fit") if getattr(base, d)() != getattr(alt, d)()), None)
        except (Exception, AssertionError) as err:  # noqa: BLE001 - named with its key below
            neither.append(f"{key}: the probe failed: {type(err).__name__}: {err}".splitlines()[0])
            continue
        if depth is not None:
            changed[key] = depth
        else:
            neither.append(f"{key} (from {', '.join(str(p.relative_to(CONF)) for p in files)})")
    return changed, inert, neither


def all_keys() -> dict[str, list[Path]]:
    """{key: the yaml files that set it} for every key under conf/ and of the composed schema."""
    keys = conf_keys()
    for key in schema_keys():
        keys.setdefault(key, [])
    return keys


def probe_context(key: str, files: list[Path]) -> list[str]:
    """The overrides a key's unchanged and changed runs share: its group option, then its CONTEXT."""
    return [*group_choice(key, files), *CONTEXT.get(key, [])]


# the probes run in parts, so that the slow tier's two workers share them
PARTS = 4


def parts(keys: dict[str, list[Path]]) -> list[dict[str, list[Path]]]:
    """The keys that need a probe, in PARTS parts of about equal work; the keys probed in one context stay in
    one part, whose unchanged run they share (the largest context first, each into the lightest part)."""
    by_context: dict[tuple[str, ...], dict[str, list[Path]]] = {}
    for key, files in sorted(keys.items()):
        if key not in TESTED_ELSEWHERE and inert_reason(key) is None:
            by_context.setdefault(tuple(probe_context(key, files)), {})[key] = files
    split: list[dict[str, list[Path]]] = [{} for _ in range(PARTS)]
    work = [0] * PARTS  # runs built: one per changed key, one per shared unchanged run
    for _, group in sorted(by_context.items(), key=lambda item: (-len(item[1]), item[0])):
        lightest = work.index(min(work))
        split[lightest].update(group)
        work[lightest] += len(group) + 1
    return split


def test_the_parts_hold_every_probed_key_once() -> None:
    keys = all_keys()
    split = parts(keys)
    probed = sorted(k for k in keys if k not in TESTED_ELSEWHERE and inert_reason(k) is None)
    assert sorted(k for part in split for k in part) == probed  # each key in one part, none left out
    assert all(split), "a part without keys"
    for part in split:  # a context's keys share their part: no unchanged run is built twice
        contexts = {tuple(probe_context(k, f)) for k, f in part.items()}
        others = [k for other in split if other is not part for k in other]
        assert not [k for k in others if tuple(probe_context(k, keys[k])) in contexts]


def test_every_key_declared_inert_is_a_key_under_conf() -> None:
    keys = all_keys()
    stale = sorted(p for p in INERT if not any(fnmatchcase(k, p) for k in keys))
    assert stale == [], f"experiments/config/inert_keys.py declares keys no yaml under conf/ has: {stale}"


@pytest.mark.slow
@pytest.mark.parametrize("part", range(PARTS))
def test_every_key_under_conf_changes_the_computation_or_is_declared_inert(part: int, tmp_path: Path) -> None:
    keys = parts(all_keys())[part]
    changed, _, neither = classify(keys, tmp_path)
    print(f"part {part}: {len(keys)} keys, {len(changed)} change the computation")
    assert neither == [], (
        "keys that change nothing a tiny run computes and are not declared in experiments/config/inert_keys.py: "
        f"{neither}"
    )


@pytest.mark.parametrize("key", ["optim.lr", "task.train_size", "attention.num_heads"])
def test_the_probe_sees_a_key_that_matters(key: str, tmp_path: Path) -> None:
    """The probe is not blind: keys that obviously change the run are seen to (at the depth expected)."""
    files = [CONF / "task" / "reverse.yaml"] if key.startswith("task") else []
    changed, _, neither = classify({key: files}, tmp_path)
    assert key in changed, (changed, neither)
