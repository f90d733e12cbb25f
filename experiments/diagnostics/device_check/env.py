"""``python -m experiments.diagnostics.device_check.env OUT``: the machine and packages of a device pass, as JSON."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from typing import Any


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m experiments.diagnostics.device_check.env", description=__doc__)
    parser.add_argument("out", help="the JSON file to write")
    return parser


def environment() -> dict[str, Any]:
    import torch
    import torch._inductor.config as inductor_config

    from variants.kernels import xformers_unavailable

    found: dict[str, Any] = {
        "python": sys.version.split()[0],
        "cpus_usable": len(os.sched_getaffinity(0)),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "inductor_compile_threads": inductor_config.compile_threads,
    }
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        found.update(
            gpu=torch.cuda.get_device_name(0),
            capability=list(torch.cuda.get_device_capability(0)),
            sms=props.multi_processor_count,
            memory_gib=round(props.total_memory / 2**30, 1),
            smem_per_block_optin=getattr(props, "shared_memory_per_block_optin", None),
        )
    for name in ("triton", "lightning", "hydra", "omegaconf", "joblib", "torchmetrics"):
        try:
            found[name] = importlib.import_module(name).__version__
        except Exception as err:  # noqa: BLE001 - a missing package is a finding, not a failure
            found[name] = f"missing: {type(err).__name__}"
    found["xformers"] = xformers_unavailable() or "usable"
    return found


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    found = environment()
    with open(args.out, "w") as f:
        json.dump(found, f, indent=1)
    print(json.dumps(found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
