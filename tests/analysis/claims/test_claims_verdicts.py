"""Verdicts a reviewer accepts, met where a user meets them: ``python -m analysis.claims DIR --claims FILE`` on
synthetic sweep folders whose truth is known (issue 45).

- a seed that diverged is an outcome, counted beside the verdict and scored as the metric's worst value;
- a verdict in either direction is wrong at most alpha: a one-sided p of 0.035 on 3 seeds a side decides nothing;
- no verdict from two sides without spread (3 against 3 seeds reach an exact p of 1/20 at best);
- two claims of one name, a YAML error and a ``!!python`` tag are one line and exit 2;
- a claims file beside an adaptive sweep's own claims is evaluated, in its own table.

Expected p-values come from scipy (Fisher's exact test, Welch's t) and from counting arrangements by hand.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats as sps

from analysis.claims.cli import main as claims_main
from tests.helpers.results import result_dict

METRIC = "test/token_acc"
# a metric whose name gives no range: Welch's and the exact test as written (an accuracy is decided over the
# divergence rates its seeds leave possible, tests/analysis/claims/test_claims_unseen_divergence.py)
UNRANGED = "test/score"
SOFT = [0.912, 0.905, 0.921, 0.899, 0.915, 0.908, 0.918, 0.902, 0.911, 0.907]


def run_row(attention: str, seed: int, value: float | None, status: str = "completed", metric: str = METRIC) -> dict:
    """One result.json as the recorder writes it (tests/helpers/results.py): a diverged or failed run keeps no
    metric."""
    done = status == "completed"
    metrics = {metric: value} if done else {}
    return result_dict("copy", attention, "sinusoidal", seed, status, metrics, error=None if done else status)


def write_folder(root: Path, sides: dict[str, list], metric: str = METRIC) -> Path:
    """A sweep folder: per attention, one run per seed; a value of "diverged" or "failed" is that status."""
    for attention, values in sides.items():
        for seed, value in enumerate(values):
            status = value if isinstance(value, str) else "completed"
            run = root / f"{attention}-{seed}"
            run.mkdir(parents=True, exist_ok=True)
            row = run_row(attention, seed, None if isinstance(value, str) else value, status, metric)
            (run / "result.json").write_text(json.dumps(row))
    return root


def claims_file(path: Path, *claims: dict) -> Path:
    path.write_text(yaml.safe_dump({"claims": list(claims)}, sort_keys=False))
    return path


def claim(name: str = "local matches soft", expect: str = "equivalent", **fields) -> dict:
    base = {"name": name, "metric": METRIC, "a": {"attention": "local"}, "b": {"attention": "soft"}, "expect": expect}
    return {**base, **fields}


def verdicts(capsys, folder: Path, file: Path) -> tuple[int, str]:
    code = claims_main([str(folder), "--claims", str(file)])
    return code, capsys.readouterr().out


# ---------------------------------------------------------------- the three folders of the issue

DIVERGED = {"soft": SOFT, "local": SOFT[:7] + ["diverged"] * 3}
ZERO_SPREAD = {"local": [1.0, 1.0, 1.0], "soft": [31 / 32] * 3}
# one-sided Welch p = 0.035 on 3 seeds a side (checked against scipy below)
WELCH_035 = {"local": [0.82, 0.85, 0.898], "soft": [0.79, 0.77, 0.78]}


def test_three_diverged_seeds_of_ten_are_scored_and_shown_not_dropped(tmp_path, capsys):
    """Before: [SUPPORTED] equal on b n=7, the 3 diverged seeds never mentioned."""
    folder = write_folder(tmp_path / "sweep", DIVERGED)
    code, out = verdicts(capsys, folder, claims_file(tmp_path / "c.yaml", claim(margin=0.02)))
    assert code == 1 and "[SUPPORTED]" not in out, out
    assert "7 completed, 3 diverged (scored 0), 0 failed" in out and "10 completed, 0 diverged, 0 failed" in out
    scored = SOFT[:7] + [0.0] * 3  # an accuracy's worst value is its floor
    assert f"a  attention=local: {np.mean(scored):.3f}" in out
    fisher = sps.fisher_exact([[3, 7], [0, 10]]).pvalue  # divergence rates: 3 of 10 against 0 of 10
    assert f"diverged 3/10 (a) vs 0/10 (b), Fisher's exact p {fisher:.3f}" in out


def test_a_cell_that_diverges_significantly_more_contradicts_an_equivalence(tmp_path, capsys):
    folder = write_folder(tmp_path / "sweep", {"soft": SOFT, "local": SOFT[:2] + ["diverged"] * 8})
    code, out = verdicts(capsys, folder, claims_file(tmp_path / "c.yaml", claim(margin=0.02)))
    fisher = sps.fisher_exact([[8, 2], [0, 10]]).pvalue
    assert fisher < 0.001 and "[CONTRADICTED]" in out, out
    assert "side a diverges more often (Fisher's exact p <0.001 < α/1)" in out


def test_a_loss_is_not_decided_on_the_survivors_of_a_divergence(tmp_path, capsys):
    """A loss's worst value is +inf: no mean takes it, so the mean test refuses and says so."""
    losses = [1.2, 1.1, 1.3, 1.25, 1.15]
    folder = write_folder(tmp_path / "sweep", {"soft": losses, "local": losses[:3] + ["diverged"] * 2}, "val/loss")
    code, out = verdicts(capsys, folder, claims_file(tmp_path / "c.yaml", claim(metric="val/loss", margin=0.1)))
    assert code == 1 and "[INCONCLUSIVE]" in out, out
    assert "diverged seeds (2 on side a) score val/loss's worst value, +∞" in out
    assert "3 completed, 2 diverged (not scored), 0 failed" in out


def test_a_one_sided_p_of_0035_on_three_seeds_decides_nothing(tmp_path, capsys):
    """Before: [SUPPORTED] on a one-sided p of 0.035, with a 90% interval. Each direction is now at alpha / 2."""
    a, b = np.array(WELCH_035["local"]), np.array(WELCH_035["soft"])
    one_sided = sps.ttest_ind(a, b, equal_var=False, alternative="greater").pvalue
    assert 0.03 < one_sided < 0.04
    folder = write_folder(tmp_path / "sweep", WELCH_035, UNRANGED)
    said = claim("local beats soft", "greater", metric=UNRANGED)
    code, out = verdicts(capsys, folder, claims_file(tmp_path / "c.yaml", said))
    assert code == 1 and "[INCONCLUSIVE] local beats soft (Holm over 1 claim, p_adj" in out, out
    # the interval that decided, at its level: Welch's 95% interval written out
    va, vb = a.var(ddof=1) / 3, b.var(ddof=1) / 3
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 2)
    half = sps.t.ppf(0.975, df) * math.sqrt(va + vb)
    d = a.mean() - b.mean()
    assert f"95% interval [{d - half:.3f}, {d + half:.3f}], p {2 * one_sided:.3f}" in out


def test_two_sides_without_spread_are_not_supported(tmp_path, capsys):
    """Before: t = inf, p < 0.001, [SUPPORTED]. Three seeds against three have 20 arrangements."""
    folder = write_folder(tmp_path / "sweep", ZERO_SPREAD, UNRANGED)
    said = claim("local beats soft", "greater", metric=UNRANGED)
    code, out = verdicts(capsys, folder, claims_file(tmp_path / "c.yaml", said))
    assert code == 1 and "[INCONCLUSIVE]" in out and "t = ∞" not in out, out
    assert f"over the {math.comb(6, 3)} arrangements of 3 + 3 seeds cannot reach p below 0.1" in out


@pytest.mark.parametrize("a, b, shift", [([1.0] * 3, [31 / 32] * 3, 0.0), ([0.5] * 4, [0.7] * 2, -0.1)])
def test_the_exact_test_without_spread_matches_scipys_permutation_test(a, b, shift):
    from analysis.stats.claims import exact_shift

    a, b = np.array(a), np.array(b)

    def diff(x, y, axis):
        return np.mean(x, axis=axis) - np.mean(y, axis=axis)

    for alternative, got in zip(("greater", "less"), exact_shift(a, b, shift)[:2]):
        want = sps.permutation_test((a - shift, b), diff, alternative=alternative, n_resamples=np.inf).pvalue
        assert got == pytest.approx(want, rel=1e-12), alternative


# ---------------------------------------------------------------- claims tooling


def test_two_claims_of_one_name_are_refused_in_one_line(tmp_path, capsys):
    folder = write_folder(tmp_path / "sweep", WELCH_035)
    file = claims_file(tmp_path / "c.yaml", claim("same", "greater"), claim("same", "equivalent", margin=0.1))
    assert claims_main([str(folder), "--claims", str(file)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "claims[1] has the name 'same' of c.yaml: claims[0]" in err, err


@pytest.mark.parametrize(
    "text, message",
    [
        ("claims: [ {name: x, metric: test/token_acc\n", "not valid YAML"),
        ("claims: !!python/object/apply:os.system ['touch {marker}']\n", "not valid YAML"),
    ],
    ids=["yaml-error", "python-tag"],
)
def test_a_malformed_claims_file_is_one_line_and_never_executed(tmp_path, capsys, text, message):
    folder = write_folder(tmp_path / "sweep", WELCH_035)
    marker = tmp_path / "executed"
    file = tmp_path / "c.yaml"
    file.write_text(text.replace("{marker}", str(marker)))
    assert claims_main([str(folder), "--claims", str(file)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not marker.exists()


def adaptive_folder(tmp_path: Path) -> tuple[Path, Path]:
    """A finished adaptive sweep (its adaptive.json and seeds) and a claims file of the user's own."""
    folder = write_folder(tmp_path / "sweep", {"soft": SOFT, "local": [v + 0.05 for v in SOFT]})
    plan = {"alpha": 0.05, "alpha_per_claim": 0.05, "mixture": 1.0, "budget": 10, "first": [0, 1, 2], "step": 2}
    state = {"plan": plan, "claims_raw": [claim("the sweep's own", "greater")], "rounds": [], "finished": True}
    (folder / "adaptive.json").write_text(json.dumps(state))
    return folder, claims_file(tmp_path / "mine.yaml", claim("mine", "equivalent", margin=0.01))


def test_a_claims_file_beside_an_adaptive_sweep_is_decided_in_its_own_table(tmp_path, capsys):
    """Before: the adaptive sweep's own claims were printed and FILE was silently ignored."""
    folder, file = adaptive_folder(tmp_path)
    code, out = verdicts(capsys, folder, file)
    assert "] the sweep's own" in out
    heading = f"Claims of {file}, decided by the fixed-n engine (not the sweep's anytime rule):"
    assert heading in out and "] mine (Holm over 1 claim" in out.split(heading)[1], out
    assert code == 1  # the file's equivalence is contradicted: local is 0.05 above soft


def test_the_reports_claims_table_shows_every_sides_seeds_and_the_correction(tmp_path):
    from analysis.report.build import build_report

    folder = write_folder(tmp_path / "sweep", DIVERGED)
    build_report(
        [folder], tmp_path / "report", metrics=[METRIC], claims=claims_file(tmp_path / "c.yaml", claim(margin=0.02))
    )
    text = (tmp_path / "report" / "report.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| local matches soft"))
    assert "7 completed, 3 diverged (scored 0), 0 failed" in row and "10 completed, 0 diverged, 0 failed" in row
    assert "inconclusive (Holm over 1 claim, p_adj" in row and "Fisher's exact p" in row, row


@pytest.mark.parametrize(
    "fields, said",
    [
        (
            {"expect": "greater", "min_effect": -0.1},
            r"claims\[0\]\.min_effect=-0\.1 is not allowed; it must be a number > 0",
        ),
        (
            {"expect": "equivalent", "margin": 0.1, "min_effect": 0.05},
            r"claims\[0\]\.min_effect is not used by a claim",
        ),
    ],
    ids=["negative", "equivalence"],
)
def test_a_min_effect_that_cannot_price_seeds_is_one_line_naming_the_field(fields, said):
    from attnlab.claims import ClaimError, parse_claims

    with pytest.raises(ClaimError, match="^" + said) as err:
        parse_claims([claim("c", **fields)])
    assert "\n" not in str(err.value)


def test_the_report_of_an_adaptive_sweep_decides_a_claims_file_beside_the_sweeps_claims(tmp_path):
    from analysis.report.build import build_report

    folder, file = adaptive_folder(tmp_path)
    build_report([folder], tmp_path / "report", metrics=[METRIC], claims=file)
    text = (tmp_path / "report" / "report.md").read_text()
    section = text[text.index("## Claims") :]
    heading = f"Claims of {file}, decided by the fixed-n engine (not the sweep's anytime rule):"
    assert "| the sweep's own" in section and heading in section, section[:2000]
    assert "| mine |" in section.split(heading)[1]
