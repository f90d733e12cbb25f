"""stop_guard (experiments/training/cell_contract.py) in the test's process: the first Ctrl-C stops the block, a
second one while its ending is recorded is noted and not raised, and the previous handler comes back. The
end-to-end check of a real run given two Ctrl-C is tests/experiments/training/test_faults.py (one delay)."""

from __future__ import annotations

import signal

import pytest

from experiments.training import cell_contract
from experiments.training.cell_contract import stop_guard


@pytest.fixture
def sigint_default(monkeypatch: pytest.MonkeyPatch):
    """Ctrl-C as a terminal delivers it (a test worker may have inherited it ignored), and the stop flags fresh."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    monkeypatch.setitem(cell_contract._STOP, "hold", False)
    monkeypatch.setitem(cell_contract._STOP, "stopping", False)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_second_ctrl_c_while_recording_the_first_is_noted_not_raised(sigint_default, capfd) -> None:
    recorded = []
    with pytest.raises(KeyboardInterrupt), stop_guard():
        try:
            signal.raise_signal(signal.SIGINT)  # the first Ctrl-C: the run stops here
        except KeyboardInterrupt:
            signal.raise_signal(signal.SIGINT)  # a second one while the ending is being recorded
            recorded.append("result written")
            raise
    assert recorded == ["result written"], "the second Ctrl-C did not interrupt the recording"
    assert "stopping already" in capfd.readouterr().err
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, "the previous handler is back"


def test_a_process_ending_after_the_stop_keeps_noting_further_ctrl_c(sigint_default, capfd) -> None:
    cell_contract.exit_after_stop()
    with pytest.raises(KeyboardInterrupt), stop_guard():
        signal.raise_signal(signal.SIGINT)
    signal.raise_signal(signal.SIGINT)  # after the block, as an atexit handler runs: noted, not raised
    assert "stopping already" in capfd.readouterr().err
