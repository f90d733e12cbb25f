"""The run spec (experiments/config/spec.py): read once from the composed config, frozen, checked in one pass."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from experiments.config import spec as spec_module
from experiments.config.errors import ConfigError
from experiments.config.spec import build_spec, freeze, thaw
from tests.helpers.config import compose


def test_a_bad_value_is_refused_in_one_line_naming_the_key_and_the_allowed_values() -> None:
    built = build_spec(compose(["model.arch=decodr"]))
    with pytest.raises(ConfigError) as refused:
        built.checked()
    message = str(refused.value)
    assert "\n" not in message
    # the three architectures docs/configuration.md lists, and the nearest one to the typo
    assert "model.arch=decodr" in message and "['seq2seq', 'decoder', 'encoder']" in message
    assert "did you mean 'decoder'?" in message


def test_a_valid_config_builds_a_checked_spec_of_its_values() -> None:
    cfg = compose(["task=copy", "attention=local", "attention.window=3", "seed=7", "optim.lr=0.002"])
    built = build_spec(cfg).checked()
    assert built.problem is None
    assert (built.run.seed, built.task.name, built.optim["lr"]) == (7, "copy", 0.002)
    assert built.model.attention["window"] == 3 and built.model.attention["name"] == "local"
    assert built.names() == {"task": "copy", "attention": "local", "position": "sinusoidal"}


def test_the_spec_is_frozen_to_its_leaves() -> None:
    built = build_spec(compose(["trainer.max_steps=5"]))
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.run.seed = 1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.trainer = built.trainer  # type: ignore[misc]
    with pytest.raises(TypeError):
        built.trainer.node["max_steps"] = 6  # type: ignore[index]
    with pytest.raises(TypeError):
        built.model.options["d_model"] = 8  # type: ignore[index]
    with pytest.raises(AttributeError):
        built.task.params["train_lengths"].append(99)  # a list in the config is a tuple in the spec
    # what a consumer takes away is its own copy: changing it leaves the spec as it was
    mine = built.run.flat_config()
    mine["seed"] = 123
    assert built.run.flat["seed"] == 0


def test_freeze_and_thaw_round_trip_plain_config_data() -> None:
    plain = {"a": [1, {"b": [2, 3]}], "c": {"d": None, "e": "x"}}
    frozen = freeze(plain)
    assert thaw(frozen) == plain
    assert isinstance(frozen["a"], tuple) and not isinstance(frozen["c"], dict)


def test_the_spec_holds_the_resolved_flat_config_and_its_hash() -> None:
    cfg = compose(["task=copy", "optim.lr=0.002", "name=elsewhere", "num_threads=1"])
    built = build_spec(cfg)
    # reference: the config as OmegaConf resolves it, flattened by hand, and the hash by its definition
    # (sha256 of the sorted JSON of every key but those that do not change the computation)
    plain = OmegaConf.to_container(cfg, resolve=True)
    flat: dict = {}

    def walk(prefix: str, node: object) -> None:
        if isinstance(node, dict) and node:
            for key, value in node.items():
                walk(f"{prefix}.{key}" if prefix else str(key), value)
        else:
            flat[prefix] = node

    walk("", plain)
    assert built.run.flat_config() == flat
    noise = ("logger.", "wandb_uploads.", "progress_bar", "trainer.log_every_n_steps", "resume", "ckpt_path")
    noise += ("name", "fail_at_step", "num_threads", "jobs_per_gpu", "claims", "ensemble.", "trial.")
    kept = {k: v for k, v in flat.items() if not k.startswith(noise)}
    expected = hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:16]
    assert built.run.config_hash == expected
    assert build_spec(compose(["task=copy", "optim.lr=0.002"])).run.config_hash == expected  # name, threads: noise


def test_a_run_builds_its_spec_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import attnlab
    from experiments.app import preflight

    calls: list[bool] = []
    original = spec_module.build_spec

    def counted(cfg, **kwargs):
        calls.append(kwargs.get("check_task", True))
        return original(cfg, **kwargs)

    monkeypatch.setattr(spec_module, "build_spec", counted)
    monkeypatch.setattr(preflight, "preflight", lambda argv: None)  # the command line's own pass, apart
    overrides = ["task=copy", "trainer.max_steps=2", "trainer.val_check_interval=2", "logger=none"]
    result = attnlab.run([*overrides, "model.d_model=16", "model.ffn_dim=32"], run_dir=tmp_path)
    assert result["status"] == "completed", result["error"]
    assert calls == [True]
