"""The model and optimiser settings every preset resolves to, as a run would build them.

``python -m tests.helpers.preset_settings`` writes tests/helpers/fixtures/preset_settings.json. The file in the
repository was written by the code before the model and optimiser defaults moved into one schema
(then through build.model_dict and module._model_spec); tests/experiments/config/test_schema.py holds today's code
to it.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from experiments.config.spec import build_spec
from tests.helpers.config import compose
from tests.helpers.paths import CONF

FIXTURE = Path(__file__).parent / "fixtures" / "preset_settings.json"
# what a datamodule hands the model: the same for every preset, so only the config varies
DATA = SimpleNamespace(vocab_size=13, pad_id=0, bos_id=1, eos_id=2, num_classes=3)


def presets() -> dict[str, list[str]]:
    """The defaults, the other model group option, and every file under conf/experiment/ (by its overrides)."""
    root = CONF / "experiment"
    names = sorted(p.relative_to(root).with_suffix("").as_posix() for p in root.rglob("*.yaml"))
    return {"(defaults)": [], "model=base": ["model=base"], **{name: [f"experiment={name}"] for name in names}}


def settings(overrides: list[str]) -> dict[str, Any]:
    """{"model": the runtime model spec, "optim": the optimiser spec, "grad_clip", "compile"}."""
    from omegaconf import OmegaConf

    from experiments.config.roles import expand_roles
    from experiments.training.build import model_spec

    cfg = expand_roles(compose(overrides))
    optim = asdict(OmegaConf.to_object(cfg.optim))
    return {
        "model": asdict(model_spec(build_spec(cfg), DATA)),
        "optim": {k: v for k, v in optim.items() if k != "grad_clip"},
        "grad_clip": optim["grad_clip"],
        "compile": bool(cfg.model.compile),
    }


def main() -> None:
    table = {name: settings(overrides) for name, overrides in presets().items()}
    FIXTURE.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"{len(table)} presets -> {FIXTURE}")


if __name__ == "__main__":
    main()
