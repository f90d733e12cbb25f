"""A command line composed by Hydra in this process, its failures turned into one line, and the sweep lists a
preset declares under ``hydra.sweeper.params``."""

from __future__ import annotations

from attnlab.roles import ROLES
from experiments.app.preflight.argv import values_of
from experiments.app.preflight.errors import PreflightError, one_line
from experiments.app.preflight.names import CONF


def compose_overrides(overrides: list[str]):
    """The full configuration of ``overrides``, Hydra's node included; a failure is one PreflightError line."""
    from hydra import compose, initialize_config_dir

    try:
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            return compose(config_name="config", overrides=overrides, return_hydra_config=True)
    except Exception as err:  # noqa: BLE001 - every composition error becomes one line
        raise (
            _role_parameter_error(overrides) or _trainer_key_error(overrides, err) or PreflightError(one_line(err))
        ) from None


def _role_parameter_error(overrides: list[str]) -> PreflightError | None:
    """A role parameter Hydra refused: ``model.cross_attention.window=4`` where the role has no
    attention type of its own, or where its type has no such parameter."""
    from experiments.config.roles import attention_defaults

    for line in overrides:
        key, _, value = line.partition("=")
        for role in ROLES:
            node = f"model.{role}"
            if not key.startswith(node + "."):
                continue
            param = key[len(node) + 1 :]
            chosen = [o.split("=", 1)[1] for o in overrides if o.startswith(f"attention@{node}=")]
            if not chosen:
                return PreflightError(
                    f"{key}={value}: {node} has no attention type of its own to take {param!r}; choose one "
                    f"with the attention group at the role, e.g. attention@{node}=local {key}={value}"
                )
            name = chosen[-1]
            if param not in attention_defaults(name):
                from variants import ATTENTION

                accepted = sorted(set(ATTENTION.accepted_params(name)) - {"d_model", "backend"})
                if param in accepted:
                    return PreflightError(
                        f"{key}={value}: {param!r} is not in conf/attention/{name}.yaml; add it with +{key}={value}"
                    )
                return PreflightError(
                    f"{key}={value}: attention {name!r} at {node} has no parameter {param!r}; accepted: {accepted}"
                )
    return None


def _trainer_key_error(overrides: list[str], err: Exception) -> PreflightError | None:
    """A Trainer keyword the trainer config does not list, set without ``+`` (and named by Hydra's
    error: another failure of the same composition is reported as itself)."""
    for line in overrides:
        key, _, value = line.partition("=")
        if key.startswith("trainer.") and key.count(".") == 1 and f"'{key}'" in str(err):
            from experiments.config.lightning_keys import trainer_keywords

            name = key.split(".", 1)[1]
            if name in trainer_keywords():
                return PreflightError(
                    f"{key}={value}: the trainer config does not list {name!r}; add it with +{key}={value}"
                )
    return None


def sweeper_params(cfg) -> list[tuple[str, list[str]]]:
    """Sweep lists an experiment preset declares under hydra.sweeper.params."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    params = cfg.hydra.sweeper.get("params") or {}
    parser = OverridesParser.create()
    out = []
    for key, spec in params.items():
        spec = str(spec)
        if spec.lstrip().startswith(("choice(", "interval(", "range(", "tag(")):
            continue  # for Optuna
        try:
            (override,) = parser.parse_overrides([f"{key}={spec}"])
        except Exception as err:  # noqa: BLE001
            raise PreflightError(f"hydra.sweeper.params.{key}: {one_line(err)}") from None
        out.append((override.key_or_group, values_of(override)))
    return out
