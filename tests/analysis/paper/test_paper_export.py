"""From report to paper: LaTeX tables, vector figures, references.bib and the Methods paragraph.

The expected values come from the report's own CSV files read back with pandas, from
the registries, from a rounding rule written out here, and from pdflatex / BibTeX / pybtex
/ an XML parser reading the files: never from the code that wrote them.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from analysis.command.errors import ReportError
from analysis.report.build import build_report
from analysis.report.figures.figure_style import OKABE_ITO
from attnlab.bibliography import BIBLIOGRAPHY
from experiments.config.spec import build_spec
from experiments.record.result import variant_references
from tests.helpers.cell_fixtures import flat_config, result, write
from tests.helpers.registries import REGISTRIES
from variants import ATTENTION

RNG_MEANS = {
    ("soft", "sinusoidal"): (0.91, 0.52),
    ("soft", "rope"): (0.83, 0.31),
    ("multihead", "sinusoidal"): (0.97, 0.61),
    ("multihead", "rope"): (0.95, 0.44),
}
LENGTHS = (8, 12, 16, 24)  # trained on 2-12: 16 and 24 lie beyond
CLAIMS = {
    "claims": [
        {
            "name": "multihead and soft are equally accurate in range",
            "metric": "token_acc@12",
            "a": {"attention": "multihead", "position": "sinusoidal"},
            "b": {"attention": "soft", "position": "sinusoidal"},
            "expect": "equivalent",
            "margin": 0.2,
        },
        {
            "name": "sinusoids beat rope beyond range",
            "metric": "token_acc@24",
            "a": {"attention": "multihead", "position": "sinusoidal"},
            "b": {"attention": "multihead", "position": "rope"},
            "expect": "greater",
            "margin": 0.0,
        },
    ]
}
VALUE = re.compile(
    r"(?P<mean>-?\d+(?:\.\d+)?)(?: \$\\pm\$ (?P<half>\d+(?:\.\d+)?))? \((?P<n>\d+)\)"
    r"(?P<mark>\$\^\{[^}]*\}\$)?"
)


def references_for(task: str, attention: str, position: str) -> list[dict]:
    """What the training app records in result.json (experiments.record.result.variant_references)."""
    return variant_references({"attention": [attention], "position": [position], "task": [task]})


def write_sweep(root: Path, cells=RNG_MEANS, seeds=(0, 1, 2), attention_name: str | None = None) -> Path:
    rng = np.random.default_rng(7)
    for (attention, position), (inside, beyond) in cells.items():
        for seed in seeds:
            # unequal spreads per cell, so the intervals (and their rounding) differ
            spread = 0.004 + 0.03 * rng.random()
            by_length = {
                str(n): {
                    "token_acc": float(
                        np.clip((inside if n <= 12 else beyond - 0.1 * (n > 16)) + spread * rng.standard_normal(), 0, 1)
                    )
                }
                for n in LENGTHS
            }
            config = flat_config("reverse", attention, position, seed, **{"task.eval_lengths": list(LENGTHS)})
            if attention_name is not None:
                config["attention.name"] = attention_name
            res = result(
                f"{attention_name or attention}-{position}-{seed}",
                config,
                metrics={"val/loss": float(2 - inside + spread * rng.standard_normal())},
                by_length=by_length,
            )
            res["references"] = references_for("reverse", config["attention.name"], position)
            write(root / f"{attention}-{position}-{seed}", res)
    return root


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("paper")
    claims = root / "claims.yaml"
    claims.write_text(yaml.safe_dump(CLAIMS))
    html = build_report([write_sweep(root / "sweep")], root / "report", claims=claims, figure_width=3.3)
    return html.parent


# ---------------------------------------------------------------- LaTeX tables


def table_rows(tex: str) -> list[list[str]]:
    """The body rows of a booktabs tabular, split at &."""
    body = tex.split("\\midrule", 1)[1].split("\\bottomrule", 1)[0]
    return [[c.strip() for c in line.rstrip("\\ ").split(" & ")] for line in body.strip().splitlines()]


def expected_text(mean: float, half: float, n: int, fallback: int) -> tuple[str, str | None]:
    """The rounding rule: to the decimal of the interval's first significant digit (after rounding it)."""
    if n > 1 and math.isfinite(half) and half > 0:
        d = -math.floor(math.log10(half))
        if round(half, d) == 10.0 ** (1 - d):  # 0.096 -> 0.10: the first digit is now one place up
            d -= 1
        return f"{round(mean, d):.{max(d, 0)}f}", f"{round(half, d):.{max(d, 0)}f}"
    return f"{round(mean, fallback):.{fallback}f}", None


def decimals(text: str) -> int:
    return len(text.split(".")[1]) if "." in text else 0


def unbold(cell: str) -> tuple[str, bool]:
    bold = cell.startswith("\\textbf{")
    inner = cell[len("\\textbf{") : -1] if bold else cell
    return inner.removeprefix("\\underline{").removesuffix("}") if inner.startswith("\\underline{") else inner, bold


def check_value(cell: str, mean: float, half: float, n: int, fallback: int) -> re.Match:
    found = VALUE.fullmatch(cell)
    assert found, cell
    want_mean, want_half = expected_text(mean, half, n, fallback)
    assert found["mean"] == want_mean and found["half"] == want_half and int(found["n"]) == n, (cell, mean, half)
    return found


def test_summary_table_numbers_equal_summary_csv(report: Path) -> None:
    csv = pd.read_csv(report / "summary.csv")
    tex = (report / "latex" / "summary-reverse.tex").read_text()
    rows = table_rows(tex)
    scopes = ["in range", "beyond range"]
    assert len(rows) == csv["label"].nunique() == 4
    with_ci = [
        decimals(expected_text(m, h, int(k), 0)[0])
        for m, h, k in zip(csv["mean"], csv["ci_half"], csv["n"])
        if k > 1 and h > 0
    ]
    finest = max(with_ci, default=3)  # a cell without an interval takes the table's finest precision
    for row in rows:
        label = row[0].replace("\\_", "_")
        for scope, cell in zip(scopes, row[1:]):
            want = csv[(csv["label"] == label) & (csv["scope"] == scope)].iloc[0]
            col = csv[csv["scope"] == scope]
            inner, bold = unbold(cell)
            found = check_value(inner, want["mean"], want["ci_half"], int(want["n"]), finest)
            assert bold == (want["rank"] == 1) == (want["mean"] == col["mean"].max())
            assert (found["mark"] == "$^{*}$") == bool(want["worse"]), cell  # * = worse than the best (Holm)


def test_grid_tables_numbers_equal_cells_csv(report: Path) -> None:
    cells = pd.read_csv(report / "cells.csv")
    checked = 0
    for metric in ("test_beyond_range/token_acc", "val/loss"):
        here = cells[cells["metric"] == metric]
        name = re.sub(r"[^a-z0-9]+", "-", f"reverse-{metric}").strip("-") + ".tex"
        tex = (report / "latex" / name).read_text()
        header = table_rows("\\midrule" + tex.split("\\toprule", 1)[1].split("\\midrule", 1)[0] + "\\bottomrule")[0]
        better = here["mean"].min() if metric.endswith("loss") else here["mean"].max()
        for row in table_rows(tex):
            for position, cell in zip(header[1:], row[1:]):
                want = here[(here["attention"] == row[0]) & (here["position"] == position)].iloc[0]
                inner, bold = unbold(cell)
                check_value(inner, want["mean"], want["ci_half"], int(want["n"]), 3)
                assert bold == (want["mean"] == better)
                checked += 1
    assert checked == 8


def test_claims_table_numbers_equal_claims_csv(report: Path) -> None:
    claims = pd.read_csv(report / "claims.csv")
    rows = table_rows((report / "latex" / "claims.tex").read_text())
    assert len(rows) == len(claims) == 2
    for row, want in zip(rows, claims.to_dict("records")):
        for cell, side in ((row[3], "a"), (row[4], "b")):
            check_value(cell, want[f"{side}_mean"], want[f"{side}_ci"], int(want[f"{side}_n"]), 3)
        p = want["p_holm"]
        assert row[6] == ("\\textless{}0.001" if p < 0.001 else f"{p:.3f}") and row[7] == want["verdict"]


def pdflatex(folder: Path, name: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", name],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.skipif(
    shutil.which("pdflatex") is None or shutil.which("bibtex") is None,
    reason="pdflatex/bibtex not installed (Debian: apt-get install texlive-latex-base "
    "texlive-latex-recommended; .ci/run does it)",
)
def test_latex_compiles_and_bibtex_resolves_every_citation(report: Path, tmp_path: Path) -> None:
    work = tmp_path / "tex"
    shutil.copytree(report / "latex", work)
    shutil.copy(report / "methods.tex", work)
    shutil.copy(report / "references.bib", work)
    preamble = "\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n"
    tables = sorted(p.stem for p in work.glob("*.tex") if p.stem not in ("tables", "preview", "methods"))
    assert {"summary-reverse", "claims"} <= set(tables)
    for stem in tables:  # each table alone in a minimal preamble
        (work / f"alone-{stem}.tex").write_text(preamble + f"\\input{{{stem}}}\n\\end{{document}}\n")
        proc = pdflatex(work, f"alone-{stem}.tex")
        assert proc.returncode == 0, proc.stdout[-1500:]
    (work / "paper.tex").write_text(
        preamble + "\\input{tables}\n\\input{methods}\n"
        "\\bibliographystyle{plain}\n\\bibliography{references}\n\\end{document}\n"
    )
    assert pdflatex(work, "paper.tex").returncode == 0
    bib = subprocess.run(["bibtex", "paper"], cwd=work, capture_output=True, text=True, timeout=60)
    assert bib.returncode == 0 and "Warning--I didn't find" not in bib.stdout, bib.stdout
    assert pdflatex(work, "paper.tex").returncode == 0
    final = pdflatex(work, "paper.tex")
    assert final.returncode == 0 and "undefined" not in (work / "paper.log").read_text().lower()
    assert (work / "paper.pdf").read_bytes().startswith(b"%PDF")


# ---------------------------------------------------------------- figures


def svg_lines(svg: Path) -> dict[str, set[str]]:
    """{line id: stroke colours} of the lines the figure names (``level:rope``, ``cell:<label>``)."""
    found: dict[str, set[str]] = {}
    for group in ET.parse(svg).getroot().iter("{http://www.w3.org/2000/svg}g"):
        gid = group.get("id", "")
        if gid.startswith(("level:", "cell:")):
            for path in group.iter("{http://www.w3.org/2000/svg}path"):
                stroke = re.search(r"stroke:\s*(#[0-9a-fA-F]{6})", path.get("style", ""))
                if stroke:
                    found.setdefault(gid, set()).add(stroke.group(1).lower())
    return found


def test_every_figure_is_png_pdf_and_svg_at_the_asked_width(report: Path) -> None:
    pngs = sorted((report / "figures").glob("*.png"))
    assert len(pngs) >= 2  # the summary and the length figure (the fixture has no learning curves)
    for png in pngs:
        pdf, svg = png.with_suffix(".pdf"), png.with_suffix(".svg")
        data = pdf.read_bytes()
        assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF"), pdf
        root = ET.parse(svg).getroot()  # well-formed XML
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        assert float(root.get("width").removesuffix("pt")) == pytest.approx(3.3 * 72, abs=0.5), svg
        sizes = [float(s) for s in re.findall(r"font-size:\s*([\d.]+)px", svg.read_text())]
        assert sizes and 5 <= min(sizes) and max(sizes) <= 9, (svg, sorted(set(sizes)))


def test_one_colour_per_variant_across_the_figures(report: Path) -> None:
    """A position level has one colour in every figure; a cell drawn alone has its position's colour."""
    cells = pd.read_csv(report / "cells.csv").drop_duplicates("cell_label")
    colours: dict[str, set[str]] = {}
    for svg in (report / "figures").glob("*.svg"):
        for gid, found in svg_lines(svg).items():
            colours.setdefault(gid, set()).update(found)
    levels = {g: c for g, c in colours.items() if g.startswith("level:")}
    assert {"level:sinusoidal", "level:rope"} <= set(levels)
    assert all(len(c) == 1 for c in colours.values()), colours
    assert len({next(iter(c)) for c in levels.values()}) == len(levels)  # different levels, different colours
    safe = {c.lower() for c in OKABE_ITO}
    assert all(next(iter(c)) in safe for c in colours.values())
    drawn = [r for r in cells.itertuples() if f"cell:{r.cell_label}" in colours]
    assert len(drawn) == 4
    for r in drawn:
        assert colours[f"cell:{r.cell_label}"] == levels[f"level:{r.position}"], r.cell_label


def test_bad_figure_width_is_one_line_naming_the_option(tmp_path: Path) -> None:
    with pytest.raises(ReportError, match=r"^--figure-width 0.5 is not allowed; give inches between 1 and 20"):
        build_report([tmp_path], tmp_path / "out", figure_width=0.5)


# ---------------------------------------------------------------- references


def entries(text: str) -> dict[str, str]:
    """BibTeX entries by key, read with pybtex (a BibTeX parser that refuses malformed input)."""
    database = pytest.importorskip("pybtex.database")
    parsed = database.parse_string(text, "bibtex")
    return dict(parsed.entries)


def test_references_bib_holds_exactly_the_entries_used(report: Path) -> None:
    text = (report / "references.bib").read_text()
    keys = re.findall(r"^@\w+\{([^,]+),", text, re.M)
    assert len(keys) == len(set(keys))
    parsed = entries(text)
    expected = {
        key
        for kind, names in (
            ("attention", ["soft", "multihead"]),
            ("position", ["sinusoidal", "rope"]),
            ("task", ["reverse"]),
        )
        for name in names
        for key in REGISTRIES[kind].references(name)
    }
    # the Transformer, the t-interval, Welch, Holm, Cohen's d (comparisons, power) and TOST (the equivalence claim)
    expected |= {
        "vaswani2017attention",
        "student1908probable",
        "welch1947generalization",
        "holm1979simple",
        "cohen1988statistical",
        "schuirmann1987comparison",
    }
    assert set(parsed) == expected
    methods = (report / "methods.tex").read_text()
    cited = {k for group in re.findall(r"\\cite\{([^}]*)\}", methods) for k in group.split(",")}
    assert cited <= set(parsed) and {"shaw2018self", "press2022train"}.isdisjoint(cited)
    assert {"welch1947generalization", "schuirmann1987comparison", "luong2015effective"} <= cited


def test_methods_are_filled_from_the_runs(report: Path) -> None:
    md = (report / "methods.md").read_text()
    assert "1000 steps" in md and "batch size 32" in md and "learning rate 0.003" in md  # cell_fixtures' config
    assert "with 3 seed(s)" in md and "12 completed runs in 4 cells" in md
    assert "PyTorch 2.13.0" in md and "training lengths 2–12" in md
    assert "[@grefenstette2015learning]" in md and "[@welch1947generalization]" in md


def test_a_new_variant_brings_its_reference_into_the_report(tmp_path: Path, monkeypatch) -> None:
    from attnlab import bibliography

    monkeypatch.setattr(bibliography, "BIBLIOGRAPHY", dict(bibliography.BIBLIOGRAPHY))  # declare() adds to a copy
    bib = "@misc{throwaway2099,\n  author = {Doe, Jane},\n  title = {A Throw-away Attention},\n  year = {2099}\n}"
    ATTENTION.register("throwaway", references=bibliography.declare(bib))(ATTENTION.get("soft"))
    try:
        sweep = write_sweep(
            tmp_path / "sweep", cells={("soft", "rope"): (0.9, 0.5)}, seeds=(0, 1), attention_name="throwaway"
        )
        build_report([sweep], tmp_path / "report", figure_formats=["png"])
    finally:
        ATTENTION.unregister("throwaway")
    parsed = entries((tmp_path / "report" / "references.bib").read_text())
    assert "throwaway2099" in parsed and "bahdanau2015neural" not in parsed  # soft's papers are not throwaway's
    assert "throwaway~\\cite{throwaway2099}" in (tmp_path / "report" / "methods.tex").read_text()
    assert not list((tmp_path / "report" / "figures").glob("*.pdf"))  # --figure-formats png


def test_training_records_the_references_of_every_variant_it_used(tmp_path: Path) -> None:
    from experiments.training.single_run import train
    from tests.helpers.config import TINY, compose

    overrides = [*TINY, "attention@model.cross_attention=local", "logger=none"]
    res = train(build_spec(compose(overrides)), tmp_path / "run", overrides)
    got = {(r["registry"], r["name"]): r["bibtex"] for r in res["references"]}
    cfg = compose(overrides)
    want = {
        ("attention", cfg.attention.name),
        ("attention", "local"),
        ("position", cfg.position.name),
        ("task", cfg.task.name),
    }
    assert set(got) == want
    assert all(got[k, n] == [BIBLIOGRAPHY[key] for key in REGISTRIES[k].references(n)] for k, n in want)
