"""attnlab's config through Hydra's own doors: the compose API by module name, and a command line's
``hydra.searchpath`` adding a user's config folder, as Hydra documents them.

Each runs in a fresh process (Hydra's ConfigStore and GlobalHydra are per process) from a folder of its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.cli import installed_python

COMPOSE = """
from hydra import compose, initialize_config_module

with initialize_config_module("conf", version_base="1.3"):
    cfg = compose("config", overrides=["attention=local", "attention.window=5"])
print(cfg.attention.name, cfg.attention.window, cfg.optim.lr > 0)
"""


def test_the_compose_api_composes_the_config_by_module_name(tmp_path: Path) -> None:
    done = installed_python(tmp_path, "-c", COMPOSE, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["local", "5", "True"]


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["file://", ""], ids=["file-url", "bare-path"])
def test_an_option_from_a_command_line_searchpath_is_the_one_used(tmp_path: Path, scheme: str) -> None:
    mine = tmp_path / "my_configs" / "attention" / "narrow_local.yaml"
    mine.parent.mkdir(parents=True)
    # a window no option of attnlab's conf/ has, so the composed value can only come from this file
    mine.write_text("name: local\nnum_heads: 1\nscore: scaled_dot\nmode: monotonic\nwindow: 3\nratio: 1.0\n")
    searchpath = f"hydra.searchpath=[{scheme}{mine.parent.parent}]"
    done = installed_python(
        tmp_path, "-m", "experiments.train", "--cfg", "job", searchpath, "attention=narrow_local", timeout=180
    )
    assert done.returncode == 0, done.stderr[-2000:]
    attention = done.stdout.split("attention:\n", 1)[1].split("\n\n")[0]
    assert "name: local" in attention and "window: 3" in attention, done.stdout
    # a name in neither folder is still refused in one line, the added folder's options among the choices
    typo = installed_python(
        tmp_path, "-m", "experiments.train", "--cfg", "job", searchpath, "attention=narrow_locl", timeout=180
    )
    assert typo.returncode == 2 and "did you mean 'narrow_local'?" in typo.stderr, typo.stderr[-2000:]
