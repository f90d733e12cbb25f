"""The preflight's refusals, each one line: its errors, and any library error folded into one line."""

from __future__ import annotations

from pathlib import Path


class PreflightError(ValueError):
    """A command line that cannot run; the message is one line."""


class AlreadyCompleted(Exception):
    """A single run whose folder holds its completed result and cannot be written (a read-only file system):
    nothing to do, and Hydra's log file and config record could not be opened there. The message is one line."""

    def __init__(self, result_file: Path, result: dict) -> None:
        super().__init__(f"already completed with the same config ({result_file}); skipped (its folder is read-only)")
        self.result = result


def one_line(err: BaseException) -> str:
    """An error (Hydra's or OmegaConf's, several lines with their full key) as one line naming the key."""
    text = str(err)
    if err.__cause__ is not None and str(err.__cause__) not in text:
        text = f"{text}: {err.__cause__}"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    full_key = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("full_key:")), None)
    noise = ("full_key:", "object_type", "reference_type", "Set the environment")
    kept = [ln for ln in lines if not ln.startswith(noise)]
    message = "; ".join(kept) or type(err).__name__
    return f"{message} (key: {full_key})" if full_key and full_key not in message else message
