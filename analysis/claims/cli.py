"""Claims: a hypothesis written next to a sweep, tested on its results.

    python -m analysis.claims SWEEP_DIR [...] [--claims FILE]

A claim names a metric, two sides given as factor values and what it expects (its format:
``attnlab.claims``):

- ``greater`` / ``less``: mean(a) − mean(b) is above ``margin`` (below −``margin``):
  Welch's t against the margin, each direction at alpha / 2 (the two-sided 95% interval decides).
- ``equivalent``: |mean(a) − mean(b)| < ``margin``: two one-sided Welch tests (TOST, its 90% interval).
- ``ratio``: for side ``a`` alone, the mean of its metric at one length over the mean at the length
  ``over`` lies within ``bounds: [low, high]`` (either may be null): a t-test of the ratio of means
  with its delta-method standard error (TOST when both bounds are given).

A side is one cell: the runs whose factor values (or ``config.<key>`` values) match,
over seeds. A side that covers more than one cell is an error naming the keys
that still vary, never a pool. Claims come from the runs' own config (a preset's
``claims:`` key; tested on the runs that carry them) and from ``--claims FILE``
(tested on every run given).

Each claim gets a p-value for it and one against it, each wrong at most alpha of the time; the
smaller is the claim's p, Holm's correction runs over the claims of one report, and the verdict
(named with its correction) is **supported** or **contradicted** by the direction of that p when
its corrected value is below alpha, else **inconclusive**, with what it lacked. A diverged seed
scores the metric's worst value (or the mean test refuses, for a loss), every side shows its
completed / diverged / failed seeds, and Fisher's exact test compares the divergence rates. Two
sides without spread are decided by an exact permutation test. The seeds that would decide an
inconclusive claim are priced at the claim's ``min_effect`` or margin, never at the observed
difference (docs/claims.md).

A sweep run with adaptive seeds (``hydra/sweeper=adaptive``, its ``adaptive.json`` in the
sweep folder) is decided as the sweep decided it: its claims, replayed seed by seed through
the anytime-valid confidence sequence at the sweep's alpha (analysis/claims/adaptive.py),
followed by how it decided; the claims of a ``--claims FILE`` are decided beside them by the fixed-n engine,
in their own table.

Exit codes: 0 every claim supported, 1 any contradicted or inconclusive, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

import pandas as pd

from analysis.claims.evaluate import evaluate
from analysis.claims.render import FIXED_HEADING, format_text
from analysis.claims.scope import load_claims_file
from analysis.command.errors import run_cli
from analysis.command.outputs import check_out_file, writing
from attnlab.claims import ClaimError
from attnlab.prog import prog_name


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog_name("analysis.claims"), description=__doc__.split("\n")[0])
    parser.add_argument("paths", nargs="+", metavar="SWEEP", help="sweep folders, result.json files or globs")
    parser.add_argument(
        "--claims",
        default=None,
        type=Path,
        metavar="FILE",
        help="YAML file of claims (a list, or a claims: key), tested beside those the runs carry",
    )
    parser.add_argument("--csv", default=None, type=Path, help="also write the table as CSV")
    return parser


def _write_csv(results: pd.DataFrame, path: Path) -> None:
    with writing(path):
        results.to_csv(path, index=False)


def main(argv: Sequence[str] | None = None) -> int:
    from analysis.claims import adaptive
    from analysis.data.collect import collect

    args = _parser().parse_args(argv)
    shown: list[str] = []  # what the terminal gets, in order: tables and the adaptive sweep's account

    def evaluate_sweeps() -> pd.DataFrame:
        if args.csv is not None:
            check_out_file(args.csv, "--csv")  # a bad place fails before any result is read
        if args.claims is not None:
            load_claims_file(args.claims)  # a malformed file fails before any result is read
        found = adaptive.find_state(args.paths)
        runs = collect(args.paths)
        if runs.runs.empty:
            raise ClaimError(f"no readable result.json under {', '.join(args.paths)}")
        if found is not None:
            results, details = adaptive.evaluate_adaptive(runs, found[1], str(found[0]))
            shown.extend([format_text(results), adaptive.section_text(found[0], found[1], details)])
            if args.claims is not None:  # the file's claims are the user's: decided beside the sweep's, never dropped
                given = evaluate(runs, args.claims, carried=False)
                shown.append(f"{FIXED_HEADING.format(file=args.claims)}\n{format_text(given)}")
                results = pd.concat([results, given], ignore_index=True)
            return results
        results = evaluate(runs, args.claims)
        if results.empty:
            raise ClaimError("no claims: the runs carry none (a preset's claims: key) and no --claims FILE was given")
        shown.append(format_text(results))
        return results

    results, code = run_cli(evaluate_sweeps)
    if results is None:  # a user error, printed as one line
        return code
    for text in shown:
        print(text)
    if args.csv is not None:
        _, code = run_cli(lambda: _write_csv(results, args.csv))
        if code != 0:
            return code
    return 0 if (results["verdict"] == "supported").all() else 1


if __name__ == "__main__":
    sys.exit(main())
