"""``python -m analysis.report.tuned SWEEP_DIR [--out DIR]``: a tuned sweep's comparison alone, as tuned.md.

The section itself (``hparams_search=tuned``: each cell at its own best configuration against the shared
defaults) is ``analysis.report.sections.tuned``; the full report shows it too.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from analysis.report.document.model import Document, Paragraph, to_markdown
from analysis.report.figures.study_plots import dashboard_command, storage_of
from analysis.report.sections.tuned import RECORD, TunedError, tuned_section


def main(argv: list[str] | None = None) -> None:
    """``python -m analysis.report.tuned SWEEP_DIR --out DIR``: the tuned comparison as Markdown."""
    parser = argparse.ArgumentParser(prog="python -m analysis.report.tuned", description=main.__doc__)
    parser.add_argument("sweep_dir")
    parser.add_argument("--out", default=None, help="folder for tuned.md and its figure (default: SWEEP_DIR/report)")
    args = parser.parse_args(argv)
    out = Path(args.out or Path(args.sweep_dir) / "report")
    try:
        section = tuned_section(args.sweep_dir, out)
    except TunedError as err:
        print(f"attnlab: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    (out / "tuned.md").write_text(to_markdown(Document("Tuned comparison", [section]), out))
    first = section.blocks[0]
    if isinstance(first, Paragraph):
        print(first.text)  # the ranking sentence
    record = json.loads((Path(args.sweep_dir) / RECORD).read_text())  # read whole by tuned_section above
    print(dashboard_command(storage_of(Path(args.sweep_dir), record.get("storage"))))  # the studies, live
    print(out / "tuned.md")


if __name__ == "__main__":
    main()
