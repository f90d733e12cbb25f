"""A finished command's process ends without the interpreter's teardown.

A Python that imported torch, Lightning and W&B spends about a second after a command's last line freeing
its thousands of modules one object at a time (``benchmarks.md``, the training loop: 1.06 s against 0.04 s
with the same exit handlers run). Nothing a command writes waits on that: what it must still do runs here in
the interpreter's own order, then ``os._exit`` ends the process with the command's status:

1. threads: ``threading``'s shutdown hooks (a thread pool told to stop) and every non-daemon thread joined;
2. the ``atexit`` handlers: logging's flush and close, W&B's teardown, temporary folders, multiprocessing's
   children, coverage's data;
3. the standard streams flushed.

Only a command that ended by returning or by ``SystemExit`` ends this way. Any other exception (an error, a
Ctrl-C) rises as before: the interpreter prints it and ends the process as it always does.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from collections.abc import Callable
from typing import NoReturn


def exit_status(code: object) -> int:
    """The status the interpreter gives ``SystemExit(code)``: None is 0, an int itself, anything else is printed
    to stderr and is 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def run_then_exit(main: Callable[[], object]) -> NoReturn:
    """Run a command's ``main`` and end the process with its status, skipping the interpreter's teardown."""
    try:
        main()
        status = 0
    except SystemExit as stop:
        status = exit_status(stop.code)
    end_process(status)


def end_process(status: int) -> NoReturn:
    """What the interpreter does at exit that anyone can observe, then ``os._exit(status)``."""
    shutdown = getattr(threading, "_shutdown", None)  # the interpreter's own first step at exit (CPython)
    if shutdown is not None:
        shutdown()
    else:
        for thread in threading.enumerate():
            if thread is not threading.main_thread() and not thread.daemon:
                thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: the interpreter's flush would fail alike
            status = status or 120
    os._exit(status & 0xFF)
