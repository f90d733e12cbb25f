"""What the test files share, each in one home: where things are (``paths``), the tiny composed config
(``config``), a child process's environment (``env``), the training command as a process (``cli``) and in
this one (``runs``), the sweep helpers (``sweeps``), fixture files and the run-order record (``durations``)."""
