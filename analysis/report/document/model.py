"""A tiny document model rendered twice: to Markdown and to one self-contained HTML file.

Report code builds sections of plain-text blocks; only the renderers know the
output syntax. That puts escaping in one place: every string (variant names,
errors, overrides, file names) passes through ``html.escape`` on its way into
HTML, so a hostile run name shows as text. Figures are embedded as base64
``data:`` URIs and the CSS is inline: the HTML references nothing outside itself.
"""

from __future__ import annotations

import base64
import html
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union


@dataclass
class Cell:
    """A table cell; ``best`` marks the winning value, ``kind`` a gap (failed, diverged, missing ...)."""

    text: str
    best: bool = False
    kind: str = ""


@dataclass
class Table:
    header: list[str]
    rows: list[list[Union[Cell, str]]]
    caption: str = ""


@dataclass
class Paragraph:
    text: str
    kind: str = ""  # "note" renders as a highlighted notice


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Code:
    text: str


@dataclass
class Figure:
    path: Path
    caption: str


@dataclass
class Row:
    """Columns side by side in HTML where the page is wide enough (stacked when narrow); one after another in
    Markdown. A column is a block or a list of blocks."""

    blocks: list[Union["Block", list["Block"]]]


def _column(item: Union["Block", list["Block"]]) -> list["Block"]:
    return list(item) if isinstance(item, list) else [item]


Block = Union[Table, Paragraph, Bullets, Code, Figure, Row, "Section"]


@dataclass
class Section:
    """``fold``: rendered as a closed ``<details>`` in HTML, opened on demand; Markdown shows it as is."""

    title: str
    blocks: list[Block] = field(default_factory=list)
    level: int = 2
    fold: bool = False

    def add(self, *blocks: Block) -> "Section":
        self.blocks.extend(blocks)
        return self


@dataclass
class Document:
    """``lead``: the sections a reader sees first (the summary), before the contents list and ``sections``."""

    title: str
    sections: list[Section] = field(default_factory=list)
    subtitle: str = ""
    lead: list[Section] = field(default_factory=list)


def fold(sections: list[Section], max_level: int = 3) -> list[Section]:
    """Mark these sections and their subsections down to ``max_level`` as folded; returns ``sections``."""
    for section in sections:
        if section.level <= max_level:
            section.fold = True
        fold([b for b in section.blocks if isinstance(b, Section)], max_level)
    return sections


# ---------------------------------------------------------------- numbers


def fmt(x: float) -> str:
    """A compact number for tables: 3 decimals for metric-sized values, fewer for large ones."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    ax = abs(x)
    if ax >= 1000:
        return f"{x:,.0f}"
    if ax >= 100:
        return f"{x:.1f}"
    if ax >= 0.01 or ax == 0:
        return f"{x:.3f}"
    if ax >= 1e-4:
        return f"{x:.4f}"  # small spreads and differences stay readable next to 3-decimal means
    return f"{x:.2e}"


def fmt_p(p: float) -> str:
    if p is None or not math.isfinite(p):
        return "—"
    return "<0.001" if p < 0.001 else f"{p:.3f}"


# ---------------------------------------------------------------- Markdown


def _md_text(text: str) -> str:
    """Markdown-safe inline text: no raw HTML, no line breaks, no table-breaking pipes."""
    text = " ".join(str(text).split())
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")


def _md_cell(cell: Union[Cell, str]) -> str:
    if isinstance(cell, str):
        return _md_text(cell)
    text = _md_text(cell.text)
    return f"**{text}** ★" if cell.best else text


def _md_block(block: Block, root: Path) -> str:
    if isinstance(block, Section):
        return _md_section(block, root)
    if isinstance(block, Row):
        return "\n\n".join(_md_block(b, root) for column in block.blocks for b in _column(column))
    if isinstance(block, Paragraph):
        text = _md_text(block.text)
        if block.kind == "answer":
            return f"**{text}**"
        return f"> **Note:** {text}" if block.kind == "note" else text
    if isinstance(block, Bullets):
        return "\n".join(f"- {_md_text(item)}" for item in block.items)
    if isinstance(block, Code):
        fence = "````" if "```" in block.text else "```"
        return f"{fence}\n{block.text}\n{fence}"
    if isinstance(block, Figure):
        try:
            target = block.path.relative_to(root).as_posix()
        except ValueError:
            target = block.path.as_posix()
        return f"![{_md_text(block.caption)}]({target.replace(' ', '%20')})\n\n*{_md_text(block.caption)}*"
    if isinstance(block, Table):
        lines = []
        if block.caption:
            lines += [f"*{_md_text(block.caption)}*", ""]
        lines.append("| " + " | ".join(_md_text(h) for h in block.header) + " |")
        lines.append("|" + "|".join("---" for _ in block.header) + "|")
        lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in block.rows]
        return "\n".join(lines)
    raise TypeError(f"unknown block {type(block).__name__}")


def _md_section(section: Section, root: Path) -> str:
    parts = [f"{'#' * section.level} {_md_text(section.title)}"]
    parts += [_md_block(b, root) for b in section.blocks]
    return "\n\n".join(parts)


def to_markdown(doc: Document, root: Path) -> str:
    """Markdown with figure links relative to ``root`` (the report folder)."""
    parts = [f"# {_md_text(doc.title)}"]
    if doc.subtitle:
        parts.append(_md_text(doc.subtitle))
    parts += [_md_section(s, root) for s in [*doc.lead, *doc.sections]]
    return "\n\n".join(parts) + "\n"


# ---------------------------------------------------------------- HTML

CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #222;
       max-width: 1180px; margin: 2em auto; padding: 0 1.5em; line-height: 1.45; }
h1 { border-bottom: 2px solid #444; padding-bottom: .2em; }
h2 { border-bottom: 1px solid #ccc; padding-bottom: .15em; margin-top: 2em; }
table { border-collapse: collapse; margin: .6em 0 1.4em; font-size: 14px; }
th, td { border: 1px solid #c8c8c8; padding: .25em .6em; text-align: right; vertical-align: top; }
th { background: #f0f0f0; }
td:first-child, th:first-child { text-align: left; }
td.text { text-align: left; word-break: break-word; max-width: 38em; }
td.best { background: #e3f4e1; font-weight: bold; }
td.failed { background: #fbe3e3; color: #8a1f1f; }
td.diverged { background: #fff1d6; color: #7a4b00; }
td.missing { background: #eeeeee; color: #666; font-style: italic; }
td.oom { background: #fff1d6; color: #7a4b00; font-style: italic; }
td.tie { background: #f1f9ef; }
caption { caption-side: top; text-align: left; font-style: italic; padding-bottom: .3em; }
.note { background: #fff8d8; border-left: 4px solid #e0b400; padding: .4em .8em; }
p, li { overflow-wrap: anywhere; }  /* a run folder's path has no spaces: break it, never widen the page */
figure { margin: 1em 0 2em; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption { font-style: italic; color: #555; }
pre { background: #f6f6f6; padding: .6em; overflow-x: auto; white-space: pre-wrap; word-break: break-all; }
nav ul { columns: 2; }
.subtitle { color: #555; margin-top: -.4em; }
.scroll { overflow-x: auto; max-width: 100%; }
.row { display: flex; flex-wrap: wrap; gap: 0 1.5em; align-items: flex-start; }
.row > * { flex: 1 1 360px; min-width: 0; }
.row figure { margin-top: .6em; }
.answer { font-size: 1.08em; }
.small { font-size: .88em; color: #444; }
section.lead h2 { margin-top: 1em; }
details { border-top: 1px solid #ddd; }
details > summary { cursor: pointer; }
details > summary > h2, details > summary > h3, details > summary > h4 { display: inline; border: 0; }
details > summary > h2 { font-size: 1.35em; }
details details { margin-left: .4em; }
details[open] > summary { margin-bottom: .6em; }
@media (max-width: 600px) {
  body { margin: 1em auto; padding: 0 .6em; }
  table { font-size: 13px; }
  th, td { padding: .2em .35em; }
}
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _slug(title: str, used: set[str]) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "section"
    slug, k = base, 2
    while slug in used:
        slug, k = f"{base}-{k}", k + 1
    used.add(slug)
    return slug


def _html_cell(cell: Union[Cell, str], tag: str = "td") -> str:
    if isinstance(cell, str):
        return f'<{tag} class="text">{_e(cell)}</{tag}>' if tag == "td" else f"<{tag}>{_e(cell)}</{tag}>"
    classes = " ".join(c for c in ("best" if cell.best else "", cell.kind) if c)
    attr = f' class="{_e(classes)}"' if classes else ""
    text = f"<strong>{_e(cell.text)}</strong> ★" if cell.best else _e(cell.text)
    return f"<{tag}{attr}>{text}</{tag}>"


def _data_uri(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")


def _anchors(
    sections: list[Section], used: set[str] | None = None, out: dict[int, str] | None = None
) -> dict[int, str]:
    """A unique anchor per section (keyed by object id), assigned once in document order."""
    used = set() if used is None else used
    out = {} if out is None else out
    for section in sections:
        out[id(section)] = _slug(section.title, used)
        _anchors([b for b in section.blocks if isinstance(b, Section)], used, out)
    return out


def _html_block(block: Block, anchors: dict[int, str]) -> str:
    if isinstance(block, Section):
        return _html_section(block, anchors)
    if isinstance(block, Row):
        columns = ("<div>" + "".join(_html_block(b, anchors) for b in _column(c)) + "</div>" for c in block.blocks)
        return '<div class="row">' + "".join(columns) + "</div>"
    if isinstance(block, Paragraph):
        cls = f' class="{_e(block.kind)}"' if block.kind else ""
        return f"<p{cls}>{_e(block.text)}</p>"
    if isinstance(block, Bullets):
        return "<ul>" + "".join(f"<li>{_e(i)}</li>" for i in block.items) + "</ul>"
    if isinstance(block, Code):
        return f"<pre>{_e(block.text)}</pre>"
    if isinstance(block, Figure):
        return (
            f'<figure><img src="{_data_uri(block.path)}" alt="{_e(block.caption)}">'
            f"<figcaption>{_e(block.caption)}</figcaption></figure>"
        )
    if isinstance(block, Table):
        caption = f"<caption>{_e(block.caption)}</caption>" if block.caption else ""
        head = "<tr>" + "".join(_html_cell(h, "th") for h in block.header) + "</tr>"
        body = "".join("<tr>" + "".join(_html_cell(c) for c in row) + "</tr>" for row in block.rows)
        # A wide table scrolls inside its own box, so a narrow window never scrolls the whole page sideways.
        return f'<div class="scroll"><table>{caption}<thead>{head}</thead><tbody>{body}</tbody></table></div>'
    raise TypeError(f"unknown block {type(block).__name__}")


def _html_section(section: Section, anchors: dict[int, str], cls: str = "") -> str:
    level = min(section.level, 6)
    inner = "\n".join(_html_block(b, anchors) for b in section.blocks)
    heading = f"<h{level}>{_e(section.title)}</h{level}>"
    if section.fold:
        return f'<details id="{anchors[id(section)]}"><summary>{heading}</summary>\n{inner}</details>'
    attr = f' class="{cls}"' if cls else ""
    return f'<section id="{anchors[id(section)]}"{attr}>{heading}\n{inner}</section>'


def to_html(doc: Document) -> str:
    """One HTML file with inline CSS and embedded figures: the lead sections, a contents list, then the rest."""
    anchors = _anchors([*doc.lead, *doc.sections])
    lead = "\n".join(_html_section(s, anchors, "lead") for s in doc.lead)
    body = "\n".join(_html_section(s, anchors) for s in doc.sections)
    toc = "".join(f'<li><a href="#{anchors[id(s)]}">{_e(s.title)}</a></li>' for s in doc.sections)
    subtitle = f'<p class="subtitle">{_e(doc.subtitle)}</p>' if doc.subtitle else ""
    # The viewport line makes phones lay the page out at their own width instead of a zoomed-out desktop one.
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(doc.title)}</title><style>{CSS}</style></head><body>\n"
        f'<h1>{_e(doc.title)}</h1>{subtitle}\n{lead}\n<nav><p class="small">The details, folded: open a '
        f"heading to read it.</p><ul>{toc}</ul></nav>\n{body}\n</body></html>\n"
    )
