"""The LightningModule gets its evaluation and runtime options when it is built (``EvalOptions`` and two
keywords), from the config through ``build.assemble``; a checkpoint keeps none of them, and names no class."""

from __future__ import annotations

import zipfile
from pathlib import Path

import torch

from experiments.config.spec import build_spec
from experiments.training.build import assemble
from experiments.training.module import TransformerModule
from experiments.training.testing import EvalOptions
from tests.helpers.config import TINY, compose

LENGTHS = (3, 5)
CAP = 3  # eval.attention_stats_examples: fewer than the test examples of each length
LOG_EVERY, CHECKPOINT_EVERY = 6, 4  # the divergence flag is read every gcd = 2 steps
OPTIONS = [
    *TINY,
    f"task.eval_lengths=[{LENGTHS[0]},{LENGTHS[1]}]",
    "eval.attention_stats=true",
    f"eval.attention_stats_examples={CAP}",
    f"trainer.log_every_n_steps={LOG_EVERY}",
    f"checkpoint_every_n_steps={CHECKPOINT_EVERY}",
]


def test_an_assembled_module_measures_what_the_config_asks(tmp_path: Path) -> None:
    parts = assemble(build_spec(compose(OPTIONS)), tmp_path, run_id="options")
    module, datamodule = parts.module, parts.datamodule
    assert module.evaluation.decode_text == datamodule.decode and module.evaluation.alignment == datamodule.alignment
    assert module.divergence_every == 2 and module.cudagraph_steps is False
    parts.trainer.test(module, datamodule=datamodule, verbose=False)
    summary, _ = module.attention_statistics()
    for n in LENGTHS:
        # reverse: a decoder query per target symbol and EOS, over the first CAP examples of each length
        assert summary["cross/0"][str(n)]["queries"] == CAP * (n + 1)
        assert 0.0 <= summary["cross/0"][str(n)]["align_acc"] <= 1.0  # the task's alignment reached the statistics


def test_a_checkpoint_keeps_no_option_and_loads_without_them(tmp_path: Path) -> None:
    parts = assemble(build_spec(compose(OPTIONS)), tmp_path, run_id="options")
    parts.trainer.fit(parts.module, datamodule=parts.datamodule)
    path = tmp_path / "saved.ckpt"
    parts.trainer.save_checkpoint(path)
    saved = torch.load(path, map_location="cpu", weights_only=True)
    # the module's hyper-parameters as they were before the options came in through the constructor
    assert set(saved["hyper_parameters"]) == {
        "task_kind",
        "max_steps",
        "eval_lengths",
        "sep_id",
        "generate",
        "bleu",
        "model",
        "optim",
    }
    with zipfile.ZipFile(path) as archive:
        pickled = b"".join(archive.read(name) for name in archive.namelist() if name.endswith(".pkl"))
    assert b"experiments." not in pickled and b"TransformerModule" not in pickled  # a rename leaves it loadable
    loaded = TransformerModule.load_from_checkpoint(path, map_location="cpu")
    assert loaded.evaluation == EvalOptions() and loaded.divergence_every == 1 and loaded.cudagraph_steps is False
    for name, tensor in parts.module.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name
