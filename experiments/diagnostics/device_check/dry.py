"""``--dry-run``: compose every command a run would start and check it with the project's own checks, on CPU.

A training command goes through ``experiments.app.preflight`` (the Hydra overrides composed, every sweep
value's cell checked, a renamed or unknown key refused in one line); a bench command through the bench's
own parser and argument checks; flex_check and the device check's modules through their parsers. So a
key that moves (``trainer.progress_bar``, ``resume=false``) fails here, not on a lent GPU.
"""

from __future__ import annotations

import contextlib
import importlib
import io

from experiments.diagnostics.device_check.plan import Command, Section


def problem(command: Command) -> str | None:
    """Why ``command`` would not start as composed, in one line, or None."""
    args = list(command.argv[1:])
    try:
        if command.kind == "train":
            from experiments.app.preflight import PreflightError, preflight

            try:
                preflight(args)
            except PreflightError as err:
                return str(err)
            return None
        if command.kind == "bench":
            from experiments.bench import build_parser, check_arguments

            check_arguments(_parsed(build_parser(), args))
            return None
        module = importlib.import_module(command.parser or command.argv[0])
        _parsed(module.build_parser(), args)
        return None
    except _Refused as err:
        return str(err)
    except Exception as err:  # noqa: BLE001 - whatever stops a command here would stop it on the device
        return f"{type(err).__name__}: {(str(err).splitlines() or [''])[0]}"


class _Refused(Exception):
    """An argument parser's refusal (argparse exits; here it is one line)."""


def _parsed(parser, args: list[str]):
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            return parser.parse_args(args)
    except SystemExit:
        lines = [line for line in errors.getvalue().splitlines() if line.strip()]
        raise _Refused(lines[-1] if lines else f"{parser.prog} refused {args}") from None


def dry_run(sections: list[Section]) -> list[dict[str, object]]:
    """One row per command: its section, its line, and why it would not start (None when it would)."""
    return [
        {"section": section.name, "command": " ".join(command.argv), "problem": problem(command)}
        for section in sections
        for command in section.commands
    ]
