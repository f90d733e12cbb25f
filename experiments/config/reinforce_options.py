"""REINFORCE's options (``optim.reinforce_*``) as data, checked with the rest of the config; what they mean and
the training term that uses them are in experiments/model/reinforce.py."""

from __future__ import annotations

from dataclasses import dataclass

REWARDS = ("sequence", "position")
BASELINES = ("none", "moving_average", "learned", "leave_one_out")


@dataclass
class ReinforceSpec:
    weight: float = 1.0
    reward: str = "position"
    discount: float = 0.0
    baseline: str = "moving_average"
    baseline_decay: float = 0.9
    samples: int = 1
    entropy: float = 0.0

    def validate(self) -> None:
        from variants.checks import VariantConfigError, one_of, positive, probability  # not at import: torch

        if isinstance(self.weight, bool) or not isinstance(self.weight, (int, float)) or self.weight < 0:
            raise VariantConfigError(f"optim.reinforce_weight={self.weight!r} is not allowed; it must be >= 0")
        one_of("optim.reinforce_reward", self.reward, REWARDS)
        if (
            isinstance(self.discount, bool)
            or not isinstance(self.discount, (int, float))
            or not 0 <= self.discount <= 1
        ):
            raise VariantConfigError(
                f"optim.reinforce_discount={self.discount!r} is not allowed; "
                "it must be in [0, 1] (1: the unbiased loss from the position on)"
            )
        one_of("optim.reinforce_baseline", self.baseline, BASELINES)
        probability("optim.reinforce_baseline_decay", self.baseline_decay)
        positive("optim.reinforce_samples", self.samples, integer=True)
        if self.baseline == "leave_one_out" and self.samples < 2:
            raise VariantConfigError(
                f"optim.reinforce_baseline=leave_one_out needs optim.reinforce_samples >= 2 "
                f"(got {self.samples}): the other samples of an example are its baseline"
            )
        if isinstance(self.entropy, bool) or not isinstance(self.entropy, (int, float)) or self.entropy < 0:
            raise VariantConfigError(f"optim.reinforce_entropy={self.entropy!r} is not allowed; it must be >= 0")


__all__ = ["BASELINES", "REWARDS", "ReinforceSpec"]
