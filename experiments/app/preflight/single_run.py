"""A single run's own checks: its values as its spec checks them, its variants built once, and its folder."""

from __future__ import annotations

import os
from pathlib import Path

from experiments.app.preflight.errors import AlreadyCompleted, PreflightError


def check_single_run(full, cfg) -> None:
    """A single run's values (the checks the run builds its spec with), its variants, its folder, then its task:
    last, because naming the task imports Lightning, which no other check needs."""
    from experiments.config.checks import check_task
    from experiments.config.spec import build_spec

    spec = build_spec(cfg, check_task=False).checked()
    build_variants(cfg)
    check_run_folder(full, spec)
    check_task(cfg)


def check_run_folder(full, spec) -> None:
    """A single run's folder that holds another computation, or that a live process writes, is refused
    before Hydra writes this run's ``.hydra/`` into it (experiments/training/folder.py)."""
    from experiments.record.result import read_result
    from experiments.training.folder import check_before_start

    run, cfg_hash = spec.run, spec.run.config_hash
    run_dir = Path(str(full.hydra.run.dir))
    done = read_result(run_dir / "result.json") if run_dir.is_dir() and not os.access(run_dir, os.W_OK) else None
    if done and run.resume == "auto" and done.get("status") == "completed" and done.get("config_hash") == cfg_hash:
        raise AlreadyCompleted(run_dir / "result.json", done)
    if spec.sweep.ensemble_seeds != 1:  # its members' folders, its shared checkpoint and lock, and its memory
        from experiments.ensemble.folder import check_before_start as check_ensemble_folder

        check_ensemble_folder(Path(str(full.hydra.run.dir)), spec)
    check_before_start(Path(str(full.hydra.run.dir)), run.flat_config(), resume=run.resume, ckpt_path=run.ckpt_path)


def build_variants(cfg) -> None:
    """Construct the attention and position modules once: their parameter checks run here."""
    from experiments.config.variant_node import variant_node
    from variants import ATTENTION, POSITION
    from variants.pairs import check_pair

    attention, position = variant_node(cfg.attention), variant_node(cfg.position)
    attention_name, position_name = attention.pop("name"), position.pop("name")
    d_model = cfg.model.d_model
    layer = ATTENTION.build(attention_name, d_model=d_model, backend=cfg.backend, **attention)
    encoding = POSITION.build(position_name, d_model=d_model, num_heads=layer.num_heads, **position)
    check_pair(attention_name, layer, position_name, encoding)
    # A self-attention role of a stack the architecture builds takes the same encoding
    # (cross attention gets no position hooks): its pair is checked too, named by the role.
    from attnlab.roles import SELF_ROLES, built
    from experiments.config.roles import role_variants

    for role, node in role_variants(cfg).items():
        if node is None or role not in SELF_ROLES or not built(role, cfg.model.arch):
            continue
        params = {k: v for k, v in node.items() if k != "name"}
        role_layer = ATTENTION.build(node["name"], d_model=d_model, backend=cfg.backend, **params)
        try:
            check_pair(node["name"], role_layer, position_name, encoding)
        except ValueError as err:
            raise PreflightError(f"model.{role}: {err}") from None
