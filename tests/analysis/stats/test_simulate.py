"""``python -m analysis.stats.simulate`` in small: every rule's false-verdict rate at its null stays within alpha plus
three Monte-Carlo standard errors on every family it runs on, at every budget, one-sided divergence included; the
simulation can fail a rule (the fixed-n Welch test re-run after every seed does), and the rules decide real effects."""

from __future__ import annotations

import pytest

from analysis.stats import anytime, simulate

ACC = "test/token_acc"  # the bounded families' metric: an accuracy in [0, 1]

REPS, BUDGETS, ALPHA = 300, (10, 30), 0.05


@pytest.fixture(scope="module")
def found():
    return simulate.simulate(REPS, BUDGETS, ALPHA)


def _rows(found, rule):
    return found[found["rule"] == rule].to_dict("records")


@pytest.mark.slow
@pytest.mark.parametrize("rule", simulate.RULES)
def test_every_rule_keeps_alpha_on_every_family_it_runs_on(found, rule):
    # no exemption: a cell that diverges one seed in ten and showed none in 10 seeds (35% of draws) no longer lets the
    # mean-based rules (welch, t_mixture) decide on its converged seeds alone (analysis.stats.unseen_divergence)
    rows = _rows(found, rule)
    covered = simulate.BOUNDED if rule == "betting" else set(simulate.FAMILIES)
    assert {r["family"] for r in rows} == covered
    above = [r for r in rows if r["type_one"] > ALPHA + 3 * r["type_one_se"]]
    assert not above, above


@pytest.mark.slow
def test_the_check_can_fail_a_rule_welch_re_tested_after_every_seed_does():
    pairs = simulate.draw("gaussian", REPS, 30, False, seed=7)
    rate = float((anytime.run_rule("naive", pairs.a, pairs.b, ALPHA).decision != 0).mean())
    assert rate > ALPHA + 3 * simulate.standard_error(rate, REPS, ALPHA)


@pytest.mark.slow
def test_the_rules_decide_a_one_sd_effect_within_30_seeds(found):
    power = {(r["rule"], r["family"], r["budget"]): r["power"] for r in found.to_dict("records")}
    assert power[("t_mixture", "gaussian", 30)] > 0.3 and power[("median", "gaussian", 30)] > 0.2
    assert power[("median", "accuracy, asymmetric divergence", 30)] > 0.8  # a 5-point gap, one cell diverging


@pytest.mark.slow
@pytest.mark.parametrize("rule", simulate.ASSUMED)
def test_the_assumed_rules_keep_alpha_where_no_seed_diverges_and_break_where_seeds_do(found, rule):
    rows = found[found["rule"] == rule].to_dict("records")
    held = [r for r in rows if r["family"] not in simulate.DIVERGING]
    assert held and not [r for r in held if r["type_one"] > ALPHA + 3 * r["type_one_se"]], held
    # the asymmetric family at 10 seeds: a cell diverging 1 in 10 shows none 35% of the time, and the assumption
    # then lets the converged seeds decide against a cell whose scored mean is equal
    broken = [r for r in rows if r["family"] == "accuracy, asymmetric divergence" and r["budget"] == 10]
    assert broken[0]["type_one"] > ALPHA + 3 * broken[0]["type_one_se"], broken


@pytest.mark.slow
def test_the_assumption_gives_back_the_power_the_bound_takes_on_ties(found):
    power = {(r["rule"], r["family"], r["budget"]): r["power"] for r in found.to_dict("records")}
    family = "accuracy k/32, ties"
    assert power[("welch", family, 30)] < 0.2 < 0.8 < power[("welch, assumed", family, 30)]


def test_the_command_prints_a_row_per_family_budget_and_rule(capsys):
    assert simulate.main(["--reps", "20", "--budgets", "10"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line][1:]
    expected = sum(len(simulate.rules_for(f)) for f in simulate.FAMILIES)
    assert len(rows) == expected and all(" | 10 | " in row for row in rows)


@pytest.mark.parametrize(
    "argv,said", [(["--budgets", "1"], "--budgets='1' is not allowed"), (["--reps", "0"], "--reps=0")]
)
def test_bad_flags_are_refused_naming_them(capsys, argv, said):
    with pytest.raises(SystemExit) as err:
        simulate.main(argv)
    assert err.value.code == 2 and said in capsys.readouterr().err


@pytest.mark.parametrize(
    "family", ["accuracy, asymmetric divergence", "accuracy, symmetric divergence", "accuracy k/32, ties"]
)
@pytest.mark.parametrize("rule", ["t_mixture", "betting", "median"])
def test_the_vectorised_rules_are_the_sweeps_replay_seed_by_seed(family, rule):
    # the simulation's rules against the sweep's own (attnlab.sequential.replay), on diverged seeds, ties and runs of
    # equal values: the same verdict after the same number of seeds
    from attnlab.sequential import replay

    pairs = simulate.draw(family, 40, 30, False, seed=11)
    boundary = {"t_mixture": "t_mixture"}.get(rule, rule)
    fast = simulate.run(rule, pairs, (30,), ALPHA, 0.0, bounded=True)
    for row in range(40):
        d = list(pairs.a[row] - pairs.b[row])
        slow = replay(
            d,
            "greater",
            0.0,
            None,
            ALPHA,
            boundary=boundary,
            support=simulate.SUPPORT,
            lost=pairs.lost[row],
            metric=ACC,
        )
        said = {"supported": 1, "contradicted": -1, None: 0}[slow.verdict]
        # seeds spent: those the decision used, and the lost pair that stopped it (its seeds trained too)
        spent = slow.n + ("diverged or failed" in slow.reason) if slow.verdict is not None or slow.reason else 30
        assert fast.decision[30][row] == said and fast.seeds[30][row] == spent, row
