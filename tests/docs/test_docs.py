"""The README and docs/ as a reader meets them: links that lead somewhere, commands and imports that work as
printed, and no measured figure left in a yaml comment (figures live in docs/, where a command regenerates them).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import shlex
from pathlib import Path

import pytest

from tests.helpers.config import compose
from tests.helpers.paths import CONF, ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PROJECT = ("variants", "experiments", "analysis", "attnlab")


def doc_id(path: Path) -> str:
    return str(path.relative_to(ROOT))


def code_blocks(text: str, language: str) -> list[str]:
    """The fenced blocks of one language ('' for a plain ``` block), indented fences too, read fence by fence."""
    blocks: list[tuple[str, list[str]]] = []
    open_block: list[str] | None = None
    for line in text.splitlines():
        fence = line.strip().startswith("```")
        if open_block is None and fence:
            open_block = []
            blocks.append((line.strip()[3:].strip(), open_block))
        elif open_block is not None and line.strip() == "```":
            open_block = None
        elif open_block is not None:
            open_block.append(line.strip() if language == "" else line)
    assert open_block is None, "a code block is never closed"
    return ["\n".join(lines) + "\n" for lang, lines in blocks if lang == language]


# ---------------------------------------------------------------- links


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (hyphens kept), spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"^ *```.*?^ *```", "", path.read_text(), flags=re.S | re.M)
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.M)}


def test_slug_matches_githubs_anchors() -> None:
    assert slug("Claims: a hypothesis next to a sweep") == "claims-a-hypothesis-next-to-a-sweep"
    assert slug("result.json (schema 1)") == "resultjson-schema-1"
    assert slug("Layers and models (`python -m experiments.bench`)") == "layers-and-models-python--m-experimentsbench"


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_every_relative_link_points_at_an_existing_file_and_heading(doc: Path) -> None:
    text = re.sub(r"^ *```.*?^ *```", "", doc.read_text(), flags=re.S | re.M)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        path = (doc.parent / file).resolve() if file else doc
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target}: no heading with that anchor in {path.name}")
    assert not broken, f"{doc_id(doc)}: " + "; ".join(broken)


@pytest.mark.parametrize("doc", DOCS, ids=doc_id)
def test_every_project_path_named_in_backticks_exists(doc: Path) -> None:
    """`conf/trainer/cpu.yaml`, `docs/hard_relative.md`: named from the repository root.
    A path that heads a code block (`variants/attention/cosine.py`:) is a file the example has the reader write."""
    text = doc.read_text()
    folders = "variants|experiments|analysis|attnlab|conf|tests|docs|hydra_plugins"
    named = re.findall(rf"`((?:{folders})/[\w/.\-]*)`(?!:\n)", text)
    # attnlab/cell and attnlab/factors are the W&B config keys a run carries (experiments/record/wandb_run.py)
    wandb_keys = {"attnlab/cell", "attnlab/factors"}
    missing = sorted({p for p in named if p not in wandb_keys and not (ROOT / p.rstrip("/")).exists()})
    assert not missing, f"{doc_id(doc)} names paths that do not exist: {missing}"


# ---------------------------------------------------------------- commands and imports as printed


def printed_commands(doc: Path) -> list[list[str]]:
    """Every ``python -m ...`` line of the doc's plain code blocks, continuation lines joined, comments dropped.
    Left out: lines shown failing on purpose (``$ ``), elided ones (``...``) and synopses (``[--option]``)."""
    found = []
    for block in code_blocks(doc.read_text(), ""):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if not line.startswith("python -m ") or "..." in line or "…" in line:
                continue
            argv = shlex.split(line, comments=True)
            if any(arg.startswith("[") for arg in argv):
                continue
            found.append(argv[2:])
    return found


COMMANDS = [(doc, argv) for doc in DOCS for argv in printed_commands(doc)]


def test_the_docs_print_commands() -> None:
    modules = {argv[0] for _, argv in COMMANDS}
    assert {"experiments.train", "analysis.report", "analysis.claims", "experiments.bench"} <= modules


def one_cell(overrides: list[str]) -> list[str]:
    """A multirun's overrides with each sweep replaced by its first value, as the cell the sweep starts with."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import Glob

    cell = []
    for text, override in zip(overrides, OverridesParser.create().parse_overrides(overrides)):
        if not override.is_sweep_override():
            cell.append(text)
        elif isinstance(override.value(), Glob):
            group = CONF / override.get_key_element()
            names = sorted(p.stem for p in group.glob("*.yaml"))
            chosen = override.value().filter(names)
            assert chosen, f"{text} matches no option of {group.relative_to(ROOT)}"
            cell.append(f"{override.get_key_element()}={chosen[0]}")
        else:
            cell.append(f"{override.get_key_element()}={next(iter(override.sweep_string_iterator()))}")
    return cell


def argparse_parser(module: str):
    if module == "experiments.bench":
        from experiments.bench import build_parser

        return build_parser()
    if module == "analysis.report":
        from analysis.report.build import _parser

        return _parser()
    if module == "analysis.claims":
        from analysis.claims.cli import _parser

        return _parser()
    return None


@pytest.mark.parametrize(("doc", "argv"), COMMANDS, ids=[f"{doc_id(d)}: {' '.join(a)[:80]}" for d, a in COMMANDS])
def test_printed_command_is_accepted(doc: Path, argv: list[str]) -> None:
    """Training commands compose (every group option and key exists; a sweep as its first cell); the commands
    with an argument parser parse; every other module exists."""
    module, args = argv[0], argv[1:]
    assert importlib.util.find_spec(module) is not None, f"python -m {module}: no such module"
    if module == "experiments.train":
        compose(one_cell([a for a in args if a not in ("-m", "--multirun")]))
    elif (parser := argparse_parser(module)) is not None:
        parser.parse_args(args)  # exits (SystemExit 2) on an unknown option or a bad value


def project_imports(doc: Path) -> list[tuple[str, list[str]]]:
    found = []
    for block in code_blocks(doc.read_text(), "python"):
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PROJECT:
                found.append((node.module, [a.name for a in node.names]))
            elif isinstance(node, ast.Import):
                found += [(a.name, []) for a in node.names if a.name.split(".")[0] in PROJECT]
    return found


IMPORTS = [(doc, module, names) for doc in DOCS for module, names in project_imports(doc)]


@pytest.mark.parametrize(("doc", "module", "names"), IMPORTS, ids=[f"{doc_id(d)}: {m}" for d, m, _ in IMPORTS])
def test_printed_import_works(doc: Path, module: str, names: list[str]) -> None:
    imported = importlib.import_module(module)
    for name in names:
        assert hasattr(imported, name) or importlib.util.find_spec(f"{module}.{name}") is not None, (
            f"{doc_id(doc)}: from {module} import {name} fails"
        )


# ---------------------------------------------------------------- no measured figures in yaml comments

NUMBER = r"\d[\d,]*(?:\.\d+)?"
DECIMAL = r"\d*\.\d+"
METRIC = r"(?:acc|accuracy|loss|bleu|chrf|ppl|perplexity|bpc|mfu)"
# Each pattern is a way a measured result reads; a preset's duration ("about 5 minutes") and settings
# ("decays to 0.1 x lr", "margin: 1.0") are none of them.
MEASURED = [
    re.compile(rf"\bmeasured\b[^.;]*?{NUMBER}", re.I),  # "measured 25 ms/step"
    re.compile(rf"{NUMBER}\s*(?:ms|milliseconds)\b", re.I),  # step times
    # "7% of the test time"
    re.compile(rf"{NUMBER}\s*%\s*(?:of\s+(?:the\s+)?(?:\w+\s+)?(?:time|cost)|faster|slower|mfu)", re.I),
    re.compile(rf"{NUMBER}\s*(?:tokens?|tok)\s*(?:/\s*s\b|per second)", re.I),  # throughput
    re.compile(rf"\b{METRIC}\w*\b[^.;:]{{0,20}}?{DECIMAL}", re.I),  # "token accuracy 0.998", "loss of 1.88"
    re.compile(rf"{DECIMAL}\s*(?:\w+\s+){{0,2}}?{METRIC}\b", re.I),  # "0.9 BLEU worse", "25.8 validation loss"
    re.compile(rf"\bp\s*[=<]\s*{DECIMAL}"),  # "p = 0.003"
    re.compile(rf"{DECIMAL}\s*(?:vs\.?|versus|against|instead of)\s*{DECIMAL}", re.I),  # "1.947 instead of 1.83"
    re.compile(rf"\btakes?\b[^.;]*?{NUMBER}\s*(?:s|sec|seconds|CPU-s)\b", re.I),  # "take 91 s" (seconds: a measurement)
]


def yaml_comments(path: Path) -> str:
    """The comments of a yaml file, joined into one text per run of comment lines (a figure may wrap)."""
    runs, current = [], []
    for line in path.read_text().splitlines():
        match = re.search(r"(?:^|\s)#(.*)$", line)
        if match and "'" not in line[: match.start()] and '"' not in line[: match.start()]:
            current.append(match.group(1).strip())
        elif current:
            runs.append(" ".join(current))
            current = []
    runs.append(" ".join(current))
    return "\n".join(r for r in runs if r)


def measured_figures(text: str) -> list[str]:
    return [m.group(0) for pattern in MEASURED for m in pattern.finditer(text)]


@pytest.mark.parametrize(
    "comment",
    [
        "# Measured: at the training lengths the three reach token accuracy 0.998, 1.000, 0.851",
        "# doubles the CPU time (measured 25 ms/step either way)",
        "# a bounded cost: 3-7% of the test time on the quick grid",
        "# rope falls to 0.36, significantly worse (Welch, Holm, p = 0.003)",
        "# nanoGPT reports a validation loss of 1.88 nats per character",
        "# a single head is 0.9 BLEU worse than 8",
        "# The grid and report take 91 s on 2 idle cores",
        "# 5,552 tokens/s on the quick cell",
        "# the scaled convention ends at 1.947 val loss",
        "# 38% MFU on one H100",
        "# with the paper's convention the same budget ends at 1.947 instead of 1.83",
    ],
)
def test_a_planted_measured_figure_is_found(comment: str, tmp_path: Path) -> None:
    planted = tmp_path / "preset.yaml"
    planted.write_text(f"# @package _global_\n{comment}\nname: x\n")
    assert measured_figures(yaml_comments(planted)), comment


@pytest.mark.parametrize(
    "comment",
    [
        "# 4 attention types x 3 position encodings, about 5 minutes on 2 CPU cores (half that with two jobs)",
        "# 20 cells, ~10 minutes on 2 CPU cores with two jobs at a time",
        "# decays to 0.1 x lr: the last steps settle instead of bouncing",
        "# AdamW lr 1e-3 -> 1e-4 cosine after 100 warm-up steps, betas (0.9, 0.99), weight decay 0.1",
        "# a failed or diverged trial reports 1e9 instead of stopping the study",
        "# What its report shows: docs/report.md",
        "# 512 held-out windows over the same last 10% of the file",
    ],
)
def test_a_purpose_or_a_duration_is_no_measured_figure(comment: str, tmp_path: Path) -> None:
    planted = tmp_path / "preset.yaml"
    planted.write_text(f"# @package _global_\n{comment}\nname: x\n")
    assert not measured_figures(yaml_comments(planted)), measured_figures(yaml_comments(planted))


@pytest.mark.parametrize("path", sorted(CONF.rglob("*.yaml")), ids=lambda p: str(p.relative_to(CONF)))
def test_no_yaml_comment_holds_a_measured_figure(path: Path) -> None:
    """A preset's comment says what it is for and how long it takes; what it measured goes to docs/."""
    found = measured_figures(yaml_comments(path))
    assert not found, f"{path.relative_to(ROOT)}: measured figures in comments {found}; move them to docs/"


# ---------------------------------------------------------------- docs/configuration.md's table of config groups


def config_table() -> dict[str, str]:
    text = (ROOT / "docs" / "configuration.md").read_text()
    section = text[text.index("## Configuration\n") :]
    section = section[: section.index("\n## ", 1)]
    rows = re.findall(r"^\| (`[^|]+`) \| (.+) \|$", section, re.M)
    return {name: options for names, options in rows for name in re.findall(r"`([^`]+)`", names)}


def test_the_configuration_table_names_every_group_and_only_options_that_exist() -> None:
    table = config_table()
    groups = {p.name for p in CONF.iterdir() if p.is_dir() and p.name not in ("hydra", "__pycache__")}
    assert groups | {"hydra/launcher"} <= set(table), f"groups missing from the table: {groups - set(table)}"
    for group in ("task", "model", "trainer", "experiment", "hparams_search", "callbacks", "logger"):
        if group not in table:
            continue
        named = [o for o in re.findall(r"`([\w/]+)`", table[group]) if not o.startswith(group)]
        missing = [o for o in named if not (CONF / group / f"{o}.yaml").exists()]
        assert not missing, f"docs/configuration.md's {group} row names options with no conf/{group}/ file: {missing}"
