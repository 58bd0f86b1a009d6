"""What a compile worker that replays autotune results needs (fp8_check.compile._autotune_replay): the results
file its XLA loads, a fresh process for another file, XLA's lookup log on, and what it logged read back.

XLA reads a results file once per process, into a process-wide cache (and says so once, at the first compile that
names it): so a worker replays one file for its life, and `Compiler` (fp8_check.compile._service) asks `switch`
before each compile whether to restart it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fp8_check.platforms import Profile
from fp8_check.targets import _autotune_results

Loads = tuple[str, int, int]  # a results file as a worker loads it: path, mtime, size


class ReplayState:
    """Which results file one worker's XLA loads, and what each compile took from it."""

    def __init__(self) -> None:
        self.loads: Loads | None = None  # None: a plain worker (no file, no lookup log)
        self._loaded: set[int] = set()  # worker pids whose XLA said it loaded its file
        self._parsed: dict[Loads, _autotune_results.ResultsFile | None] = {}

    def ready(self, worker, profile: Profile) -> Loads | None:
        """Make `worker` (a service.Worker) right for `profile`: a fresh process when it loads another file (or none),
        XLA's lookup log on while it replays one. Returns the file it loads (OSError, AutotuneResultsError)."""
        path = profile.compiler_options.get(_autotune_results.LOAD_OPTION)
        loads = None
        if path:
            st = Path(str(path)).stat()
            loads = (str(path), st.st_mtime_ns, st.st_size)
        if loads != self.loads and worker.proc is not None:
            worker.close()
        self.loads = loads
        worker.extra_env = dict(_autotune_results.LOG_ENV) if loads else {}
        if loads:
            self.results()
        return loads

    @staticmethod
    def mark(worker) -> tuple[int | None, int]:
        """Where the worker's log stands before a compile (its pid, its stderr's size)."""
        return (worker.proc.pid if worker.proc else None), worker.stderr_size()

    def results(self) -> _autotune_results.ResultsFile | None:
        """The parsed file (None: the stand-in, loaded where a target and release have none); AutotuneResultsError."""
        assert self.loads is not None
        if self.loads not in self._parsed:
            path = self.loads[0]
            self._parsed[self.loads] = None if path == str(_autotune_results.stand_in()) else \
                dataclasses.replace(_autotune_results.load_results(Path(path)), path=_autotune_results.shown_path(path))
        return self._parsed[self.loads]

    def coverage(self, worker, mark: tuple[int | None, int]) -> _autotune_results.Coverage:
        """What the compile just done (its log: the worker's stderr since `mark`; all of it after a restart) took
        from the file."""
        pid = worker.proc.pid if worker.proc else -1
        log = worker.stderr_since(mark[1] if pid == mark[0] else 0)
        if _autotune_results.logged_loaded(log):
            self._loaded.add(pid)
        return _autotune_results.coverage(log, self.results(), loaded=pid in self._loaded)
