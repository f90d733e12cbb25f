"""Every ``_target_`` node of the trainer, callbacks and logger groups instantiates as it is, with
``hydra.utils.instantiate`` alone: attnlab's own keys live beside the nodes (``checkpoint_every_n_steps``,
``progress_bar``, ``wandb_uploads``), never inside them. The reference for the keywords a node may hold
is the class it names (and ``wandb.init`` for W&B), never attnlab's code."""

from __future__ import annotations

import importlib.util
import inspect
import subprocess
import sys
from pathlib import Path

import pytest
from hydra.utils import instantiate

from experiments.training.lightning_parts import MOVED
from tests.helpers.config import compose
from tests.helpers.paths import CONF, ROOT


def _options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


@pytest.mark.parametrize("option", _options("trainer"))
def test_trainer_node_instantiates_as_it_is(option: str, tmp_path: Path) -> None:
    import lightning
    import torch

    cfg = compose([f"trainer={option}"])
    # the run's own runtime keywords (no logger, callbacks or files here); a GPU node is built on the
    # CPU so this test runs anywhere: every key of the node still reaches lightning.Trainer
    runtime = {"logger": False, "enable_checkpointing": False, "enable_progress_bar": False}
    if cfg.trainer.accelerator != "cpu" and not torch.cuda.is_available():
        runtime.update(accelerator="cpu", devices=1, strategy="auto", precision="32-true")
    trainer = instantiate(cfg.trainer, default_root_dir=str(tmp_path), _convert_="all", **runtime)
    assert isinstance(trainer, lightning.Trainer)
    assert trainer.max_steps == cfg.trainer.max_steps
    assert trainer.val_check_interval == cfg.trainer.val_check_interval


@pytest.mark.parametrize("option", [o for o in _options("callbacks") if o != "none"])
def test_callback_nodes_instantiate_as_they_are(option: str) -> None:
    from lightning.pytorch import Callback

    cfg = compose([f"callbacks={option}"])
    assert cfg.callbacks, option
    for name, node in cfg.callbacks.items():
        assert isinstance(instantiate(node), Callback), name


def _wandb_keywords() -> set[str]:
    import wandb
    from lightning.pytorch.loggers import WandbLogger

    return set(inspect.signature(WandbLogger.__init__).parameters) | set(inspect.signature(wandb.init).parameters)


@pytest.mark.parametrize("option", [o for o in _options("logger") if o != "none"])
def test_logger_nodes_instantiate_as_they_are(option: str, tmp_path: Path) -> None:
    from lightning.pytorch.loggers import Logger

    cfg = compose([f"logger={option}"])
    assert cfg.logger, option
    for name, node in cfg.logger.items():
        if node._target_.endswith("TensorBoardLogger") and not any(
            importlib.util.find_spec(m) for m in ("tensorboard", "tensorboardX")
        ):
            continue  # the tensorboard extra is not installed: the run refuses it in one line
        if node._target_.endswith("WandbLogger"):
            # WandbLogger hands unknown keys to wandb.init at the first log, not at construction:
            # every key must be a keyword of one of the two
            unknown = set(node) - {"_target_"} - _wandb_keywords()
            assert not unknown, f"logger.{name}: not keywords of WandbLogger or wandb.init: {sorted(unknown)}"
            assert node.mode is None  # WANDB_MODE, else offline: experiments/config/wandb_settings.py
        logger = instantiate(node, save_dir=str(tmp_path))
        assert isinstance(logger, Logger), name


@pytest.mark.parametrize(
    ("override", "new"),
    [
        ("trainer.checkpoint_every_n_steps=100", "checkpoint_every_n_steps"),
        ("+trainer.progress_bar=true", "progress_bar"),
        ("logger.wandb.log_attention_maps=false", "wandb_uploads.attention_maps"),
        ("logger.wandb.log_checkpoint=true", "wandb_uploads.checkpoint"),
    ],
)
def test_old_spellings_are_refused_in_one_line(override: str, new: str) -> None:
    from experiments.app.preflight import PreflightError, preflight

    old = override.lstrip("+~").split("=", 1)[0]
    with pytest.raises(PreflightError) as err:
        preflight(["logger=none", override])
    assert str(err.value) == f"{old} is now {new} (attnlab's own key, beside the " + (
        "Trainer's)" if old.startswith("trainer.") else "logger's)"
    )


def test_old_spelling_exits_2_before_any_work(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "experiments.train", "trainer.checkpoint_every_n_steps=1", f"hydra.run.dir={tmp_path}"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert out.returncode == 2
    lines = [line for line in out.stderr.splitlines() + out.stdout.splitlines() if line.strip()]
    assert lines == [
        "attnlab: trainer.checkpoint_every_n_steps is now checkpoint_every_n_steps "
        "(attnlab's own key, beside the Trainer's)"
    ]
    assert not any(tmp_path.iterdir())  # refused before the run's folder was written


# every moved key, swept on the command line, directly or as a sweeper param (Hydra cannot compose the latter
# when the config has no sweeper params: the moved-key line must come before it tries)
SWEPT = ("{key}=true,false", "hydra.sweeper.params.{key}=true,false", "+hydra.sweeper.params.{key}=true,false")


@pytest.mark.parametrize("spelling", SWEPT)
@pytest.mark.parametrize("key", sorted(MOVED))
def test_a_swept_old_spelling_is_refused_with_the_moved_key_line(key: str, spelling: str) -> None:
    from experiments.app.preflight import PreflightError, preflight

    with pytest.raises(PreflightError) as err:
        preflight(["-m", "logger=none", spelling.format(key=key)])
    assert str(err.value) == MOVED[key]
    assert str(err.value).startswith(key + " "), "the line names the key as the user wrote it"
