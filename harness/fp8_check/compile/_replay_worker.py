"""What a compile worker that replays autotune results needs (fp8_check.compile._autotune_replay): the results
file its XLA loads, a fresh process for another file, XLA's lookup log on, and what it logged read back.

XLA reads a results file once per process, into a process-wide cache (and says so once, at the first compile that
names it): so a worker replays one file for its life, and `Compiler` (fp8_check.compile._service) asks `switch`
before each compile whether to restart it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fp8_check import targets
from fp8_check.platforms import Profile

Loads = tuple[str, int, int]  # a results file as a worker loads it: path, mtime, size


class ReplayState:
    """Which results file one worker's XLA loads, and what each compile took from it."""

    def __init__(self) -> None:
        self.loads: Loads | None = None  # None: a plain worker (no file, no lookup log)
        self._loaded: set[int] = set()  # worker pids whose XLA said it loaded its file
        self._parsed: dict[Loads, targets.ResultsFile | None] = {}

    def ready(self, worker, profile: Profile) -> Loads | None:
        """Make `worker` (a service.Worker) right for `profile`: a fresh process when it loads another file (or none),
        XLA's lookup log on while it replays one. Returns the file it loads (OSError, AutotuneResultsError)."""
        path = profile.compiler_options.get(targets.LOAD_OPTION)
        loads = None
        if path:
            st = Path(str(path)).stat()
            loads = (str(path), st.st_mtime_ns, st.st_size)
        if loads != self.loads and worker.proc is not None:
            worker.close()
        self.loads = loads
        worker.extra_env = dict(targets.LOG_ENV) if loads else {}
        if loads:
            self.results()
        return loads

    @staticmethod
    def mark(worker) -> tuple[int | None, int]:
        """Where the worker's log stands before a compile (its pid, its stderr's size)."""
        return (worker.proc.pid if worker.proc else None), worker.stderr_size()

    def results(self) -> targets.ResultsFile | None:
        """The parsed file (None: the stand-in, loaded where a target and release have none); AutotuneResultsError."""
        assert self.loads is not None
        if self.loads not in self._parsed:
            path = self.loads[0]
            self._parsed[self.loads] = None if path == str(targets.stand_in()) else \
                dataclasses.replace(targets.load_results(Path(path)), path=targets.shown_path(path))
        return self._parsed[self.loads]

    def coverage(self, worker, mark: tuple[int | None, int]) -> targets.Coverage:
        """What the compile just done (its log: the worker's stderr since `mark`; all of it after a restart) took
        from the file."""
        pid = worker.proc.pid if worker.proc else -1
        log = worker.stderr_since(mark[1] if pid == mark[0] else 0)
        if targets.logged_loaded(log):
            self._loaded.add(pid)
        return targets.coverage(log, self.results(), loaded=pid in self._loaded)
