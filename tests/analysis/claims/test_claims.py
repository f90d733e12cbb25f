"""analysis.claims: verdicts on fixture sweeps whose truth is known, checked against scipy.

The fixture sweep holds five position encodings on `copy` with hand-chosen
values: alibi truly above sinusoidal, rope equal to it, none below it, t5 with one
seed. Every statistic and p-value is recomputed here with scipy's own tests and
Holm's step-down written out, never with the module under test.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats as sps

from analysis.claims.cli import main as claims_main
from analysis.claims.evaluate import COLUMNS, decide
from analysis.claims.evaluate import evaluate as evaluate_claims
from analysis.data.collect import collect
from analysis.stats.claims import two_sample_test
from attnlab.claims import ClaimError, parse_claim, parse_claims
from tests.helpers.paths import ROOT

ALPHA = 0.05
# test/score per seed (a metric without a range: Welch's test as written; test/token_acc, the same values as an
# accuracy, is decided over the divergence rates its seeds leave possible,
# tests/analysis/claims/test_claims_unseen_divergence.py);
# by_length token_acc at 16 is value - drop, at 8 it is value.
VALUES = {
    "alibi": [0.90, 0.93, 0.88, 0.95, 0.91],
    "sinusoidal": [0.60, 0.72, 0.65, 0.58, 0.70],
    "rope": [0.63, 0.69, 0.66, 0.61, 0.67],
    "none": [0.41, 0.45, 0.38, 0.50, 0.44],
    "t5": [0.80],
}
DROP = {
    "alibi": [0.01, 0.02, 0.00, 0.03, 0.01],
    "sinusoidal": [0.30, 0.35, 0.28, 0.40, 0.33],
    "rope": [0.2, 0.25, 0.22, 0.18, 0.21],
    "none": [0.1, 0.12, 0.09, 0.11, 0.1],
    "t5": [0.05],
}


def result(
    position: str,
    seed: int,
    value: float,
    drop: float,
    claims: list | None = None,
    task: str = "copy",
    lr: float = 0.001,
    status: str = "completed",
) -> dict:
    config = {
        "task.name": task,
        "attention.name": "multihead",
        "position.name": position,
        "seed": seed,
        "optim.lr": lr,
        "model.d_model": 64,
        "claims": claims or [],
    }
    done = status == "completed"
    return {
        "schema": 1,
        "run_id": f"{task}-{position}-{lr}-s{seed}",
        "sweep": "fixture",
        "status": status,
        "error": None if done else "boom",
        "task": task,
        "attention": "multihead",
        "position": position,
        "seed": seed,
        "arch": "seq2seq",
        "overrides": [],
        "config": config,
        "config_hash": "h",
        "metrics": {"test/score": value, "test/token_acc": value, "val/loss": 1 - value} if done else {},
        "by_length": {"8": {"token_acc": value}, "16": {"token_acc": value - drop}} if done else {},
        "cost": {},
        "env": {},
        "started_at": None,
        "finished_at": None,
        "command": "",
        "train_lengths": [2, 8],
    }


def write_sweep(root: Path, claims: list | None = None, values: dict = VALUES, **kwargs) -> Path:
    for position, seeds in values.items():
        for seed, value in enumerate(seeds):
            run = root / f"{kwargs.get('task', 'copy')}-{position}-{kwargs.get('lr', 0.001)}-{seed}"
            run.mkdir(parents=True, exist_ok=True)
            (run / "result.json").write_text(
                json.dumps(result(position, seed, value, DROP[position][seed], claims, **kwargs))
            )
    return root


def claim(**fields) -> dict:
    base = {
        "name": "c",
        "metric": "test/score",
        "a": {"position": "alibi"},
        "b": {"position": "sinusoidal"},
        "expect": "greater",
    }
    base.update(fields)
    return {k: v for k, v in base.items() if v is not None}


def evaluate(tmp_path: Path, claims: list, **kwargs):
    return evaluate_claims(collect(write_sweep(tmp_path / "sweep", claims, **kwargs)))


def holm(p: list[float]) -> list[float]:
    """Holm's step-down, written out: sort, multiply the k-th smallest by (m - k), running maximum, cap at 1."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    out, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        out[i] = running
    return out


def a(position: str) -> np.ndarray:
    return np.asarray(VALUES[position])


# ---------------------------------------------------------------- verdicts against scipy


def test_true_difference_is_supported_with_scipys_welch(tmp_path):
    rows = evaluate(tmp_path, [claim(margin=0.1)])
    row = rows.iloc[0]
    expected = sps.ttest_ind(a("alibi") - 0.1, a("sinusoidal"), equal_var=False, alternative="greater")
    assert row["statistic"] == pytest.approx(expected.statistic, rel=1e-10)
    assert row["p"] == pytest.approx(2 * expected.pvalue, rel=1e-10)  # each direction at alpha / 2
    assert row["diff"] == pytest.approx(a("alibi").mean() - a("sinusoidal").mean())
    assert row["verdict"] == "supported"
    mean, sem = a("alibi").mean(), sps.sem(a("alibi"))
    assert row["a_ci"] == pytest.approx(sem * sps.t.ppf(0.975, 4))
    assert row["a_mean"] == pytest.approx(mean) and row["a_n"] == 5 and row["b_n"] == 5


def test_opposite_direction_is_contradicted(tmp_path):
    rows = evaluate(tmp_path, [claim(a={"position": "none"})])
    row = rows.iloc[0]
    against = sps.ttest_ind(a("none"), a("sinusoidal"), equal_var=False, alternative="less")
    assert row["p"] == pytest.approx(2 * against.pvalue, rel=1e-10)
    assert row["verdict"] == "contradicted"
    # and "less" is the same data supporting the reverse claim
    assert evaluate(tmp_path / "x", [claim(a={"position": "none"}, expect="less")]).iloc[0]["verdict"] == "supported"


def test_less_by_a_margin_is_welch_against_minus_margin(tmp_path):
    row = evaluate(tmp_path, [claim(a={"position": "none"}, expect="less", margin=0.15)]).iloc[0]
    expected = sps.ttest_ind(a("none") + 0.15, a("sinusoidal"), equal_var=False, alternative="less")
    assert row["statistic"] == pytest.approx(expected.statistic, rel=1e-10)
    assert row["p"] == pytest.approx(2 * expected.pvalue, rel=1e-10)


def test_a_less_claim_at_margin_zero_names_the_margin_0(tmp_path):
    row = evaluate(tmp_path, [claim(a={"position": "rope"}, expect="less")]).iloc[0]
    assert row["verdict"] == "inconclusive"
    assert "straddles the margin 0" in row["lacked"] and "margin -0" not in row["lacked"], row["lacked"]


def test_no_difference_is_inconclusive_with_a_power_estimate(tmp_path):
    row = evaluate(tmp_path, [claim(a={"position": "rope"}, min_effect=0.05)]).iloc[0]
    expected = sps.ttest_ind(a("rope"), a("sinusoidal"), equal_var=False, alternative="two-sided")
    assert row["p"] == pytest.approx(expected.pvalue, rel=1e-9)
    assert row["verdict"] == "inconclusive"
    assert "straddles the margin 0" in row["lacked"]
    # Seeds per side for 80% power at the claim's min_effect (never the observed difference) and the observed
    # spread, each direction at alpha / 2: the normal-approximation n = 2 (z_{1-alpha/2} + z_{0.8})^2 / e^2
    # is a lower bound on the t-based answer.
    sd = math.sqrt((a("rope").var(ddof=1) + a("sinusoidal").var(ddof=1)) / 2)
    normal = 2 * (sps.norm.ppf(1 - ALPHA / 2) + sps.norm.ppf(0.8)) ** 2 / (0.05 / sd) ** 2
    assert normal <= row["seeds_needed"] <= normal + 3
    assert f"about {row['seeds_needed']} seeds per side" in row["lacked"]


def test_too_few_seeds_is_inconclusive_and_says_so(tmp_path):
    row = evaluate(tmp_path, [claim(a={"position": "t5"})]).iloc[0]
    assert row["verdict"] == "inconclusive"
    assert row["lacked"].startswith("fewer than 2 seeds on side a (1 with a value of 1 runs")
    assert math.isnan(row["p_holm"])


def test_failed_runs_do_not_count_as_seeds(tmp_path):
    accuracy = claim(metric="test/token_acc")
    root = write_sweep(tmp_path / "sweep", [accuracy])
    for seed in range(1, 5):
        bad = result("alibi", seed, 0.0, 0.0, [accuracy], status="failed" if seed < 3 else "diverged")
        bad["metrics"] = {"test/token_acc": 0.99}  # a value logged before the run broke is not a result
        (root / f"copy-alibi-0.001-{seed}" / "result.json").write_text(json.dumps(bad))
    row = evaluate_claims(collect(root)).iloc[0]
    # a diverged seed is an outcome, scored as the accuracy's floor 0; a failed run is counted, not scored
    assert row["a_n"] == 3 and row["a_mean"] == pytest.approx(VALUES["alibi"][0] / 3)
    assert row["a_runs"] == "1 completed, 2 diverged (scored 0), 2 failed"


def test_equivalence_is_tost_against_the_textbook_formulas(tmp_path):
    row = evaluate(tmp_path, [claim(a={"position": "rope"}, expect="equivalent", margin=0.08)]).iloc[0]
    x, y, m = a("rope"), a("sinusoidal"), 0.08
    va, vb = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    se = math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / (len(x) - 1) + vb**2 / (len(y) - 1))
    d = x.mean() - y.mean()
    p_low = sps.t.sf((d + m) / se, df)  # H1: d > -m
    p_high = sps.t.cdf((d - m) / se, df)  # H1: d < m
    assert row["p"] == pytest.approx(max(p_low, p_high), rel=1e-9)
    assert row["df"] == pytest.approx(df, rel=1e-9)
    assert row["verdict"] == ("supported" if max(p_low, p_high) < ALPHA else "inconclusive")


def test_tost_hand_computed_case():
    """a = 1, 2, 3, 4 and b = 2, 3, 5 within ±2: worked through by hand.

    d = 2.5 − 10/3 = −5/6; var a = 5/3, var b = 7/3; se² = 5/12 + 7/9 = 43/36;
    Welch df = (43/36)² / ((5/12)²/3 + (7/9)²/2) = 3.95931...; d is nearer −2 than 2, so the
    lower test binds: t = (−5/6 + 2) / sqrt(43/36) = 1.06749..., p = P(T >= t) on that df.
    """
    claim_ = parse_claim(claim(expect="equivalent", margin=2.0), "claims[0]")
    evidence = two_sample_test(np.array([1.0, 2, 3, 4]), np.array([2.0, 3, 5]), claim_)
    se = math.sqrt(43 / 36)
    df = (43 / 36) ** 2 / ((5 / 12) ** 2 / 3 + (7 / 9) ** 2 / 2)
    assert df == pytest.approx(3.95931, abs=1e-5)
    t = (-5 / 6 + 2) / se
    assert t == pytest.approx(1.06749, abs=1e-5)
    assert evidence.statistic == pytest.approx(t, rel=1e-12) and evidence.df == pytest.approx(df, rel=1e-12)
    assert evidence.p_for == pytest.approx(sps.t.sf(t, df), rel=1e-10)
    # against the claim: either edge's test, each at alpha / 2
    against = 2 * min(sps.t.cdf(t, df), sps.t.sf((-5 / 6 - 2) / se, df))
    assert evidence.p_against == pytest.approx(min(1.0, against), rel=1e-10)


def test_ratio_claim_is_a_ratio_of_means_with_a_delta_method_interval(tmp_path):
    flat = claim(metric="token_acc@16", over=8, expect="ratio", bounds=[0.9, None], b=None)
    sagging = claim(
        metric="token_acc@16", over=8, expect="ratio", bounds=[0.9, 1.1], b=None, a={"position": "sinusoidal"}, name="d"
    )
    rows = evaluate(tmp_path, [flat, sagging])

    def delta(position):
        """R = mean(x) / mean(y) and se² = (s_x² − 2R s_xy + R² s_y²) / (n mean(y)²), written out."""
        y = a(position)
        x = y - np.asarray(DROP[position])
        n, r = len(x), x.mean() / y.mean()
        s_xy = ((x - x.mean()) * (y - y.mean())).sum() / (n - 1)
        return r, math.sqrt((x.var(ddof=1) - 2 * r * s_xy + r * r * y.var(ddof=1)) / (n * y.mean() ** 2)), n

    r, se, n = delta("alibi")
    assert rows.iloc[0]["diff"] == pytest.approx(r) and rows.iloc[0]["statistic"] == pytest.approx((r - 0.9) / se)
    assert rows.iloc[0]["verdict"] == "supported"
    r, se, n = delta("sinusoidal")
    below = sps.t.cdf((r - 0.9) / se, n - 1)  # against: the ratio lies below 0.9 (or above 1.1), each at alpha / 2
    above = sps.t.sf((r - 1.1) / se, n - 1)
    assert rows.iloc[1]["p"] == pytest.approx(2 * min(below, above), rel=1e-9)
    assert rows.iloc[1]["verdict"] == "contradicted"


def test_claims_are_holm_corrected_together(tmp_path):
    specs = [
        claim(margin=0.1, name="a"),
        claim(a={"position": "none"}, name="b"),
        claim(a={"position": "rope"}, name="c"),
        claim(a={"position": "alibi"}, b={"position": "rope"}, margin=0.25, name="d"),
    ]
    rows = evaluate(tmp_path, specs)

    def decisive(x, y, margin):
        return sps.ttest_ind(x - margin, y, equal_var=False, alternative="two-sided").pvalue

    raw = [
        decisive(a("alibi"), a("sinusoidal"), 0.1),
        decisive(a("none"), a("sinusoidal"), 0.0),
        decisive(a("rope"), a("sinusoidal"), 0.0),
        decisive(a("alibi"), a("rope"), 0.25),
    ]
    assert rows["p"].tolist() == pytest.approx(raw, rel=1e-9)
    assert rows["p_holm"].tolist() == pytest.approx(holm(raw), rel=1e-9)
    expected = ["supported" if p < ALPHA else "inconclusive" for p in holm(raw)]
    expected[1] = "contradicted"
    assert rows["verdict"].tolist() == expected


def test_a_claim_significant_alone_but_not_after_holm_says_so():
    claims = [parse_claim(claim(name=str(i)), f"claims[{i}]") for i in range(3)]
    rows = [
        {**{c: math.nan for c in COLUMNS}, "lacked": "", "p_for": p, "p_against": 1 - p} for p in (0.02, 0.03, 0.04)
    ]
    out = decide(rows, claims)
    assert out["p_holm"].tolist() == pytest.approx(holm([0.02, 0.03, 0.04]))
    assert (out["verdict"] == "inconclusive").all()
    assert out.iloc[0]["lacked"].startswith("significant alone (p=0.020) but not after Holm's correction over 3")


def test_config_claims_apply_to_the_runs_that_carry_them_and_a_file_adds_more(tmp_path):
    write_sweep(tmp_path / "one", [claim(name="carried")])
    write_sweep(tmp_path / "two", [], task="reverse")
    extra = tmp_path / "extra.yaml"
    extra.write_text(yaml.safe_dump({"claims": [claim(name="from file", where={"task": "reverse"})]}))
    runs = collect([tmp_path / "one", tmp_path / "two"])
    rows = evaluate_claims(runs, extra)
    assert rows["claim"].tolist() == ["carried", "from file"]
    assert rows["verdict"].tolist() == ["supported", "supported"]


# ---------------------------------------------------------------- sides are cells


def test_a_side_over_two_cells_is_an_error_naming_the_key(tmp_path):
    write_sweep(tmp_path / "s", [claim()], lr=0.001)
    write_sweep(tmp_path / "s", [claim()], lr=0.003)
    runs = collect(tmp_path / "s")
    with pytest.raises(
        ClaimError,
        match=r"^claims of sweep fixture\[0\]\.a=\{position=alibi\} covers 2 cells "
        r"that differ in optim\.lr; pin it in the claim's where",
    ):
        evaluate_claims(runs)
    pinned = tmp_path / "pinned.yaml"
    pinned.write_text(yaml.safe_dump([claim(where={"optim.lr": 0.003})]))
    runs.runs = runs.runs.drop(columns=["config.claims"])
    assert evaluate_claims(runs, pinned).iloc[0]["verdict"] == "supported"


def test_a_file_claim_named_as_a_carried_one_corrects_it_on_the_runs_that_carry_it(tmp_path):
    # A finished sweep whose carried claim covers two cells: the same name in a file, pinned, replaces it.
    write_sweep(tmp_path / "s", [claim(name="alibi wins")], lr=0.001)
    write_sweep(tmp_path / "s", [claim(name="alibi wins")], lr=0.003)
    write_sweep(tmp_path / "other", [], task="reverse")  # carries nothing: outside the carried claim's scope
    runs = collect([tmp_path / "s", tmp_path / "other"])
    with pytest.raises(ClaimError, match=r"covers 2 cells that differ in optim\.lr"):
        evaluate_claims(runs)
    fix = tmp_path / "fix.yaml"
    fix.write_text(yaml.safe_dump([claim(name="alibi wins", where={"optim.lr": 0.003})]))
    rows = evaluate_claims(runs, fix)
    assert rows["claim"].tolist() == ["alibi wins"]  # replaced, not tested twice
    assert rows.iloc[0]["verdict"] == "supported"


# ---------------------------------------------------------------- malformed claims: one line naming the field

MALFORMED = [
    (claim(expect="bigger"), r"claims\[0\]\.expect='bigger' is not allowed"),
    (claim(metric=None), r"claims\[0\]\.metric is missing"),
    (claim(a=None), r"claims\[0\]\.a is missing"),
    (claim(b=None), r"claims\[0\]\.b is missing"),
    (claim(a="alibi"), r"claims\[0\]\.a='alibi' is not allowed"),
    (claim(a={"position": ["alibi"]}), r"claims\[0\]\.a\.position=\['alibi'\] is not allowed"),
    (claim(margin="big"), r"claims\[0\]\.margin='big' is not allowed"),
    (claim(expect="equivalent"), r"claims\[0\]\.margin=None is not allowed"),
    (claim(expect="equivalent", margin=-1), r"claims\[0\]\.margin=-1 is not allowed"),
    (claim(metric="token acc"), r"claims\[0\]\.metric='token acc' is not allowed"),
    (claim(colour="red"), r"claims\[0\]\.colour is not a claim field"),
    (claim(where={"position": "rope"}), r"claims\[0\]\.where\.position is also set on a side"),
    (
        claim(expect="ratio", b=None, metric="token_acc", over=8, bounds=[0.9, None]),
        r"claims\[0\]\.metric='token_acc' is not allowed for expect=ratio",
    ),
    (claim(expect="ratio", b=None, metric="token_acc@16", bounds=[0.9, None]), r"claims\[0\]\.over=None"),
    (
        claim(expect="ratio", b=None, metric="token_acc@16", over=16, bounds=[0.9, None]),
        r"claims\[0\]\.over=16 is the metric's own length",
    ),
    (claim(expect="ratio", b=None, metric="token_acc@16", over=8), r"claims\[0\]\.bounds=None"),
    (
        claim(expect="ratio", b=None, metric="token_acc@16", over=8, bounds=[1.1, 0.9]),
        r"claims\[0\]\.bounds=\[1\.1, 0\.9\] is not allowed; low must be below high",
    ),
    (claim(expect="ratio", metric="token_acc@16", over=8, bounds=[0.9, None]), r"claims\[0\]\.b is not used"),
    (claim(over=8), r"claims\[0\]\.over is only used by expect=ratio"),
    (claim(name=["x"]), r"claims\[0\]\.name=\['x'\] is not allowed"),
    ("alibi is better", r"claims\[0\]='alibi is better' is not a claim"),
]


@pytest.mark.parametrize("raw, message", MALFORMED, ids=[m for _, m in MALFORMED])
def test_malformed_claim_is_one_line_naming_the_field(raw, message):
    with pytest.raises(ClaimError, match="^" + message) as err:
        parse_claims([raw])
    assert "\n" not in str(err.value)


BAD_AGAINST_RUNS = [
    (
        claim(metric="test/bleu"),
        r"claims\[0\]\.metric='test/bleu' is unknown; metrics found: test/score, test/token_acc, "
        r"test_beyond_range/token_acc, test_in_range/token_acc, val/loss; "
        r"per-length metrics \(NAME@LENGTH\): token_acc",
    ),
    (claim(metric="seq_acc@16"), r"claims\[0\]\.metric='seq_acc@16' is unknown; per-length metrics found: token_acc"),
    (claim(metric="token_acc@40"), r"claims\[0\]\.metric: length 40 is not evaluated; token_acc lengths found: 8, 16"),
    (
        claim(a={"position": "alibii"}),
        r"claims\[0\]\.a=\{position=alibii\} matches no run: position='alibii' is not "
        r"among alibi, none, rope, sinusoidal, t5",
    ),
    (claim(b={"windw": 4}), r"claims\[0\]\.b\.windw is not a factor or config key of these runs"),
    (claim(b={"position": "alibi"}), r"claims\[0\]: a and b are the same cell"),
]


@pytest.mark.parametrize("raw, message", BAD_AGAINST_RUNS, ids=[m[:40] for _, m in BAD_AGAINST_RUNS])
def test_a_claim_that_does_not_fit_the_runs_is_one_line_naming_the_field(tmp_path, raw, message):
    runs = collect(write_sweep(tmp_path / "sweep"))
    file = tmp_path / "c.yaml"
    file.write_text(yaml.safe_dump([raw]))
    with pytest.raises(ClaimError, match="^" + message.replace("claims\\[0\\]", "c.yaml: claims\\[0\\]")) as err:
        evaluate_claims(runs, file)
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------- command line


def test_cli_exit_codes(tmp_path, capsys):
    sweep = write_sweep(tmp_path / "sweep")
    files = {}
    for name, content in {
        "good": [claim(margin=0.1)],
        "mixed": [claim(), claim(a={"position": "none"}, name="d")],
        "open": [claim(a={"position": "t5"})],
        "bad": [claim(metric="test/bleu")],
        "broken": [claim(expect="bigger")],
    }.items():
        files[name] = tmp_path / f"{name}.yaml"
        files[name].write_text(yaml.safe_dump({"claims": content}))
    # One real command line; the other codes in-process (each interpreter start costs seconds on a busy machine).
    good = subprocess.run(
        [sys.executable, "-m", "analysis.claims", str(sweep), "--claims", str(files["good"])],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert good.returncode == 0, good.stderr
    assert "[SUPPORTED] c" in good.stdout and "1 claim(s): 1 supported" in good.stdout
    assert claims_main([str(sweep), "--claims", str(files["mixed"])]) == 1
    assert claims_main([str(sweep), "--claims", str(files["open"])]) == 1
    capsys.readouterr()
    for args in (
        [sweep, "--claims", files["bad"]],
        [sweep, "--claims", files["broken"]],
        [sweep],
        [tmp_path / "nowhere", "--claims", files["good"]],
    ):
        assert claims_main([str(x) for x in args]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1, err


# ---------------------------------------------------------------- the report's section


def test_report_opens_with_the_claims_section(tmp_path):
    from analysis.report.build import build_report

    specs = [
        claim(margin=0.1, name="alibi beats sinusoidal", source="Press et al. 2022"),
        claim(a={"position": "t5"}, name="t5 beats sinusoidal"),
    ]
    sweep = write_sweep(tmp_path / "sweep", specs)
    build_report([sweep], tmp_path / "report", metrics=["test/score"])
    text = (tmp_path / "report" / "report.md").read_text()
    assert text.index("## Claims") < text.index("## Overview")
    section = text[text.index("## Claims") : text.index("## Overview")]
    rows = [line for line in section.splitlines() if line.startswith("| alibi") or line.startswith("| t5")]
    assert len(rows) == 2
    assert "supported" in rows[0] and "Press et al. 2022" in rows[0] and "Welch two-sided" in rows[0]
    assert "inconclusive: fewer than 2 seeds on side a" in rows[1]
    expected = sps.ttest_ind(a("alibi") - 0.1, a("sinusoidal"), equal_var=False, alternative="greater")
    assert f"t = {expected.statistic:.3f}" in rows[0]


def test_report_claims_option_and_a_carried_claim_that_does_not_fit(tmp_path, capsys):
    from analysis.report.build import build_report, main

    sweep = write_sweep(tmp_path / "sweep", [claim(metric="test/bleu")])
    build_report([sweep], tmp_path / "report", metrics=["test/score"])
    text = (tmp_path / "report" / "report.md").read_text()
    assert "cannot be tested: claims of sweep fixture[0].metric='test/bleu' is unknown" in text
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump([claim(expect="bigger")]))
    assert main([str(sweep), "--out", str(tmp_path / "r2"), "--claims", str(broken)]) == 2
    assert "broken.yaml: claims[0].expect='bigger' is not allowed" in capsys.readouterr().err


def test_claims_page_example_parses_and_its_sweep_sweeps_its_sides():
    text = (ROOT / "docs" / "claims_quickstart.md").read_text()
    start = text.index("`claims.yaml`:")
    block, rest = text[start:].split("```yaml\n", 1)[1].split("```", 1)
    claims = parse_claims(yaml.safe_load(block)["claims"])
    command = rest.split("```\n", 1)[1].split("```", 1)[0]
    swept = command.split("position=", 1)[1].split()[0].split(",")
    assert [c.expect for c in claims] == ["greater", "equivalent"]
    assert all(dict(side)["position"] in swept for c in claims for side in (c.a, c.b))


def test_runs_that_differ_only_in_their_claims_are_one_cell(tmp_path):
    """Claims say what to test, not what to compute: a sweep re-run with another claim adds seeds to its cells."""
    write_sweep(tmp_path / "s", [claim(name="first")], values={"alibi": VALUES["alibi"][:2]})
    again = {"alibi": VALUES["alibi"][2:]}
    for seed, value in enumerate(again["alibi"], start=2):
        run = tmp_path / "s" / f"again-{seed}"
        run.mkdir(parents=True)
        (run / "result.json").write_text(json.dumps(result("alibi", seed, value, 0.0, [claim(name="second")])))
    runs = collect(tmp_path / "s")
    assert runs.runs["cell"].nunique() == 1 and "claims" not in runs.factors


# ---------------------------------------------------------------- duplicates and numbers in the YAML


@pytest.mark.parametrize(
    "twin",
    [
        claim(name="again"),  # the same claim under another name
        claim(name="mirrored", a={"position": "sinusoidal"}, b={"position": "alibi"}, expect="less"),  # b < a
    ],
)
def test_a_duplicate_claim_is_refused_in_one_line(tmp_path, capsys, twin):
    """Counted twice, one test would enter Holm's correction twice (and its p-value be corrected as two)."""
    sweep = write_sweep(tmp_path / "sweep")
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump({"claims": [claim(name="first"), claim(a={"position": "none"}), twin]}))
    assert claims_main([str(sweep), "--claims", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"claims[2] ({twin['name']!r}) tests the same hypothesis as" in err, err
    assert "claims[0] ('first')" in err
    with pytest.raises(ClaimError, match=r"claims\[1\] .* same hypothesis as claims\[0\]"):
        parse_claims([claim(), twin])  # a preset's claims: refused before any cell trains (experiments.config.checks)
    # an equivalence is symmetric: a ≡ b and b ≡ a are one claim
    same = claim(expect="equivalent", margin=0.1)
    with pytest.raises(ClaimError, match="same hypothesis"):
        parse_claims([same, {**same, "a": same["b"], "b": same["a"]}])
    # a different margin is a different hypothesis
    assert len(parse_claims([claim(), claim(margin=0.1, name="d")])) == 2


def test_a_margin_written_with_an_exponent_is_a_number(tmp_path):
    """``margin: 1e-3`` is 0.001 as in YAML 1.2 and Hydra's presets (PyYAML's YAML 1.1 reads the string '1e-3')."""
    sweep = write_sweep(tmp_path / "sweep")
    path = tmp_path / "claims.yaml"
    path.write_text(
        "claims:\n"
        "  - {name: tiny, metric: test/score, a: {position: alibi}, b: {position: sinusoidal},"
        " expect: greater, margin: 1e-3}\n"
        "  - {name: equal, metric: test/score, a: {position: rope}, b: {position: sinusoidal},"
        " expect: equivalent, margin: 8E-2}\n"
        "  - {name: quoted, metric: test/score, a: {position: none}, b: {position: sinusoidal},"
        " expect: greater, margin: '1e-3'}\n"
    )
    with pytest.raises(ClaimError, match=r"claims\[2\].margin='1e-3' is not allowed"):  # quoted: text, as written
        evaluate_claims(collect(sweep), path)
    path.write_text("\n".join(path.read_text().splitlines()[:-1]) + "\n")
    rows = evaluate_claims(collect(sweep), path).set_index("claim")
    x, y = a("alibi"), a("sinusoidal")
    p = sps.ttest_ind(x - 1e-3, y, equal_var=False, alternative="two-sided").pvalue
    assert rows.loc["tiny", "p"] == pytest.approx(p, rel=1e-9)
    assert rows.loc["equal", "expect"] == "|a − b| < 0.08", rows.loc["equal"].to_dict()
