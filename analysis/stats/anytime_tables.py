"""The markdown tables docs/adaptive_seeds.md quotes, from the simulations of analysis.stats.anytime:

python -m analysis.stats.anytime
"""

from __future__ import annotations

from analysis.stats.anytime import (
    ACCURACY,
    ACCURACY_UNIT,
    ALPHAS,
    BETTING_BUDGET,
    BOUNDED_EFFECTS,
    EFFECTS,
    FAMILIES,
    MARGINS,
    PLANNED,
    RULES,
    SUPPORT,
    bounded_savings,
    savings,
    type_one_error,
)


def type_one_table(reps: int, budget: int, seed: int) -> list[str]:
    """Type-I error by family, rule and alpha, every rule looked at after every seed."""
    lines = [
        f"Type-I error, {reps} null comparisons per row (equal means, sd 1 against 1.5), looked at after every seed "
        f"pair up to {budget}:",
        "",
        "| family | alpha | anytime CS (t-mixture) | naive Welch re-tested | betting CS (bounded families) |"
        f" betting CS, looked at up to {BETTING_BUDGET} | median CS (at the true median) |"
        f" median CS, looked at up to {BETTING_BUDGET} |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for family in FAMILIES:
        for alpha in ALPHAS:
            rules = [r for r in RULES if r != "betting" or family in SUPPORT]
            cells = {rule: type_one_error(rule, alpha, reps, budget, seed, family) for rule in rules}
            if family in SUPPORT:
                cells["betting_long"] = type_one_error("betting", alpha, reps, BETTING_BUDGET, seed, family)
            cells["median_long"] = type_one_error("median", alpha, reps, BETTING_BUDGET, seed, family)
            shown = {
                rule: f"{rate:.4f} ± {se:.4f}" + (" (above alpha)" if rule != "naive" and rate > alpha + 3 * se else "")
                for rule, (rate, se) in cells.items()
            }
            lines.append(
                f"| {family} | {alpha:g} | {shown['anytime']} | {shown['naive']} | {shown.get('betting', '—')} | "
                f"{shown.get('betting_long', '—')} | {shown['median']} | {shown['median_long']} |"
            )
    return lines


def gaussian_tables(reps: int, budget: int, seed: int) -> list[str]:
    """Seeds spent on Gaussian difference and equivalence claims, adaptive against the fixed designs."""
    lines = [
        "",
        f"Difference claims (a − b > 0), planted effects in per-cell sds (Gaussian), alpha 0.05, budget {budget} seeds "
        f"per side, {reps} comparisons; fixed test: one-sided Welch:",
        "",
        "| effect | power in budget | wrong way | mean seeds (adaptive) | fixed design, equal power |"
        f" fixed design sized in advance (80% at effect {PLANNED:g}) |",
        "|---|---|---|---|---|---|",
    ]
    for effect in EFFECTS:
        s = savings(effect, 0.05, reps, budget, seed)
        lines.append(
            f"| {effect:g} | {s.adaptive.power:.3f} | {s.adaptive.wrong:.4f} | {s.adaptive.mean_seeds:.1f} | "
            f"{s.fixed_seeds} | {s.planned_seeds} |"
        )
    lines += [
        "",
        f"Equivalence claims (|a − b| < margin), true difference 0, margins in per-cell sds (Gaussian), alpha 0.05, "
        f"budget {budget} seeds per side, {reps} comparisons; fixed test: TOST (Welch):",
        "",
        "| margin | power in budget | wrong way | mean seeds (adaptive) | fixed design, equal power |"
        " fixed design sized in advance (80% at difference 0) |",
        "|---|---|---|---|---|---|",
    ]
    for margin in MARGINS:
        s = savings(0.0, 0.05, reps, budget, seed, margin=margin)
        lines.append(
            f"| {margin:g} | {s.adaptive.power:.3f} | {s.adaptive.wrong:.4f} | {s.adaptive.mean_seeds:.1f} | "
            f"{s.fixed_seeds if s.fixed_seeds is not None else '—'} | {s.planned_seeds} |"
        )
    return lines


def accuracy_table(reps: int, budget: int, seed: int) -> list[str]:
    """Seeds spent on accuracy differences by each rule, at the sweep's budget and at the long one."""
    lines = [
        "",
        f"Difference claims (a − b > 0) on the accuracy family (Beta accuracies, cell a at {ACCURACY:g}, cell b "
        f"lower by the effect, sd {ACCURACY_UNIT:g} each; effects in units of {ACCURACY_UNIT:g}), alpha 0.05, "
        f"{reps} comparisons; the betting rule's bounds [0, 1]; fixed test: one-sided Welch:",
        "",
        "| effect | rule | budget | power in budget | wrong way | mean seeds (adaptive) | fixed design, equal power |"
        f" fixed design sized in advance (80% at effect {PLANNED:g}) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for effect in BOUNDED_EFFECTS:
        for rule, within in (
            ("anytime", budget),
            ("betting", budget),
            ("betting", BETTING_BUDGET),
            ("median", budget),
            ("median", BETTING_BUDGET),
        ):
            s = bounded_savings(rule, effect, 0.05, reps, within, seed)
            name = "t-mixture" if rule == "anytime" else rule
            lines.append(
                f"| {effect:g} | {name} | {within} | {s.adaptive.power:.3f} | {s.adaptive.wrong:.4f} | "
                f"{s.adaptive.mean_seeds:.1f} | {s.fixed_seeds if s.fixed_seeds is not None else '—'} | "
                f"{s.planned_seeds} |"
            )
    return lines


def tables(reps: int = 10_000, budget: int = 30, seed: int = 0) -> str:
    """The markdown tables docs/adaptive_seeds.md quotes: type-I error by family, rule and alpha; seeds by effect."""
    return "\n".join(
        [*type_one_table(reps, budget, seed), *gaussian_tables(reps, budget, seed), *accuracy_table(reps, budget, seed)]
    )


if __name__ == "__main__":
    print(tables())
