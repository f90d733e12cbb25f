"""A command ended by ``quick_exit`` looks, from outside, as the interpreter's own end of it.

The reference is the interpreter itself: each scenario's ``main`` runs once as a plain script (``main()`` then
the interpreter's exit) and once through ``run_then_exit``; the exit status, stdout, stderr's last line and the
files left behind must be the same. No torch here: the scenarios are what a command's end relies on.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from experiments.app.quick_exit import exit_status
from tests.helpers.paths import ROOT

SCENARIOS = {
    "returns": "pass",
    "exits with a code": "sys.exit(3)",
    "exits with a message": "sys.exit('stopped: no data')",
    "exits with None": "sys.exit(None)",
    # a non-daemon thread still working when main returns is waited for
    "leaves a thread working": """
        def late():
            time.sleep(0.3)
            (OUT / "thread").write_text("done")
            print("thread done")
        threading.Thread(target=late).start()
    """,
    # an atexit handler runs, after the thread: the interpreter's order
    "registers an exit handler": """
        atexit.register(lambda: ((OUT / "atexit").write_text("ran"), print("handler ran")))
        print("main done")
    """,
    # buffered output on a pipe, without a newline or a flush
    "leaves output buffered": """
        sys.stdout.write("no newline, no flush")
        sys.stderr.write("to stderr without newline")
    """,
    # logging's handlers are flushed and closed at exit
    "logs to a file": """
        handler = logging.StreamHandler(open(OUT / "log.txt", "w"))
        logging.getLogger("x").addHandler(handler)
        logging.getLogger("x").warning("logged")
    """,
    # a pool's pending work is finished: threading's shutdown hooks tell its workers to stop once idle
    "leaves a thread pool": """
        pool = concurrent.futures.ThreadPoolExecutor(1)
        pool.submit(lambda: (time.sleep(0.2), (OUT / "pool").write_text("ran")))
    """,
    # a temporary folder still open is deleted (weakref.finalize's exit handler)
    "leaves a temporary folder": """
        KEEP.append(tempfile.TemporaryDirectory(dir=OUT))
        (Path(KEEP[0].name) / "f").write_text("x")
    """,
    "raises": "raise RuntimeError('broken')",
    "is interrupted": "raise KeyboardInterrupt",
}

PRELUDE = """
import atexit, concurrent.futures, logging, sys, tempfile, threading, time
from pathlib import Path
OUT = Path(sys.argv[1])
KEEP = []
def main():
"""


def _script(body: str, quick: bool) -> str:
    ending = "from experiments.app.quick_exit import run_then_exit\nrun_then_exit(main)\n" if quick else "main()\n"
    return PRELUDE + textwrap.indent(textwrap.dedent(body).strip() or "pass", "    ") + "\n" + ending


def _outcome(tmp_path: Path, name: str, body: str, quick: bool) -> tuple:
    out = tmp_path / f"{name.replace(' ', '_')}_{'quick' if quick else 'plain'}"
    out.mkdir()
    script = out.parent / f"{out.name}.py"
    script.write_text(_script(body, quick))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # stdout on a pipe is block-buffered
    done = subprocess.run(
        [sys.executable, str(script), str(out)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    files = sorted((p.relative_to(out).as_posix(), p.read_text()) for p in out.rglob("*") if p.is_file())
    last_err = done.stderr.strip().splitlines()[-1:] if done.stderr.strip() else []
    return done.returncode, done.stdout, last_err, files


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_a_quick_exit_ends_as_the_interpreter_does(name: str, tmp_path: Path) -> None:
    plain = _outcome(tmp_path, name, SCENARIOS[name], quick=False)
    quick = _outcome(tmp_path, name, SCENARIOS[name], quick=True)
    assert quick == plain


@pytest.mark.parametrize(("code", "status"), [(None, 0), (0, 0), (4, 4), (True, 1), ("message", 1)])
def test_exit_status_is_the_interpreters(code: object, status: int, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", f"raise SystemExit({code!r})"], capture_output=True, timeout=60)
    assert done.returncode == status  # the interpreter's own status for SystemExit(code)
    assert exit_status(code) == status
