"""The config hash: which computation a run is, the keys that do not change it left out.

In ``config``, the lowest room, because the run spec (``experiments.config.spec``) computes it once when the
config is read; result.json records it and the run folder's checks compare it (experiments/training/folder.py).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

# Keys that do not change what is computed: left out of the config hash.
HASH_EXCLUDE_PREFIXES = (
    "logger.",
    "wandb_uploads.",  # what is uploaded to W&B beside the metrics
    "progress_bar",
    "trainer.log_every_n_steps",
    "resume",
    "ckpt_path",  # which checkpoint of the same computation a run continues from
    "name",
    "fail_at_step",
    "num_threads",
    "jobs_per_gpu",
    "claims",
    "ensemble.",
    "trial.",  # the study trial the run reports to (experiments/training/pruning.py)
)


def config_hash(flat_config: dict[str, Any]) -> str:
    kept = {k: v for k, v in flat_config.items() if not k.startswith(HASH_EXCLUDE_PREFIXES)}
    blob = json.dumps(kept, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]
