"""A claim's declared ``assume: no_divergence``: the bound over divergence the seeds leave possible set aside while no
seed diverged, named beside the verdict, refuted by a seed that diverges; and the assumption a loss's mean always makes,
named too. Met where a user meets them: ``python -m analysis.claims DIR --claims FILE`` and the adaptive sweep's rule.

Expected intervals come from scipy's Welch test and from Lai's t-mixture boundary written out here, never from the code
under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from attnlab.claims import ClaimError, parse_claim
from attnlab.sequential import REFUTED, replay
from tests.analysis.claims.test_claims_unseen_divergence import STRONG
from tests.analysis.claims.test_claims_verdicts import SOFT, claim, claims_file, verdicts, write_folder

ALPHA = 0.05


def welch_interval(a: list[float], b: list[float], level: float) -> tuple[float, float]:
    """The two-sided Welch interval of mean(a) − mean(b) from scipy."""
    ci = sps.ttest_ind(a, b, equal_var=False).confidence_interval(confidence_level=level)
    return ci.low, ci.high


def test_a_declared_assumption_decides_ten_converged_seeds_and_is_named(tmp_path, capsys):
    # without it the same folder is inconclusive (tests/analysis/claims/test_claims_unseen_divergence.py): 10 seeds
    # leave a divergence rate up to 0.4 possible
    folder = write_folder(tmp_path / "sweep", {"local": STRONG, "soft": SOFT})
    file = claims_file(tmp_path / "c.yaml", claim("local beats soft", "greater", assume="no_divergence"))
    code, out = verdicts(capsys, folder, file)
    low, high = welch_interval(STRONG, SOFT, 1 - ALPHA)
    assert code == 0 and "[SUPPORTED] local beats soft" in out, out
    assert f"95% interval [{low:.3f}, {high:.3f}]" in out, out
    assert "assumes: no_divergence (declared): the seeds' means are tested without the bound" in out, out


def test_the_same_folder_without_the_assumption_stays_undecided(tmp_path, capsys):
    folder = write_folder(tmp_path / "sweep", {"local": STRONG, "soft": SOFT})
    code, out = verdicts(capsys, folder, claims_file(tmp_path / "c.yaml", claim("local beats soft", "greater")))
    assert code == 1 and "[INCONCLUSIVE]" in out and "assumes:" not in out, out


def test_a_diverged_seed_refutes_the_assumption_and_the_claim_is_decided_without_it(tmp_path, capsys):
    sides = {"local": STRONG[:9] + ["diverged"], "soft": SOFT}
    file = claims_file(tmp_path / "c.yaml", claim("local beats soft", "greater", assume="no_divergence"))
    code, out = verdicts(capsys, write_folder(tmp_path / "assumed", sides), file)
    plain = claims_file(tmp_path / "p.yaml", claim("local beats soft", "greater"))
    _, without = verdicts(capsys, write_folder(tmp_path / "plain", sides), plain)
    assert "no_divergence (declared) is refuted by 1 diverged seed(s)" in out, out
    # decided exactly as a claim that declares nothing: the same interval and verdict lines
    same = [line for line in out.splitlines() if "interval" in line or line.startswith("[")]
    assert same == [line for line in without.splitlines() if "interval" in line or line.startswith("[")]
    assert code == 1


def test_a_loss_names_the_assumption_its_mean_makes_without_being_told(tmp_path, capsys):
    lower = [2.01, 2.03, 1.98, 2.00, 2.02]
    higher = [2.31, 2.28, 2.35, 2.30, 2.33]
    folder = write_folder(tmp_path / "sweep", {"local": lower, "soft": higher}, metric="test/loss")
    file = claims_file(tmp_path / "c.yaml", claim("local is lower", "less", metric="test/loss"))
    code, out = verdicts(capsys, folder, file)
    low, high = welch_interval(lower, higher, 1 - ALPHA)
    assert code == 0 and f"95% interval [{low:.3f}, {high:.3f}]" in out, out
    assert "assumes: no_divergence (implicit): test/loss's worst value is +∞" in out, out


@pytest.mark.parametrize(
    "fields,said",
    [
        ({"assume": "converged"}, "c.assume='converged' is not allowed; choose one of ['no_divergence']"),
        (
            {"assume": "no_divergence", "expect": "ratio", "b": None, "over": 8, "bounds": [0.9, None]},
            "c.assume is not used by expect=ratio",
        ),
    ],
)
def test_a_bad_assumption_is_one_line_naming_the_field(fields, said):
    raw = {"metric": "token_acc@16", "a": {"position": "alibi"}, "b": {"position": "rope"}, "expect": "greater"}
    with pytest.raises(ClaimError, match="^" + said.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")):
        parse_claim({**raw, **fields}, "c")


def test_the_claims_key_changes_only_when_the_assumption_is_declared():
    # a sweep started before the field existed resumes: its claims' keys are unchanged
    raw = {"metric": "test/bleu", "a": {"x": 1}, "b": {"x": 2}, "expect": "less"}
    plain, assumed = parse_claim(raw, "c"), parse_claim({**raw, "assume": "no_divergence"}, "c")
    assert "assume" not in plain.key() and plain.key() != assumed.key()
    assert plain.hypothesis() == assumed.hypothesis()  # one hypothesis: Holm counts it once


def lai_radius(n: int, alpha: float, c: float = 1.0) -> float:
    """Lai's t-mixture half-width in units of the biased sd, from M_n(m) < 1/alpha (Wang and Ramdas 2025, eq. for the
    scale-invariant mixture), written out independently."""
    r = (n + c) * (1 - (alpha**2 * c / (n + c)) ** (1 / n))
    return math.sqrt(r / (n - r))


def test_the_adaptive_rule_under_the_assumption_is_lais_interval_at_full_alpha():
    diffs = [0.031, 0.045, 0.038, 0.052, 0.029, 0.041, 0.047, 0.036]
    found = replay(diffs, "greater", 0.0, None, ALPHA, metric="test/token_acc", assumed=True)
    x = np.array(diffs[: found.n])
    half = x.std(ddof=0) * lai_radius(found.n, ALPHA)
    assert found.verdict == "supported"
    # the running intersection's low edge is at least the last look's; its high edge at most the last look's
    assert found.low >= x.mean() - half - 1e-12 and found.high <= x.mean() + half + 1e-12
    widened = replay(diffs, "greater", 0.0, None, ALPHA, metric="test/token_acc")
    assert widened.verdict is None or widened.n > found.n  # without it the same seeds decide later, or not at all


def test_a_lost_pair_refutes_the_assumption_in_the_adaptive_rule():
    diffs = [0.031, 0.045, 0.038, 0.052]
    found = replay(diffs, "greater", 0.0, None, ALPHA, lost=[False, False, True, False], assumed=True)
    assert found.verdict is None and found.reason == REFUTED.format(k=1)


def test_the_sweeps_summary_line_names_the_assumption():
    from attnlab.outcomes import Observations
    from experiments.sweep.adaptive import Plan, decide, summary

    claim_ = parse_claim(
        {"name": "a", "metric": "test/token_acc", "a": {"x": 1}, "b": {"x": 2}, "expect": "greater"}
        | {"assume": "no_divergence"},
        "c",
    )
    plan = Plan(first=(0, 1), step=1, budget=10, alpha=ALPHA)
    observed = Observations([0.03, 0.04, 0.05], [False] * 3)
    line = summary(claim_, decide(claim_, observed, plan, 1), observed, plan, 1)
    assert "assuming no_divergence" in line, line


@pytest.mark.parametrize("assume", [None, "no_divergence"])
def test_the_claims_of_an_adaptive_folder_name_the_assumption_as_the_sweep_declared_it(tmp_path, capsys, assume):
    import json

    from analysis.claims.cli import main as claims_main

    folder = write_folder(tmp_path / "sweep", {"soft": SOFT, "local": [v + 0.05 for v in SOFT]})
    plan = {"alpha": 0.05, "alpha_per_claim": 0.05, "mixture": 1.0, "budget": 10, "first": [0, 1, 2], "step": 2}
    raw = claim("local beats soft", "greater") | ({"assume": assume} if assume else {})
    state = {"plan": plan, "claims_raw": [raw], "rounds": [], "finished": True}
    (folder / "adaptive.json").write_text(json.dumps(state))
    claims_main([str(folder)])
    out = capsys.readouterr().out
    said = "assumes: no_divergence (declared): the t-mixture is not widened"
    assert (said in out) == (assume is not None), out
    assert ("alpha 0.05 each, assuming no_divergence)" in out) == (assume is not None), out  # the section's line


def test_the_reports_claims_table_names_the_assumption_beside_the_verdict(tmp_path):
    from analysis.report.build import build_report

    folder = write_folder(tmp_path / "sweep", {"local": STRONG, "soft": SOFT})
    file = claims_file(tmp_path / "c.yaml", claim("local beats soft", "greater", assume="no_divergence"))
    build_report([folder], tmp_path / "report", metrics=["test/token_acc"], claims=file)
    text = (tmp_path / "report" / "report.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| local beats soft"))
    assert "supported (Holm over 1 claim, p_adj" in row and "; assumes no_divergence (declared)" in row, row
