"""``python -m experiments.device_check A|B [--dry-run]``: the command line of the device check."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from experiments.diagnostics.device_check import MAX_FILES
from experiments.diagnostics.device_check.plan import RUNS, Knobs, sections_of


def build_parser() -> argparse.ArgumentParser:
    from experiments.diagnostics import device_check

    parser = argparse.ArgumentParser(
        prog="python -m experiments.device_check",
        description=device_check.__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("run", choices=sorted(RUNS), help="A: kernels; B: training (call B right after A)")
    parser.add_argument("--out", type=Path, default=None, help="what comes back ($OUT, else ./device-check-out)")
    parser.add_argument("--work", type=Path, default=None, help="the sections' folder (default /tmp/dc/RUN)")
    parser.add_argument("--deadline", type=int, default=400, help="seconds for the whole run")
    parser.add_argument("--k", type=int, default=4, help="quick-grid cells at a time on the GPU")
    parser.add_argument("--grid-steps", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--ensemble-seeds", type=int, default=8)
    parser.add_argument("--ensemble-steps", type=int, default=200)
    parser.add_argument("--dry-run", action="store_true", help="compose and preflight every command; run nothing")
    return parser


def main(argv: list[str] | None = None) -> int:
    import os

    args = build_parser().parse_args(argv)
    for flag in ("deadline", "k", "ensemble_seeds", "ensemble_steps"):
        if getattr(args, flag) < 1:
            raise SystemExit(f"device_check: --{flag.replace('_', '-')}={getattr(args, flag)} must be >= 1")
    out = args.out or Path(os.environ.get("OUT") or "device-check-out")
    work = args.work or (Path(tempfile.mkdtemp(prefix="dc-dry-")) if args.dry_run else Path("/tmp/dc") / args.run)
    knobs = Knobs(
        work=work.resolve(),
        deadline_s=args.deadline,
        k=args.k,
        grid_steps=tuple(args.grid_steps),
        ensemble_seeds=args.ensemble_seeds,
        ensemble_steps=args.ensemble_steps,
    )
    sections = sections_of(args.run, knobs)
    if args.dry_run:
        from experiments.diagnostics.device_check.dry import dry_run

        rows = dry_run(sections)
        bad = [r for r in rows if r["problem"]]
        out.mkdir(parents=True, exist_ok=True)
        lines = [f"device check run {args.run}, dry run: {len(rows)} commands, {len(bad)} refused"]
        lines += [f"  {'REFUSED' if r['problem'] else 'ok':7} {r['section']:18} {r['command']}" for r in rows]
        lines += [f"  {r['section']}: {r['problem']}" for r in bad]
        (out / "summary.json").write_text(json.dumps({"run": args.run, "dry_run": True, "commands": rows}, indent=1))
        (out / "summary.txt").write_text("\n".join(lines) + "\n")
        print("\n".join(lines))
        return 1 if bad else 0
    from experiments.diagnostics.device_check.run import run

    code = run(args.run, sections, knobs, out)
    left = sorted(p.name for p in out.iterdir())
    if len(left) > MAX_FILES:
        print(f"device_check: {len(left)} files under {out}, more than the {MAX_FILES} that come back", file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
